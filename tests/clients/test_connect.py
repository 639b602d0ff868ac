"""``python manage.py connect`` (SPEC §13): each client's user hooks written into a
scratch HOME, merged into what its settings already say, updated by a rerun and taken
out by ``--remove``; the board and token in boards.json, mode 0600. The hooks it writes
run the forwarder in its fast form (this Python, ``-I -S``), and run as the clients run
them (``sh -c``) against the real door: a gated call blocks when the board is away, and
when the forwarder cannot start at all."""

from __future__ import annotations

import io
import json
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from boards.clients import forwarder, registry, setup
from boards.gates import rules as gaterules
from boards.models import AgentToken, ClientSession, GateRule
from tests.support.factories import make_board, make_token

URL = "http://127.0.0.1:8000/boards/team/"
TOKEN = "ak_test_token_123456"
# The fast form's start: this interpreter by its absolute path, isolated, without site.
FAST = shlex.join([sys.executable, "-I", "-S", "-c"])


def connect(*args: str) -> str:
    out = io.StringIO()
    call_command("connect", "--url", URL, *args, stdout=out)
    return out.getvalue()


def every_client() -> list[str]:
    return [arg for name in registry.NAMES for arg in ("--client", name)]


def commands(settings: dict) -> list[str]:
    return [
        h["command"] for entries in settings["hooks"].values() for e in entries for h in e["hooks"]
    ]


def test_each_client_gets_its_hooks_where_it_reads_them(home):
    out = connect(*every_client(), "--token", TOKEN)

    claude = json.loads((home / ".claude/settings.json").read_text())
    [pre] = claude["hooks"]["PreToolUse"]
    assert pre["matcher"] == "*"
    gate = pre["hooks"][0]["command"]
    assert gate.startswith(FAST) and "import forwarder;" in gate, gate
    # The forwarder is imported from its copy beside boards.json, out of the project.
    config = home / ".config/agent-kanban"
    assert f" {config} --client claude-code --timeout 3630 || " in gate, gate
    assert (config / "forwarder.py").read_text() == Path(forwarder.__file__).read_text()
    assert list((config / "__pycache__").glob("forwarder.*.pyc"))  # compiled: the fast form
    assert pre["hooks"][0]["onFailure"] == "block"  # a killed hook blocks the call
    [start] = claude["hooks"]["SessionStart"][0]["hooks"]
    assert start["command"].endswith(f" {config} --client claude-code --timeout 10")
    assert "onFailure" not in start
    [skill] = claude["hooks"]["PreSkillShellCommand"][0]["hooks"]  # held like a tool call
    assert "--timeout 3630 || " in skill["command"] and skill["timeout"] == 3660
    assert all(setup.ours(c) for c in commands(claude))
    assert set(claude["hooks"]) == set(registry.BY_NAME["claude-code"].events)
    codex = json.loads((home / ".codex/hooks.json").read_text())
    assert "--client codex" in codex["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    gemini = json.loads((home / ".gemini/settings.json").read_text())
    [before] = gemini["hooks"]["BeforeTool"]
    assert before["hooks"][0]["timeout"] == (3630 + 30) * 1000  # milliseconds
    qwen = json.loads((home / ".qwen/settings.json").read_text())
    [held] = qwen["hooks"]["PreToolUse"][0]["hooks"]
    assert "--timeout 58 || " in held["command"] and held["timeout"] == 60  # under its cap
    copilot = json.loads((home / ".copilot/hooks/agent-kanban.json").read_text())
    assert copilot["version"] == 1
    assert set(copilot["hooks"]) >= {"PreToolUse", "PostToolUse", "SessionStart"}  # PascalCase
    copilot_gate = copilot["hooks"]["PreToolUse"][0]["bash"]
    assert copilot_gate.startswith(FAST) and "--client copilot" in copilot_gate
    plugin = (home / ".config/opencode/plugin/agent-kanban.js").read_text()
    assert '"tool.execute.before"' in plugin and "hooks/opencode" in plugin
    assert "/hooks" in out  # Codex's trust step is said

    boards = home / ".config/agent-kanban/boards.json"
    assert stat.S_IMODE(boards.stat().st_mode) == 0o600
    assert json.loads(boards.read_text()) == {
        "version": 1,
        "boards": [{"url": URL, "token": TOKEN, "agent": ""}],
    }


def test_it_keeps_what_a_settings_file_already_says_and_a_rerun_updates_in_place(home):
    settings = home / ".gemini/settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "write_file", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    settings.write_text(json.dumps({"theme": "dark", "hooks": {"BeforeTool": [mine]}}))

    connect("--client", "gemini", "--token", TOKEN)
    connect("--client", "gemini", "--token", TOKEN)

    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    assert data["hooks"]["BeforeTool"][0] == mine
    assert len(data["hooks"]["BeforeTool"]) == 2  # theirs and one of ours, not two
    assert sum(setup.ours(c) for c in commands(data)) == len(registry.BY_NAME["gemini"].events)


def test_remove_takes_out_only_what_connect_wrote(home):
    settings = home / ".claude/settings.json"
    settings.parent.mkdir()
    mine = {"hooks": [{"type": "command", "command": "./notify.sh"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [mine]}}))
    connect(
        "--client", "claude-code", "--client", "copilot", "--client", "opencode", "--token", TOKEN
    )

    out = connect(
        "--client", "claude-code", "--client", "copilot", "--client", "opencode", "--remove"
    )

    assert json.loads(settings.read_text()) == {"model": "opus", "hooks": {"Stop": [mine]}}
    assert not (home / ".copilot/hooks/agent-kanban.json").exists()
    assert not (home / ".config/opencode/plugin/agent-kanban.js").exists()
    assert json.loads((home / ".config/agent-kanban/boards.json").read_text())["boards"] == []
    assert "removed" in out


def test_a_dry_run_prints_the_files_writes_nothing_and_hides_the_token(home):
    out = connect("--client", "codex", "--token", TOKEN, "--dry-run")

    assert "would write" in out and ".codex/hooks.json" in out and "--client codex" in out
    assert TOKEN not in out
    assert not any(home.rglob("*.json"))


def test_the_installed_clients_are_found_on_path(home):
    (home / "bin").mkdir()
    for binary in ("gemini", "qwen"):
        (home / "bin" / binary).write_text("#!/bin/sh\n")
        (home / "bin" / binary).chmod(0o755)

    connect("--token", TOKEN)

    assert (home / ".gemini/settings.json").exists() and (home / ".qwen/settings.json").exists()
    assert not (home / ".claude").exists()


def test_with_no_client_installed_or_named_it_says_so(home):
    with pytest.raises(CommandError, match="--client"):
        connect("--token", TOKEN)


@pytest.mark.parametrize(
    "url", ["ftp://h/boards/team/", "http://h/team/", "http://h/boards/", "not a url"]
)
def test_a_url_that_names_no_board_is_refused_and_nothing_is_written(home, url):
    with pytest.raises(CommandError, match="not a board URL"):
        call_command("connect", "--url", url, "--client", "codex", "--token", TOKEN)
    assert not any(home.rglob("*.json"))


def test_a_settings_file_that_is_not_json_is_left_alone(home):
    settings = home / ".qwen/settings.json"
    settings.parent.mkdir()
    settings.write_text("{ // a comment\n}")
    with pytest.raises(CommandError, match="not JSON"):
        connect("--client", "qwen", "--token", TOKEN)
    assert settings.read_text() == "{ // a comment\n}"


def test_without_a_token_it_issues_a_team_token_for_a_board_on_this_server(home, db):
    board = make_board("team", "Team board")
    connect("--client", "codex")
    [entry] = json.loads((home / ".config/agent-kanban/boards.json").read_text())["boards"]
    token = AgentToken.objects.get(board=board)
    assert token.is_team and entry["token"].startswith(token.prefix)


def test_without_a_token_for_a_board_elsewhere_it_asks_for_one(home, db):
    with pytest.raises(CommandError, match="--token"):
        connect("--client", "codex")


# -- the console script's form, as earlier versions wrote it ---------------------------------

OLD = {
    "SessionStart": [
        {"hooks": [{"type": "command", "command": "kanban-hook --client claude-code --timeout 10"}]}
    ],
    "PreToolUse": [
        {
            "matcher": "*",
            "hooks": [
                {
                    "type": "command",
                    "command": "/usr/local/bin/kanban-hook --client claude-code --timeout 3630",
                }
            ],
        }
    ],
}


def test_ours_knows_the_console_script_and_the_fast_form_and_nothing_else():
    fast = setup.command(setup.forwarder(), "claude-code", 3630, gated=True)
    assert setup.ours(fast)
    assert setup.ours("kanban-hook --client codex --timeout 10")
    assert setup.ours("'/home/ana/.local/bin/kanban-hook' --client gemini --timeout 3630")
    for theirs in ("./lint.sh", "python3 -I -S -c pass --client x", "kanban-hook", None, 3):
        assert not setup.ours(theirs)


def test_a_rerun_replaces_the_console_script_entries_and_remove_takes_out_either(home):
    settings = home / ".claude/settings.json"
    settings.parent.mkdir()
    mine = {"hooks": [{"type": "command", "command": "./notify.sh"}]}
    settings.write_text(json.dumps({"hooks": {**OLD, "Stop": [mine]}}))

    connect("--client", "claude-code", "--token", TOKEN)

    data = json.loads(settings.read_text())
    assert not any("kanban-hook --client" in c for c in commands(data))  # the old ones gone
    hook = setup.forwarder(sys.executable, home / ".config/agent-kanban")
    assert [e["hooks"][0]["command"] for e in data["hooks"]["PreToolUse"]] == [
        setup.command(hook, "claude-code", 3630, gated=True)
    ]
    assert data["hooks"]["Stop"][0] == mine and len(data["hooks"]["Stop"]) == 2

    connect("--client", "claude-code", "--remove")
    assert json.loads(settings.read_text()) == {"hooks": {"Stop": [mine]}}

    settings.write_text(json.dumps({"hooks": OLD}))  # the old form alone, never rerun
    connect("--client", "claude-code", "--remove")
    assert json.loads(settings.read_text()) == {}


# -- the written commands, run as a client runs them -----------------------------------------


def pre_tool_use(command: str, event: str = "PreToolUse", call: str = "tu-1") -> dict:
    return {
        "hook_event_name": event,
        "session_id": "connect-1",
        "cwd": "/home/ana/project",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": call,
    }


def written(home: Path, event: str) -> str:
    settings = json.loads((home / ".claude/settings.json").read_text())
    [entry] = settings["hooks"][event]
    [hook] = entry["hooks"]
    return hook["command"]


def through_sh(command: str, event: dict, home: Path) -> subprocess.CompletedProcess[str]:
    """``sh -c command`` with the hook input on stdin, in the small environment a client
    passes on (no KANBAN_*, no PYTHONPATH: the board comes from boards.json)."""
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd="/",
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
def test_the_written_commands_run_through_sh_against_the_board(home, live_server, settings):
    settings.KANBAN_SESSION_PUSH_SECONDS = 0  # no roster push left for after the test
    board = make_board("team", "Team board")
    token = make_token(board, "claude")
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern=r"\bdropdb\b", decision="deny"
    )
    GateRule.objects.filter(board=board, decision="ask").delete()
    call_command(
        "connect",
        "--url",
        f"{live_server.url}/boards/team/",
        "--client",
        "claude-code",
        "--token",
        token,
        stdout=io.StringIO(),
    )
    gate, start = written(home, "PreToolUse"), written(home, "SessionStart")

    started = through_sh(start, {**pre_tool_use(""), "hook_event_name": "SessionStart"}, home)
    denied = through_sh(gate, pre_tool_use("dropdb production"), home)
    free = through_sh(gate, pre_tool_use("ls -la", call="tu-2"), home)

    assert (started.returncode, started.stderr) == (0, "")
    assert (denied.returncode, denied.stderr) == (0, "")
    answer = json.loads(denied.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "Blocked by the board's rule" in answer["permissionDecisionReason"]
    assert (free.returncode, free.stdout, free.stderr) == (0, "", "")
    [session] = ClientSession.objects.filter(board=board)  # the door recorded them
    assert [c["outcome"] for c in session.calls] == ["denied", "running"]


def test_with_the_board_away_a_gated_call_is_blocked_and_the_rest_pass(home):
    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    call_command(
        "connect",
        "--url",
        f"http://127.0.0.1:{port}/boards/team/",
        "--client",
        "claude-code",
        "--token",
        TOKEN,
        stdout=io.StringIO(),
    )

    blocked = through_sh(written(home, "PreToolUse"), pre_tool_use("rm -rf build"), home)
    after = through_sh(written(home, "PostToolUse"), pre_tool_use("ls", "PostToolUse"), home)

    assert blocked.returncode == 2, blocked
    assert f"The Agent Kanban board at http://127.0.0.1:{port}/" in blocked.stderr
    assert "could not be reached (connection refused)" in blocked.stderr
    assert "did not run" not in blocked.stderr  # the forwarder's own reason, alone
    assert (after.returncode, after.stdout, after.stderr) == (0, "", "")


def test_a_gated_call_is_blocked_when_the_forwarder_cannot_start(home, tmp_path):
    connect("--client", "claude-code", "--client", "copilot", "--token", TOKEN)
    # The interpreter connect wrote is gone (its venv deleted, its Python upgraded).
    gone = str(tmp_path / "venv-deleted" / "bin" / "python3")
    settings = home / ".claude/settings.json"
    settings.write_text(settings.read_text().replace(sys.executable, gone))
    copilot_file = home / ".copilot/hooks/agent-kanban.json"
    copilot_file.write_text(copilot_file.read_text().replace(sys.executable, gone))
    copilot_gate = json.loads(copilot_file.read_text())["hooks"]["PreToolUse"][0]["bash"]

    blocked = through_sh(written(home, "PreToolUse"), pre_tool_use("rm -rf build"), home)
    by_copilot = through_sh(copilot_gate, {"toolName": "bash"}, home)
    after = through_sh(written(home, "PostToolUse"), pre_tool_use("ls", "PostToolUse"), home)

    assert blocked.returncode == 2, blocked
    assert "kanban-hook did not run, so this tool call is blocked" in blocked.stderr
    assert by_copilot.returncode == 2 and "did not run" in by_copilot.stderr
    assert after.returncode == 127  # not gated: the client reads it as no verdict, and goes on


def test_the_fast_form_loads_no_site_and_nothing_heavy(home):
    connect("--client", "claude-code", "--token", TOKEN)
    words = shlex.split(written(home, "PostToolUse"))
    assert words[:4] == [sys.executable, "-I", "-S", "-c"]
    # The same interpreter and program, asked which modules it imports on a run that
    # reads its input and its boards.json and fails to connect (port 9: discard).
    (home / ".config/agent-kanban/boards.json").write_text(
        json.dumps(
            {
                "version": 1,
                "boards": [{"url": "http://127.0.0.1:9/boards/team/", "token": TOKEN, "agent": ""}],
            }
        )
    )
    run = subprocess.run(
        [words[0], "-X", "importtime", *words[1:]],
        input=json.dumps(pre_tool_use("ls", "PostToolUse")),
        capture_output=True,
        text=True,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "forwarder" in imported
    heavy = {"site", "json", "http", "http.client", "ssl", "socket", "hashlib", "hmac", "re"}
    assert not imported & (heavy | {"boards", "django", "urllib", "email", "selectors"})

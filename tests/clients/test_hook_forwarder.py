"""``kanban-hook`` (``boards/clients/forwarder.py``), run as the clients run it: a process
with the hook input JSON on stdin, judged by its exit status, stdout and stderr.

The board here is a tiny HTTP server on loopback that proves its answers as the board
does (``X-Kanban-Proof``); tests/clients/test_forwarder_hostile.py has every way an
answer can go wrong, tests/clients/test_forwarder_board.py the real door.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.liveserver import ROOT
from tests.support.hook_server import HookServer, deny

PRE_TOOL_USE = {
    "session_id": "5033a72e-d64d-4c44-8e2f-e41fce9ac82d",
    "cwd": "/home/ana/project",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build", "description": "clean"},
    "tool_use_id": "toolu_01",
}
POST_TOOL_USE = {**PRE_TOOL_USE, "hook_event_name": "PostToolUse", "tool_response": {}}
DENY = deny("Denied by ana: not on main")
TOKEN = "tok-123"


@pytest.fixture
def board() -> Iterator[HookServer]:
    with HookServer() as board:
        yield board


@pytest.fixture(autouse=True)
def config_home(tmp_path, monkeypatch) -> Path:
    """An empty ``XDG_CONFIG_HOME`` of the test's own (never the person's boards.json)."""
    home = tmp_path / "config"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def write_config(home: Path, *boards: dict[str, str]) -> Path:
    path = home / "agent-kanban" / "boards.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "boards": list(boards)}))
    return path


def hook(
    event: dict[str, Any] | bytes, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m boards.clients.forwarder args…`` with ``event`` on stdin, from a directory
    outside the project (as a client runs it, from the agent's project); ``KANBAN_*`` only
    from ``env``."""
    stdin = event if isinstance(event, bytes) else json.dumps(event).encode()
    base = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    result = subprocess.run(
        [sys.executable, "-m", "boards.clients.forwarder", *args],
        input=stdin,
        capture_output=True,
        cwd="/",
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=30,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def at(url: str, **more: str) -> dict[str, str]:
    """The board at ``url`` with the test's token in boards.json (the only place a board
    comes from), and the environment that picks it (the same token: refused otherwise)."""
    write_config(Path(os.environ["XDG_CONFIG_HOME"]), {"url": url, "token": TOKEN, "agent": ""})
    return {"KANBAN_HOOK_URL": url, "KANBAN_TOKEN": TOKEN, **more}


def test_forwards_the_hook_input_with_the_token_and_agent_and_prints_the_answer(board):
    board.answers["PreToolUse"] = DENY

    result = hook(PRE_TOOL_USE, env=at(board.url, KANBAN_AGENT="alice"))

    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == DENY
    [call] = board.calls
    assert call.path == "/api/boards/ops/hooks/claude-code"
    assert call.json == PRE_TOOL_USE
    headers = call.headers
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["X-Agent"] == "alice"
    assert headers["Content-Type"] == "application/json"


def test_the_answer_is_printed_byte_for_byte(board):
    board.body = rb'{"hookSpecificOutput":  {"hookEventName": "PreToolUse", "x": "\u00e9"}}'

    result = hook(PRE_TOOL_USE, env=at(board.url))

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == board.body.decode() + "\n"


@pytest.mark.parametrize(
    "client", ["claude-code", "codex", "copilot", "gemini", "qwen", "opencode"]
)
def test_client_picks_the_door_of_the_configured_board(board, client):
    result = hook(PRE_TOOL_USE, "--client", client, env=at(board.url))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [call] = board.calls
    assert call.path == f"/api/boards/ops/hooks/{client}"


def test_the_url_on_the_command_line_picks_a_configured_board(board):
    url = board.url.replace("claude-code", "gemini")

    result = hook(POST_TOOL_USE, "--url", url, env=at(board.url))

    assert result.returncode == 0
    [call] = board.calls
    assert call.path == "/api/boards/ops/hooks/gemini"  # the client the URL names


def test_sends_no_agent_header_unless_set(board):
    result = hook(POST_TOOL_USE, env=at(board.url))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [call] = board.calls
    assert "X-Agent" not in call.headers


def test_reads_the_board_and_token_from_the_config_file(board, config_home):
    base = board.url.removesuffix("api/boards/ops/hooks/claude-code")
    write_config(
        config_home,
        {"url": f"{base}boards/ops/", "token": "from-file", "agent": "bob"},
    )

    result = hook(PRE_TOOL_USE)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [call] = board.calls
    assert (call.headers["Authorization"], call.headers["X-Agent"]) == ("Bearer from-file", "bob")


def test_the_url_must_match_a_board_of_the_file_and_picks_among_them(board, config_home):
    base = board.url.removesuffix("api/boards/ops/hooks/claude-code")
    write_config(
        config_home,
        {"url": "http://127.0.0.1:9/boards/other/", "token": "other", "agent": ""},
        {"url": f"{base}boards/ops/", "token": "ops-token", "agent": ""},
    )

    picked = hook(PRE_TOOL_USE, "--url", f"{base}boards/ops/")
    foreign = hook(PRE_TOOL_USE, "--url", f"{base}boards/elsewhere/")

    assert picked.returncode == 0
    [call] = board.calls
    assert call.headers["Authorization"] == "Bearer ops-token"
    assert foreign.returncode == 2
    assert "not a configured board" in foreign.stderr


def test_a_url_and_a_token_in_the_environment_without_kanban_hook_url_is_not_enough(board):
    # A repository's settings can say any --url: the person's token must not follow it.
    result = hook(PRE_TOOL_USE, "--url", board.url, env={"KANBAN_TOKEN": TOKEN})

    assert result.returncode == 2
    assert "none is configured" in result.stderr
    assert board.calls == []


def test_an_empty_answer_prints_nothing(board):
    board.answers["PreToolUse"] = {}

    result = hook(PRE_TOOL_USE, env=at(board.url))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_tool_call_is_blocked_at_once_when_the_board_refuses_connections(closed_url):
    started = time.monotonic()
    result = hook(PRE_TOOL_USE, env=at(closed_url))

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"The Agent Kanban board at {closed_url} could not be reached (connection refused), "
        "so this tool call is blocked until it can be.\n"
    )
    assert time.monotonic() - started < 5


def test_other_events_never_block_when_the_board_is_away(closed_url):
    for name in ("SessionStart", "PostToolUse", "Stop", "SessionEnd", "AfterTool"):
        result = hook({**POST_TOOL_USE, "hook_event_name": name}, env=at(closed_url))

        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), name


@pytest.mark.parametrize("name", ["BeforeTool", "PreSkillShellCommand"])
def test_gemini_before_tool_and_claude_skill_shell_lines_are_gated_like_pre_tool_use(
    closed_url, name
):
    result = hook({**PRE_TOOL_USE, "hook_event_name": name}, env=at(closed_url))

    assert result.returncode == 2
    assert "could not be reached" in result.stderr


def test_copilot_is_blocked_with_a_deny_on_stdout(closed_url):
    result = hook(PRE_TOOL_USE, "--client", "copilot", env=at(closed_url))

    assert (result.returncode, result.stderr) == (0, "")
    answer = json.loads(result.stdout)
    assert answer["permissionDecision"] == "deny"
    assert "could not be reached (connection refused)" in answer["permissionDecisionReason"]


def test_a_held_call_is_waited_for(board):
    board.hold.set()
    board.answers["PreToolUse"] = DENY
    threading.Timer(1.0, board.hold.clear).start()

    result = hook(PRE_TOOL_USE, "--timeout", "20", env=at(board.url))

    assert result.returncode == 0
    assert json.loads(result.stdout) == DENY


def test_no_answer_within_the_timeout_blocks(board):
    board.hold.set()

    result = hook(PRE_TOOL_USE, "--timeout", "0.5", env=at(board.url))

    assert result.returncode == 2
    assert "(no answer within 0.5 s)" in result.stderr


@pytest.mark.parametrize(
    "args,problem",
    [
        (["--client", "cursor"], "unknown client 'cursor'"),
        (["--timeout", "soon"], "--timeout 'soon' is not a number of seconds"),
        (["--timeout"], "--timeout needs a value"),
        (["--verbose"], "unknown option '--verbose'"),
    ],
)
def test_a_mistake_on_the_command_line_blocks_a_tool_call_and_nothing_else(board, args, problem):
    blocked = hook(PRE_TOOL_USE, *args, env=at(board.url))
    passed = hook(POST_TOOL_USE, *args, env=at(board.url))

    assert blocked.returncode == 2
    assert problem in blocked.stderr
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")
    assert board.calls == []


def test_help_says_how_to_configure_it():
    result = hook(b"", "--help")

    assert result.returncode == 0
    assert "boards.json" in result.stdout and "KANBAN_HOOK_URL" in result.stdout


def test_the_forwarder_imports_nothing_outside_the_standard_library():
    code = (
        "import sys, boards.clients.forwarder; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'pydantic', 'kanban', 'channels')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
        check=True,
    )

    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("crash", [MemoryError, RecursionError, KeyboardInterrupt, OSError])
def test_a_crash_inside_blocks_a_tool_call_and_nothing_else(crash, monkeypatch, capsys):
    from boards.clients import forwarder

    def broken(*args: object) -> None:
        raise crash

    monkeypatch.setattr(forwarder, "_post", broken)
    monkeypatch.setenv("KANBAN_HOOK_URL", "http://127.0.0.1:9/api/boards/ops/hooks/claude-code")
    monkeypatch.setenv("KANBAN_TOKEN", TOKEN)
    at("http://127.0.0.1:9/api/boards/ops/hooks/claude-code")
    results = []
    for event in (PRE_TOOL_USE, POST_TOOL_USE):
        stdin = io.TextIOWrapper(io.BytesIO(json.dumps(event).encode()))
        monkeypatch.setattr(sys, "stdin", stdin)
        results.append((forwarder.main([]), *capsys.readouterr()))

    blocked, passed = results
    assert blocked == (
        2,
        "",
        "The Agent Kanban board at http://127.0.0.1:9/api/boards/ops/hooks/claude-code gave "
        f"no verdict (kanban-hook failed: {crash.__name__}), so this tool call is blocked.\n",
    )
    assert passed == (0, "", "")

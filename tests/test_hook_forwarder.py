"""``kanban-hook`` (``boards/hook.py``), run as the clients run it: a process with the hook
input JSON on stdin, judged by its exit status, stdout and stderr.

A tool call (``PreToolUse``, Gemini CLI's ``BeforeTool``) is blocked (exit 2, one line on
stderr naming the board) whenever the board gives no usable answer; every other event
then exits 0 silently. The board here is a tiny HTTP server on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hook_server import HookServer, deny

ROOT = Path(__file__).resolve().parent.parent

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


@pytest.fixture
def board() -> Iterator[HookServer]:
    with HookServer() as board:
        yield board


@pytest.fixture
def closed_url() -> str:
    """A loopback URL on which nothing listens (connection refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/boards/ops/hooks/claude-code"


def hook(
    event: dict[str, Any] | bytes, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m boards.hook args…`` with ``event`` on stdin, from a directory outside the
    project (as a client runs it, from the agent's project)."""
    stdin = event if isinstance(event, bytes) else json.dumps(event).encode()
    base = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    result = subprocess.run(
        [sys.executable, "-m", "boards.hook", *args],
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


def test_forwards_the_hook_input_with_the_token_and_agent_and_prints_the_answer(board):
    board.answers["PreToolUse"] = DENY

    result = hook(
        PRE_TOOL_USE,
        "--url",
        board.url,
        env={"KANBAN_TOKEN": "tok-123", "KANBAN_AGENT": "alice"},
    )

    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == DENY
    [call] = board.calls
    assert call.path == "/api/boards/ops/hooks/claude-code"
    assert call.json == PRE_TOOL_USE
    headers = call.headers
    assert headers["Authorization"] == "Bearer tok-123"
    assert headers["X-Agent"] == "alice"
    assert headers["Content-Type"] == "application/json"


def test_reads_the_url_from_the_environment_and_sends_no_agent_header_unless_set(board):
    result = hook(POST_TOOL_USE, env={"KANBAN_HOOK_URL": board.url, "KANBAN_TOKEN": "t"})

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    [call] = board.calls
    assert "X-Agent" not in call.headers


def test_an_empty_answer_prints_nothing(board):
    board.answers["PreToolUse"] = {}

    result = hook(PRE_TOOL_USE, "--url", board.url)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_tool_call_is_blocked_at_once_when_the_board_refuses_connections(closed_url):
    started = time.monotonic()
    result = hook(PRE_TOOL_USE, "--url", closed_url)

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"The Agent Kanban board at {closed_url} could not be reached (connection refused), "
        "so this tool call is blocked until it can be.\n"
    )
    assert time.monotonic() - started < 5


def test_other_events_never_block_when_the_board_is_away(closed_url):
    for name in ("SessionStart", "PostToolUse", "Stop", "SessionEnd", "AfterTool"):
        result = hook({**POST_TOOL_USE, "hook_event_name": name}, "--url", closed_url)

        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), name


def test_gemini_clis_before_tool_is_blocked_like_pre_tool_use(closed_url):
    result = hook({**PRE_TOOL_USE, "hook_event_name": "BeforeTool"}, "--url", closed_url)

    assert result.returncode == 2
    assert "could not be reached" in result.stderr


def test_an_error_answer_blocks_with_the_boards_message(board):
    board.status = 401
    board.body = b'{"error": {"code": "unauthorized", "message": "Unknown token."}}'

    result = hook(PRE_TOOL_USE, "--url", board.url)

    assert result.returncode == 2
    assert result.stderr == (
        f"The Agent Kanban board at {board.url} could not be reached (it answered HTTP 401: "
        "Unknown token.), so this tool call is blocked until it can be.\n"
    )


def test_a_redirect_is_not_followed_and_blocks(board):
    board.status = 302

    result = hook(PRE_TOOL_USE, "--url", board.url)

    assert result.returncode == 2
    assert "(it answered HTTP 302)" in result.stderr


@pytest.mark.parametrize("body", [b"<html>proxy error</html>", b"[]", b'"allow"'])
def test_an_answer_that_is_not_a_json_object_blocks(board, body):
    board.body = body

    result = hook(PRE_TOOL_USE, "--url", board.url)

    assert result.returncode == 2
    assert "(its answer is not a JSON object)" in result.stderr


def test_a_held_call_is_waited_for(board):
    board.hold.set()
    board.answers["PreToolUse"] = DENY
    threading.Timer(1.0, board.hold.clear).start()

    result = hook(PRE_TOOL_USE, "--url", board.url, "--timeout", "20")

    assert result.returncode == 0
    assert json.loads(result.stdout) == DENY


def test_no_answer_within_the_timeout_blocks(board):
    board.hold.set()

    result = hook(PRE_TOOL_USE, "--url", board.url, "--timeout", "0.5")

    assert result.returncode == 2
    assert "(no answer within 0.5 s)" in result.stderr


def test_no_connection_within_the_connect_timeout_blocks():
    # A listener whose backlog is full: the kernel drops further connection attempts.
    with socket.socket() as listener, socket.socket() as first:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        first.connect(listener.getsockname())
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/hooks"

        result = hook(PRE_TOOL_USE, "--url", url, "--connect-timeout", "0.5")

    assert result.returncode == 2
    assert "(no connection within 0.5 s)" in result.stderr


def test_a_name_that_does_not_resolve_blocks():
    url = "http://board.invalid/api/boards/ops/hooks/claude-code"

    result = hook(PRE_TOOL_USE, "--url", url)

    assert result.returncode == 2
    assert "(its name board.invalid does not resolve)" in result.stderr


def test_without_a_url_a_tool_call_is_blocked_and_other_events_pass():
    blocked = hook(PRE_TOOL_USE)
    passed = hook(POST_TOOL_USE)

    assert blocked.returncode == 2
    assert "no hook URL: pass --url or set KANBAN_HOOK_URL" in blocked.stderr
    assert (passed.returncode, passed.stdout, passed.stderr) == (0, "", "")


def test_input_that_is_not_a_json_object_blocks(board):
    result = hook(b"not json", "--url", board.url)

    assert result.returncode == 2
    assert result.stderr == "kanban-hook: the hook input on stdin is not a JSON object\n"
    assert board.calls == []


def test_the_forwarder_imports_nothing_outside_the_standard_library():
    code = (
        "import sys, boards.hook; "
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

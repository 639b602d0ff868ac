"""The real Claude Code CLI (2.1.332) against a stand-in board: what its hooks send, and
what it does with the answers. These prove the harness (``tests/support/``:
``claude_cli.py``, ``anthropic_standin.py``, ``hook_server.py``) and pin the client
behaviour the board's hook endpoint relies on (docs/claude-code-hooks.md); the board's own
end-to-end tests use the same harness.

- An http PreToolUse hook that answers deny blocks the call, and the model reads the
  reason as the tool's error: ``PreToolUse:Bash hook error: <reason>``.
- An http hook that cannot reach its URL gives no verdict: a tool the client allows
  (``--allowedTools``) runs. That is why a gated call goes through ``kanban-hook``:
- a command hook (the forwarder) blocks the call while the board cannot be reached, and
  the model reads the forwarder's one line naming the board;
- through the forwarder the board's answers are obeyed as the http hook's are, and it
  sees SessionStart, which 2.1.332 never sends to an http hook;
- a call the board holds is waited for (allow then runs it), and one held past the
  forwarder's ``--timeout`` is blocked, before the client's own hook timeout (30 s
  later) could let it run.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse
from tests.support.claude_cli import (
    VERSION,
    ClaudeRun,
    claude_binary,
    command_hook_settings,
    http_hook_settings,
    run_claude,
)
from tests.support.hook_server import HookServer, allow, deny

pytestmark = pytest.mark.slow  # the real CLI, a second or two a run

TOKEN = "kanban-token-123"
REASON = "Denied by ana on the board: not on the release branch"


@pytest.fixture(scope="module", autouse=True)
def claude() -> Path:
    return claude_binary()


@pytest.fixture
def board() -> Iterator[HookServer]:
    with HookServer() as board:
        yield board


def touch(api: AnthropicStandin, workdir: Path, settings: dict, **kwargs) -> ClaudeRun:
    """A session whose model runs one Bash call that creates ``project/made``."""
    return run_claude(
        "Make the file.",
        api_url=api.url,
        workdir=workdir,
        settings=settings,
        allowed_tools=["Bash"],
        env={"KANBAN_TOKEN": TOKEN, "KANBAN_AGENT": "alice"},
        **kwargs,
    )


SCRIPT = [ToolUse("Bash", {"command": "touch made", "description": "Make the file"}), Text("Done.")]


def test_the_pinned_cli_runs(claude: Path) -> None:
    version = subprocess.run(
        [str(claude), "--version"], capture_output=True, text=True, timeout=60, check=True
    )

    assert version.stdout.strip() == f"{VERSION} (Claude Code)"


def test_an_http_hook_that_denies_blocks_the_call_and_the_model_reads_why(board, tmp_path):
    board.answers["PreToolUse"] = deny(REASON)

    with AnthropicStandin(list(SCRIPT)) as api:
        run = touch(api, tmp_path, http_hook_settings(board.url, events=["PreToolUse"]))

    assert run.returncode == 0, run.stderr
    assert not (run.project / "made").exists()
    [result] = api.tool_results()
    assert result.is_error
    assert result.text == f"PreToolUse:Bash hook error: {REASON}"
    assert len(api.main_loop) == 2  # the model was asked again, with the refusal
    [call] = board.calls
    assert call.headers["Authorization"] == f"Bearer {TOKEN}"
    assert call.headers["X-Agent"] == "alice"
    assert call.json["tool_input"] == {"command": "touch made", "description": "Make the file"}


def test_an_http_hook_that_cannot_reach_the_board_lets_an_allowed_call_run(closed_url, tmp_path):
    with AnthropicStandin(list(SCRIPT)) as api:
        run = touch(api, tmp_path, http_hook_settings(closed_url, events=["PreToolUse"]))

    assert (run.project / "made").exists()  # fails open: why gated calls use the forwarder
    [response] = run.hook_responses("PreToolUse")
    assert response["outcome"] == "error"
    assert "ECONNREFUSED" in response["stderr"]


def test_the_forwarder_blocks_the_call_while_the_board_cannot_be_reached(closed_url, tmp_path):
    with AnthropicStandin(list(SCRIPT)) as api:
        run = touch(api, tmp_path, command_hook_settings(closed_url))

    assert run.returncode == 0, run.stderr
    assert not (run.project / "made").exists()
    [result] = api.tool_results()
    assert result.is_error
    assert result.text.startswith("PreToolUse:Bash hook error: [")  # the hook's command line
    assert result.text.endswith(
        f"]: The Agent Kanban board at {closed_url} could not be reached (connection "
        "refused), so this tool call is blocked until it can be.\n"
    )
    assert run.result["subtype"] == "success"  # the other events did not block


def test_through_the_forwarder_the_board_sees_every_event_and_its_deny_holds(board, tmp_path):
    board.answers["PreToolUse"] = deny(REASON)

    with AnthropicStandin(list(SCRIPT)) as api:
        run = touch(api, tmp_path, command_hook_settings(board.url))

    assert not (run.project / "made").exists()
    assert api.tool_results()[0].text == f"PreToolUse:Bash hook error: {REASON}"
    assert board.events() == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",  # a denied call has no PostToolUse(Failure): the board knows it denied
        "Stop",
        "SessionEnd",
    ]
    assert {call.headers["Authorization"] for call in board.calls} == {f"Bearer {TOKEN}"}
    assert {call.headers["X-Agent"] for call in board.calls} == {"alice"}
    start, *_, end = board.calls
    assert set(start.json) == {"session_id", "transcript_path", "cwd", "hook_event_name", "source"}
    assert start.json["source"] == "startup"
    assert start.json["cwd"] == str(run.project)
    assert end.json["reason"] == "other"
    assert len({call.json["session_id"] for call in board.calls}) == 1


def test_a_held_call_waits_for_the_boards_answer_and_an_allow_runs_it(board, tmp_path):
    board.answers["PreToolUse"] = allow("Approved by ana")
    board.hold.set()
    threading.Timer(3.0, board.hold.clear).start()  # a person decides after 3 s

    with AnthropicStandin(list(SCRIPT)) as api:
        run = touch(api, tmp_path, command_hook_settings(board.url, events=["PreToolUse"]))

    assert (run.project / "made").exists()
    assert api.tool_results()[0].is_error is False
    [response] = run.hook_responses("PreToolUse")
    assert response["outcome"] == "success"


def test_a_held_call_past_the_forwarders_timeout_is_blocked(board, tmp_path):
    board.hold.set()  # nobody decides

    with AnthropicStandin(list(SCRIPT)) as api:
        settings = command_hook_settings(board.url, events=["PreToolUse"], held_seconds=2)
        run = touch(api, tmp_path, settings)

    assert not (run.project / "made").exists()
    assert api.tool_results()[0].text.endswith(
        "gave no verdict (no answer within 2 s), so this tool call is blocked.\n"
    )


def test_the_http_hooks_of_a_short_session(board, tmp_path):
    script = [
        ToolUse("Bash", {"command": "echo hi", "description": "Say hi"}),
        ToolUse("Write", {"file_path": str(tmp_path / "project" / "note.txt"), "content": "x\n"}),
        ToolUse("Bash", {"command": "false", "description": "Fail"}),
        Text("All done."),
    ]
    with AnthropicStandin(script) as api:
        run = run_claude(
            "Do three things.",
            api_url=api.url,
            workdir=tmp_path,
            settings=http_hook_settings(board.url),
            allowed_tools=["Bash", "Write"],
            env={"KANBAN_TOKEN": TOKEN},
        )

    assert run.returncode == 0, run.stderr
    assert (run.project / "note.txt").read_text() == "x\n"
    assert board.events() == [
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PreToolUse",
        "PostToolUse",
        "PreToolUse",
        "PostToolUseFailure",
        "Stop",
        "SessionEnd",
    ]
    calls = {call.event: call.json for call in board.calls}  # the last of each event
    common = {"session_id", "transcript_path", "cwd", "prompt_id", "hook_event_name"}
    tool = common | {"permission_mode", "effort", "tool_name", "tool_input", "tool_use_id"}
    assert set(calls["UserPromptSubmit"]) == common | {"permission_mode", "prompt"}
    assert set(calls["PreToolUse"]) == tool
    assert set(calls["PostToolUse"]) == tool | {"tool_response", "duration_ms"}
    assert set(calls["PostToolUseFailure"]) == tool | {"error", "is_interrupt", "duration_ms"}
    assert calls["PostToolUseFailure"]["error"] == "Exit code 1"
    stop_keys = {"stop_hook_active", "last_assistant_message", "background_tasks", "session_crons"}
    assert set(calls["Stop"]) == common | {"permission_mode", "effort"} | stop_keys
    assert calls["Stop"]["last_assistant_message"] == "All done."
    assert set(calls["SessionEnd"]) == common | {"reason"}
    assert {call.headers["X-Agent"] for call in board.calls} == {""}  # KANBAN_AGENT unset
    assert run.init["model"]  # the model is in the stream, in no hook's input
    assert all("model" not in call.json for call in board.calls)

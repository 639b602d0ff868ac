"""Each coding client's shell call as it sends it to its gated hook, in its own shape
(the real CLIs' tests, ``tests/clients/test_real_clients.py``, show these are the shapes
they send): the doors' tests and ``bench --hooks`` read them from here."""

from __future__ import annotations

CWD = "/home/dev/project"


def shell_call(client: str, command: str, session: str = "s-1") -> dict:
    """A shell call as ``client`` sends it to its gated hook."""
    if client in ("claude-code", "codex"):
        return {
            "hook_event_name": "PreToolUse",
            "session_id": session,
            "cwd": CWD,
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "call-1",
        }
    if client == "qwen":
        return {
            "hook_event_name": "PreToolUse",
            "session_id": session,
            "cwd": CWD,
            "tool_name": "run_shell_command",
            "tool_input": {"command": command, "is_background": False},
            "tool_use_id": "call-1",
        }
    if client == "gemini":
        return {
            "hook_event_name": "BeforeTool",
            "session_id": session,
            "cwd": CWD,
            "timestamp": "2026-11-26T10:00:00Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": command, "description": "push"},
        }
    if client == "copilot":
        return {
            "hook_event_name": "PreToolUse",
            "session_id": session,
            "cwd": CWD,
            "tool_name": "bash",
            "tool_input": {"command": command, "description": "push"},
        }
    assert client == "opencode"
    return {
        "hook_event_name": "tool.execute.before",
        "session_id": session,
        "cwd": CWD,
        "tool_name": "bash",
        "tool_input": {"command": command, "description": "push"},
        "tool_use_id": "call_1",
    }

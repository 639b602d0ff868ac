"""Gemini CLI (SPEC §13): hooks in the user's ``~/.gemini/settings.json`` (project hooks
are skipped in an untrusted folder), its own event names (``BeforeTool``,
``AfterTool``, …) and tool names (``run_shell_command``, …), no call id; it ignores
Claude Code's answer shape and obeys ``{"decision": "deny", "reason": …}``."""

from __future__ import annotations

from typing import Any

from boards.clients import actions

EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "AfterAgent",
    "Notification",
    "SessionEnd",
)
# Its events as Claude Code's.
AS_CLAUDE = {
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
}
PATH = ("file_path", "absolute_path", "path")
TOOLS = {
    "run_shell_command": actions.SHELL,
    "write_file": actions.Tool("Write", {"file_path": PATH, "content": ("content",)}),
    "replace": actions.Tool(
        "Edit",
        {"file_path": PATH, "old_string": ("old_string",), "new_string": ("new_string",)},
    ),
    "read_file": actions.Tool("Read", {"file_path": PATH}),
    "web_fetch": actions.Tool("WebFetch", {"url": ("url",), "prompt": ("prompt",)}, "prompt"),
    "google_web_search": actions.Tool("WebSearch", {"query": ("query",)}),
    "glob": actions.Tool("Glob", {"pattern": ("pattern",), "path": ("path", "dir_path")}),
    "search_file_content": actions.Tool("Grep", {"pattern": ("pattern",)}),
    "grep_search": actions.Tool("Grep", {"pattern": ("pattern",)}),
}


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    event = actions.normalised(body, events=AS_CLAUDE, tools=TOOLS)
    response = body.get("tool_response")
    failed = isinstance(response, dict) and response.get("error")
    # ``get``: an event with no name is refused by the door's check, not here (a 500).
    if event.get("hook_event_name") == "PostToolUse" and failed:
        event["hook_event_name"] = "PostToolUseFailure"
    return event


def answer(
    event: dict[str, Any], decision: str | None, reason: str, context: str
) -> dict[str, Any]:
    if decision is not None:
        return {"decision": decision, "reason": reason}
    if context:
        return {
            "hookSpecificOutput": {
                "hookEventName": event.get("client_event") or event["hook_event_name"],
                "additionalContext": context,
            }
        }
    return {}

"""opencode (SPEC §13): no hook commands, so a plugin file (``connect`` writes it) forwards
its ``tool.execute.before`` / ``after`` and session events here, and throws to block a
call. The plugin sends its own event names, ``sessionID``, ``callID``, ``tool`` and the
call's ``args``; it reads ``{"decision", "reason"}``."""

from __future__ import annotations

from typing import Any

from boards.clients import actions

EVENTS = (
    "session.created",
    "tool.execute.before",
    "tool.execute.after",
    "session.idle",
    "session.deleted",
)
AS_CLAUDE = {
    "session.created": "SessionStart",
    "tool.execute.before": "PreToolUse",
    "tool.execute.after": "PostToolUse",
    "session.idle": "Stop",
    "session.error": "Stop",
    "session.deleted": "SessionEnd",
}
PATH = ("filePath", "file_path", "path")
TOOLS = {
    "bash": actions.SHELL,
    "write": actions.Tool("Write", {"file_path": PATH, "content": ("content",)}),
    "edit": actions.Tool(
        "Edit",
        {"file_path": PATH, "old_string": ("oldString",), "new_string": ("newString",)},
    ),
    "read": actions.Tool("Read", {"file_path": PATH}),
    "webfetch": actions.Tool("WebFetch", {"url": ("url",)}),
    "glob": actions.Tool("Glob", {"pattern": ("pattern",)}),
    "grep": actions.Tool("Grep", {"pattern": ("pattern",)}),
}


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    return actions.normalised(body, events=AS_CLAUDE, tools=TOOLS)


def answer(
    event: dict[str, Any], decision: str | None, reason: str, context: str
) -> dict[str, Any]:
    if decision is not None:
        return {"decision": decision, "reason": reason}
    if context:
        return {"context": context}
    return {}

"""GitHub Copilot CLI (SPEC §13): hooks in ``$COPILOT_HOME/hooks/*.json`` under PascalCase
event names (with camelCase names its payload lacks ``hook_event_name``); its own tool
names (``bash``, ``create``, ``edit``, ``view``); no call id. It obeys a deny printed on
stdout, ``{"permissionDecision", "permissionDecisionReason"}``."""

from __future__ import annotations

import hashlib
from typing import Any

from boards.clients import actions

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SessionEnd",
)
# The camelCase names it also knows (a payload under them carries no event name).
CAMEL = {
    "sessionStart": "SessionStart",
    "userPromptSubmitted": "UserPromptSubmit",
    "preToolUse": "PreToolUse",
    "postToolUse": "PostToolUse",
    "sessionEnd": "SessionEnd",
    "errorOccurred": "Notification",
}
PATH = ("path", "file_path")
TOOLS = {
    "bash": actions.SHELL,
    "shell": actions.SHELL,
    "powershell": actions.SHELL,
    "create": actions.Tool("Write", {"file_path": PATH, "content": ("file_text", "content")}),
    "edit": actions.Tool(
        "Edit",
        {"file_path": PATH, "old_string": ("old_str",), "new_string": ("new_str",)},
    ),
    "view": actions.Tool("Read", {"file_path": PATH}),
    "web_fetch": actions.Tool("WebFetch", {"url": ("url",)}),
    "glob": actions.Tool("Glob", {"pattern": ("pattern",)}),
    "grep": actions.Tool("Grep", {"pattern": ("pattern",)}),
}


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    # Its camelCase fields, where the Claude-style ones are missing.
    for theirs, ours in (
        ("sessionId", "session_id"),
        ("toolName", "tool_name"),
        ("toolArgs", "tool_input"),
        ("hookEventName", "hook_event_name"),
    ):
        if ours not in body and theirs in body:
            body[ours] = body[theirs]
    if isinstance(body.get("hook_event_name"), str):
        body["hook_event_name"] = CAMEL.get(body["hook_event_name"], body["hook_event_name"])
    if not body.get("session_id"):
        # No session id: one per folder (a stable name beats a new session each call).
        cwd = str(body.get("cwd") or "")
        body["session_id"] = "copilot-" + hashlib.sha256(cwd.encode()).hexdigest()[:16]
    return actions.normalised(body, events={}, tools=TOOLS)


def answer(
    event: dict[str, Any], decision: str | None, reason: str, context: str
) -> dict[str, Any]:
    if decision is not None:
        return {"permissionDecision": decision, "permissionDecisionReason": reason}
    return {}

"""Qwen Code (SPEC §13): Claude Code's events, layout and answers, with Gemini CLI's tool
names (``run_shell_command``, ``write_file``, ``replace``, …). It holds a hook 60 s at
most and then runs the call, so the board ends a held call sooner (``registry``)."""

from __future__ import annotations

from typing import Any

from boards.clients import actions, gemini

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SessionEnd",
)


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    return actions.normalised(body, events={}, tools=gemini.TOOLS)


answer = actions.claude_answer

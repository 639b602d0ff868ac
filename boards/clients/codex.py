"""Codex (SPEC §13): command hooks in ``$CODEX_HOME/hooks.json`` in Claude Code's layout,
sending Claude Code's input (the shell tool as ``Bash`` with ``tool_input.command``;
``tool_response`` a string) and reading Claude Code's answers."""

from __future__ import annotations

from typing import Any

from boards.clients import actions

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
# Codex names its shell tool as Claude does; older builds said ``shell`` / ``exec_command``.
TOOLS = {
    "shell": actions.SHELL,
    "exec_command": actions.Tool("Bash", {"command": ("cmd", "command")}),
}


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    event = actions.normalised(body, events={}, tools=TOOLS)
    command = (event.get("tool_input") or {}).get("command")
    if event.get("tool_name") == "Bash" and isinstance(command, list):
        # A command as argv (["bash", "-lc", "rm -rf x"]): match its script, as typed.
        event["tool_input"] = {**event["tool_input"], "command": _argv_text(command)}
    return event


def _argv_text(argv: list[Any]) -> str:
    words = [str(word) for word in argv]
    if len(words) >= 3 and words[1] in ("-c", "-lc"):
        return words[2]
    return " ".join(words)


answer = actions.claude_answer

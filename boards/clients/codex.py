"""Codex (SPEC §13): command hooks in ``$CODEX_HOME/hooks.json`` in Claude Code's layout,
sending Claude Code's input (the shell tool as ``Bash`` with ``tool_input.command``;
``tool_response`` a string) and reading Claude Code's answers."""

from __future__ import annotations

import os
import shlex
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


# Shells whose ``-c`` takes the next word as the script (``bash -e -c "…"``).
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})


def _argv_text(argv: list[Any]) -> str:
    """The command line an argv runs, as the shell reads it: a shell's ``-c`` script
    (``-c`` alone or among combined short flags, ``-ec``, ``-lc``), else the argv quoted
    word by word, so ``["rm", "-rf", "a b"]`` is not read as three paths."""
    words = [str(word) for word in argv]
    if words and os.path.basename(words[0]) in SHELLS:
        at = 1
        while at < len(words) - 1:
            word = words[at]
            if word in ("-", "+", "--") or not word.startswith(("-", "+")):
                break  # the options end: what follows is a script file and its arguments
            if not word.startswith("--") and "c" in word[1:]:
                return words[at + 1]
            # ``-o pipefail`` / ``-O extglob``: the next word is the option's value.
            at += 2 if word[1:] in ("o", "O") else 1
    return shlex.join(words)


answer = actions.claude_answer

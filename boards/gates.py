"""Which of an agent's own tool calls need a person: gate rules, and what a call is doing.

A coding client (Claude Code) sends each tool call to the board before it runs
(a ``PreToolUse`` hook, SPEC §11). A board's gate rules match the call: the
tool's name against a glob (``Bash``, ``Write|Edit``, ``mcp__*``) and a pattern
against the call's main input (the command, the file path, the URL), and
answer ``ask``, ``deny`` or ``allow``; the first rule that matches decides, and
a call no rule matches gets no decision (the client's own permissions apply).

Pure functions over plain data: no database, no Django. Patterns are regular
expressions matched with a time limit (the ``regex`` module), so a pattern
written badly by a board's admin can slow one call by milliseconds, never stall
the server.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from dataclasses import dataclass
from typing import Any

import regex

ASK, DENY, ALLOW = "ask", "deny", "allow"
DECISIONS = (ASK, DENY, ALLOW)
FALLBACKS = (DENY, ALLOW)
TOOL_GLOB_MAX = 200
PATTERN_MAX = 300
NOTE_MAX = 200
WAIT_MIN, WAIT_MAX = 5, 3600
WAIT_DEFAULT = 300
# A command longer than this is matched on its first part only.
INPUT_MATCH_MAX = 8_000
MATCH_TIMEOUT_SECONDS = 0.05

# Tools whose main input is a file path (Claude Code's names).
PATH_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Read": "file_path",
    "NotebookEdit": "notebook_path",
    "NotebookRead": "notebook_path",
}
VERBS = {
    "Bash": "Running",
    "Write": "Writing",
    "Edit": "Editing",
    "MultiEdit": "Editing",
    "NotebookEdit": "Editing",
    "Read": "Reading",
    "NotebookRead": "Reading",
    "WebFetch": "Fetching",
    "WebSearch": "Searching the web for",
    "Grep": "Searching for",
    "Glob": "Listing",
    "Task": "Delegating",
    "Agent": "Delegating",
    "TodoWrite": "Planning",
}


@dataclass(frozen=True)
class Rule:
    """One gate rule as the matcher sees it."""

    tool: str
    pattern: str = ""
    outside_cwd: bool = False
    decision: str = ASK
    wait_seconds: int = WAIT_DEFAULT
    fallback: str = DENY
    note: str = ""
    id: int | None = None

    def label(self) -> str:
        """How a person reads the rule: ``Bash ~ \\bgit\\s+push\\b → ask``."""
        where = " outside the session's folder" if self.outside_cwd else ""
        pattern = f" ~ {self.pattern}" if self.pattern else ""
        return self.note or f"{self.tool}{pattern}{where} → {self.decision}"


# New boards start with these: a person is asked before the commands that lose work or
# reach outside the machine, and before files are written outside the session's folder.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("Bash", r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b", note="Recursive delete"),
    Rule("Bash", r"\bgit\s+push\b", note="git push"),
    Rule("Bash", r"\bgit\s+reset\s+--hard\b", note="git reset --hard"),
    Rule("Bash", r"(^|[;&|(`]\s*|\$\(\s*)sudo\b", note="sudo"),
    Rule(
        "Bash",
        r"\b(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da|k)?sh\b",
        note="A download piped into a shell",
    ),
    Rule("Write|Edit|MultiEdit|NotebookEdit", outside_cwd=True, note="Writing outside the folder"),
)


def tool_glob_problem(glob: str) -> str | None:
    """Why ``glob`` cannot name tools, or None: ``Bash``, ``Write|Edit``, ``mcp__*``."""
    if not isinstance(glob, str) or not glob.strip() or len(glob) > TOOL_GLOB_MAX:
        return f"1 to {TOOL_GLOB_MAX} characters"
    for part in glob.split("|"):
        if not part.strip() or not all(ch.isalnum() or ch in "_-*?.:" for ch in part.strip()):
            return "tool names or globs (letters, digits, _ - * ? . :), separated by |"
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable regular expression, or None (empty matches all)."""
    if not isinstance(pattern, str) or len(pattern) > PATTERN_MAX:
        return f"at most {PATTERN_MAX} characters"
    if "\x00" in pattern:
        return "must not contain the NUL character"
    try:
        regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        return f"not a regular expression: {str(exc)[:120]}"
    return None


def tool_matches(glob: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, part.strip()) for part in glob.split("|"))


def main_input(tool_name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
    """(kind, text) of what a call is about: its command, file path, URL or query."""
    if tool_name == "Bash":
        return "command", str(tool_input.get("command", ""))
    if tool_name in PATH_TOOLS:
        return "path", str(tool_input.get(PATH_TOOLS[tool_name], ""))
    if tool_name == "WebFetch":
        return "url", str(tool_input.get("url", ""))
    for key in ("query", "pattern", "prompt", "description", "path", "url", "command"):
        if isinstance(tool_input.get(key), str):
            return key, str(tool_input[key])
    return "input", json.dumps(tool_input, ensure_ascii=False, sort_keys=True)[:2000]


def describe_call(tool_name: str, tool_input: dict[str, Any]) -> str:
    """What the call is doing, as a person reads it: "Running `npm test`"."""
    kind, text = main_input(tool_name, tool_input)
    text = " ".join(text.split())
    if len(text) > 120:
        text = text[:119] + "…"
    verb = VERBS.get(tool_name)
    if verb and text:
        return f"{verb} `{text}`"
    if tool_name.startswith("mcp__"):
        return f"Calling {tool_name.removeprefix('mcp__').replace('__', ' › ')}"
    return f"Using {tool_name}" + (f" `{text}`" if text and kind != "input" else "")


def outside(path: str, cwd: str) -> bool:
    """Whether ``path`` (absolute, or relative to ``cwd``) lies outside ``cwd``."""
    if not path:
        return False
    if not cwd:
        return True  # no folder to be inside of
    full = path if path.startswith("/") else posixpath.join(cwd, path)
    full, root = posixpath.normpath(full), posixpath.normpath(cwd)
    return not (full == root or full.startswith(root.rstrip("/") + "/"))


def rule_matches(rule: Rule, tool_name: str, tool_input: dict[str, Any], cwd: str) -> bool:
    if not tool_matches(rule.tool, tool_name):
        return False
    kind, text = main_input(tool_name, tool_input)
    if rule.outside_cwd and not (kind == "path" and outside(text, cwd)):
        return False
    if not rule.pattern:
        return True
    try:
        found = regex.search(rule.pattern, text[:INPUT_MATCH_MAX], timeout=MATCH_TIMEOUT_SECONDS)
    except TimeoutError:
        # Too slow to decide: a rule that holds calls back applies, one that lets them by not.
        return rule.decision != ALLOW
    except (regex.error, ValueError):
        return False
    return found is not None


def first_match(
    rules: list[Rule], tool_name: str, tool_input: dict[str, Any], cwd: str
) -> Rule | None:
    """The rule that decides this call (the first that matches), or None."""
    for rule in rules:
        if rule_matches(rule, tool_name, tool_input, cwd):
            return rule
    return None

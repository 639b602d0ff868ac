"""Which of an agent's own tool calls need a person: gate rules, and what a call is doing.

A coding client sends each tool call to the board before it runs (a ``PreToolUse``
hook, SPEC §11). A board's gate rules match the call: the tool's name against a glob
(``Bash``, ``Write|Edit``, ``mcp__*``, or ``kind:shell`` for every client's shell tool,
SPEC §13) and a pattern against what the call does, and answer ``ask``, ``deny`` or
``allow``; the first rule that matches decides, and a call no rule matches gets no
decision (the client's own permissions apply).

What a call does is read, not just its raw text (``read_action``): a shell command is
parsed into the simple commands it runs (``boards.core.shell``), and a pattern matches
if it matches the raw input or any of them; the paths it writes are resolved against
the session's folder (``outside_cwd`` rules). What cannot be read — a command no parser
reads, a path with an unknown variable, an input longer than ``INPUT_MATCH_MAX``, a
pattern too slow for the call's budget — is asked about: a rule that holds calls back
(``ask``, and ``deny`` as an ask) applies, one that lets them by (``allow``) does not.

Built in, before the board's rules: a write to the supervision's own files (the
clients' settings and hooks, ``.git/hooks``, ``.mcp.json``, the forwarder's
configuration) is always asked about (``SUPERVISION_RULE``), so an agent cannot take
itself off the board, whatever the board's rules say.

Pure functions over plain data: no database, no Django. A pattern is refused when saved
if compiling it could cost the server (``pattern_problem``); patterns are matched with a
time limit (the ``regex`` module) inside one budget per call.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import json
import posixpath
import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import shlex
import time
from dataclasses import dataclass
from typing import Any

import regex

from boards.core import limits, shell

ASK, DENY, ALLOW = "ask", "deny", "allow"
DECISIONS = (ASK, DENY, ALLOW)
FALLBACKS = (DENY, ALLOW)
TOOL_GLOB_MAX = 200
PATTERN_MAX = 300
NOTE_MAX = 200
WAIT_MIN, WAIT_MAX = 5, 3600
WAIT_DEFAULT = 300
# An input longer than this is not read: it is asked about (a rule that holds calls applies).
INPUT_MATCH_MAX = 8_000
MATCH_TIMEOUT_SECONDS = 0.05
# However loaded the server, one search waits this long (wall clock) at most.
MATCH_WALL_MAX_SECONDS = 2.0

# What a call does (SPEC §13): a rule's tool field may name a kind (``kind:shell``).
KINDS = ("shell", "write", "read", "fetch", "mcp", "other")
# Each client's tool names by kind: Claude Code's, Codex's, Gemini's and Qwen's,
# Copilot's, opencode's (the door normalises them; these hold even if it did not).
TOOL_KINDS = {
    "shell": {"Bash", "bash", "shell", "run_shell_command", "local_shell", "exec_command"},
    "write": {"Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "replace", "edit"}
    | {"write", "apply_patch", "create", "str_replace", "multiedit", "patch"},
    "read": {"Read", "NotebookRead", "Grep", "Glob", "LS", "read_file", "read_many_files"}
    | {"list_directory", "glob", "grep", "search_file_content", "view", "read", "list"},
    "fetch": {"WebFetch", "WebSearch", "web_fetch", "google_web_search", "webfetch"}
    | {"fetch", "websearch", "web_search"},
}
# Tools whose main input is a file path (Claude Code's names).
PATH_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Read": "file_path",
    "NotebookEdit": "notebook_path",
    "NotebookRead": "notebook_path",
}
# Where other clients put the path (Gemini's, opencode's camelCase).
PATH_KEYS = ("file_path", "notebook_path", "filePath", "absolute_path", "path", "file")
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
KIND_VERBS = {"shell": "Running", "write": "Writing", "read": "Reading", "fetch": "Fetching"}
# The supervision's own files: the clients' settings and hooks, git's hooks (and the
# config that can move them), MCP servers, the forwarder's board and token.
SUPERVISION_FILES = re.compile(
    r"(^|/)\.(claude|codex|gemini|qwen|copilot|opencode)(/|$)"
    r"|(^|/)\.git/(hooks(/|$)|config$)|(^|/)\.mcp\.json$"
    r"|(^|/)\.config/(agent-kanban|opencode)(/|$)|^/etc/codex(/|$)"
)


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
    # Approving what it holds needs a passkey, from a person who has one (SPEC §14).
    step_up: bool = False

    def label(self) -> str:
        """How a person reads the rule: ``Bash ~ \\bgit\\s+push\\b → ask``."""
        where = " outside the session's folder" if self.outside_cwd else ""
        pattern = f" ~ {self.pattern}" if self.pattern else ""
        return self.note or f"{self.tool}{pattern}{where} → {self.decision}"


# Each simple command's text starts with its program (``shell``), so the default rules
# are anchored there: ``git commit -m "no rm -rf"`` is not a delete.
_DOWNLOAD = r"(curl|wget|fetch|aria2c|xh|https?)"
# New boards start with these: a person is asked before the commands that lose work or
# reach outside the machine, and before files are written outside the session's folder.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "kind:shell",
        r"^rm\s+(\S+\s+)*?(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(\s|$)",
        note="Recursive delete",
        step_up=True,
    ),
    Rule("kind:shell", r"^(git|hub)\s+(subtree\s+)?push\b", note="git push", step_up=True),
    Rule(
        "kind:shell",
        r"^git\s+(reset\s+(\S+\s+)*?--hard\b|clean\s+(\S+\s+)*?-[a-zA-Z]*f"
        r"|checkout\s+(\S+\s+)*?(-f|--force|\.)(\s|$)|restore\s+(?!(\S+\s+)*?(-S|--staged)\b)"
        r"|stash\s+(drop|clear)\b|branch\s+(\S+\s+)*?-D\b)",
        note="git reset --hard (uncommitted work lost)",
    ),
    Rule("kind:shell", r"^(sudo|doas|pkexec|run0|su)(\s|$)", note="sudo", step_up=True),
    Rule(
        "kind:shell",
        rf"(^|\|\s*){_DOWNLOAD}\b[^|]*\|(.*\|)?\s*(sudo\s+(-\S+\s+)*)?(ba|z|da|k|mk|fi|a)?sh\b"
        rf"|^{_DOWNLOAD} \| \S+$",
        note="A download piped into a shell",
    ),
    Rule("kind:write|kind:shell", outside_cwd=True, note="Writing outside the folder"),
)
# Built in, before a board's rules (the module's docstring).
SUPERVISION_RULE = Rule(
    "*", note="Changing the supervision's own files (client hooks and settings)", decision=ASK
)
# A call the board's rules could not be checked against within the call's budget.
OVER_BUDGET_RULE = Rule("*", note="Too long to check against the board's rules", decision=ASK)


def kind_of(tool_name: str) -> str:
    """What a tool does: shell, write, read, fetch, mcp or other (any client's names)."""
    if tool_name.startswith("mcp__"):
        return "mcp"
    for kind, names in TOOL_KINDS.items():
        if tool_name in names:
            return kind
    return "other"


def tool_glob_problem(glob: str) -> str | None:
    """Why ``glob`` cannot name tools, or None: ``Bash``, ``Write|Edit``, ``mcp__*``,
    ``kind:shell``."""
    if not isinstance(glob, str) or not glob.strip() or len(glob) > TOOL_GLOB_MAX:
        return f"1 to {TOOL_GLOB_MAX} characters"
    for part in glob.split("|"):
        if not part.strip() or not all(ch.isalnum() or ch in "_-*?.:" for ch in part.strip()):
            return "tool names or globs (letters, digits, _ - * ? . :), separated by |"
        if part.strip().startswith("kind:") and part.strip()[5:] not in KINDS:
            return f"kind: is one of {', '.join(KINDS)}"
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a usable regular expression, or None (empty matches all).

    A pattern is parsed before it is compiled, and refused when compiling it would cost
    the server: repeats inside repeats multiply (``(?:(?:a{1000}){100}){100}`` is ten
    million copies of ``a`` to the compiler)."""
    if not isinstance(pattern, str) or len(pattern) > PATTERN_MAX:
        return f"at most {PATTERN_MAX} characters"
    if "\x00" in pattern:
        return "must not contain the NUL character"
    try:
        size = _size(sre_parse.parse(pattern))
    except (re.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        return f"not a regular expression (Python's syntax): {str(exc)[:120]}"
    if size > limits.GATE_PATTERN_SIZE_MAX:
        return (
            f"too large once its repeats are counted (at most {limits.GATE_PATTERN_SIZE_MAX}"
            " characters' worth): use fewer or smaller {n} repeats"
        )
    try:
        regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        return f"not a regular expression: {str(exc)[:120]}"
    return None


def _size(parsed: Any) -> int:
    """How many items the compiled pattern holds, counting each repeat's copies; stops
    counting past the limit."""
    total = 0
    for op, value in parsed:
        name = str(op)
        if name in {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}:
            low, high, inner = value
            copies = low if high == sre_constants.MAXREPEAT else high
            total += _size(inner) * max(copies, 1)
        elif name == "SUBPATTERN":
            total += _size(value[-1])
        elif name == "ATOMIC_GROUP":
            total += _size(value)
        elif name == "BRANCH":
            total += sum(_size(branch) for branch in value[1])
        elif name in {"ASSERT", "ASSERT_NOT"}:
            total += _size(value[1])
        elif name == "GROUPREF_EXISTS":
            total += _size(value[1]) + (_size(value[2]) if value[2] else 0)
        else:
            total += 1
        if total > limits.GATE_PATTERN_SIZE_MAX:
            return total
    return total


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """The compiled pattern, or None for one that ``pattern_problem`` refuses (a rule
    saved before the check, or written to the database by hand)."""
    if pattern_problem(pattern) is not None:
        return None
    return regex.compile(pattern)


def tool_matches(glob: str, name: str, *, client_tool: str | None = None) -> bool:
    """Whether ``glob`` names the tool: its normalised name, the client's own, or its kind."""
    names = [name] if not client_tool or client_tool == name else [name, client_tool]
    kinds = {kind_of(n) for n in names}
    for part in (p.strip() for p in glob.split("|")):
        if part.startswith("kind:"):
            if part[5:] in kinds:
                return True
        elif any(fnmatch.fnmatchcase(n, part) for n in names):
            return True
    return False


def _kind(tool_name: str, client_tool: str | None) -> str:
    kind = kind_of(tool_name)
    return kind if kind != "other" or not client_tool else kind_of(client_tool)


def main_input(tool_name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
    """(kind, text) of what a call is about: its command, file path, URL or query."""
    kind = kind_of(tool_name)
    if kind == "shell":
        command = tool_input.get("command", tool_input.get("cmd", ""))
        if isinstance(command, list):  # Codex's shell: ["bash", "-lc", "…"]
            return "command", shlex.join(str(word) for word in command)
        return "command", str(command)
    if tool_name in PATH_TOOLS:
        return "path", str(tool_input.get(PATH_TOOLS[tool_name], ""))
    if kind in {"write", "read"}:
        for key in PATH_KEYS:
            if isinstance(tool_input.get(key), str):
                return "path", tool_input[key]
    if kind == "fetch" and isinstance(tool_input.get("url"), str):
        return "url", tool_input["url"]
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
    verb = VERBS.get(tool_name) or KIND_VERBS.get(kind_of(tool_name))
    if verb and text:
        return f"{verb} `{text}`"
    if tool_name.startswith("mcp__"):
        return f"Calling {tool_name.removeprefix('mcp__').replace('__', ' › ')}"
    return f"Using {tool_name}" + (f" `{text}`" if text and kind != "input" else "")


def outside(path: str, cwd: str) -> bool:
    """Whether ``path`` (absolute, ``~``, or relative to ``cwd``) lies outside ``cwd``."""
    if not path:
        return False
    if not cwd:
        return True  # no folder to be inside of
    if path.startswith("~"):
        home = shell.home_of(cwd)
        if home is None or not (path == "~" or path.startswith("~/")):
            return True
        path = home + path[1:]
    full = path if path.startswith("/") else posixpath.join(cwd, path)
    return not _inside(posixpath.normpath(full), cwd)


def _inside(full: str, cwd: str) -> bool:
    root = posixpath.normpath(cwd)
    return full == root or full.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Action:
    """What a call does, as the rules see it (``read_action``).

    ``texts``: its raw main input, then (for a shell command) each simple command it runs.
    ``outside``: whether it writes (or, for a read tool, reads) outside the session's
    folder; None when a path cannot be resolved. ``supervision``: it writes the
    supervision's own files. ``unsure``: what it runs could not be wholly read."""

    kind: str
    names: tuple[str, ...]
    texts: tuple[str, ...]
    outside: bool | None
    supervision: bool
    unsure: bool


def read_action(
    tool_name: str, tool_input: dict[str, Any], cwd: str, *, client_tool: str | None = None
) -> Action:
    """Read one tool call (normalised name, Claude Code's input keys) run in ``cwd``."""
    kind = _kind(tool_name, client_tool)
    names = (
        (tool_name,) if not client_tool or client_tool == tool_name else (tool_name, client_tool)
    )
    # A name the door did not normalise is read by the client's own name's kind.
    known = kind_of(tool_name) != "other" or not client_tool
    _, text = main_input(tool_name if known else client_tool or tool_name, tool_input)
    if len(text) > INPUT_MATCH_MAX:
        return Action(kind, names, (text[:INPUT_MATCH_MAX],), None, False, True)
    if kind == "shell":
        reading = shell.read_command(text, cwd)
        writes = reading.writes
        out: bool | None = False
        if any(w is not None and not (cwd and _inside(w, cwd)) for w in writes):
            out = True
        elif any(w is None for w in writes):
            out = None
        spelled = [*reading.written, *(w for w in writes if w)]
        supervision = any(SUPERVISION_FILES.search(p) for p in spelled)
        return Action(kind, names, (text, *reading.texts), out, supervision, reading.unsure)
    if kind in {"write", "read"}:
        resolved = posixpath.normpath(posixpath.join(cwd, text)) if text and cwd else text
        home = shell.home_of(cwd)
        if text.startswith("~/") and home:
            resolved = home + text[1:]
        supervision = kind == "write" and bool(
            SUPERVISION_FILES.search(text) or SUPERVISION_FILES.search(resolved)
        )
        return Action(kind, names, (text,), outside(text, cwd), supervision, False)
    return Action(kind, names, (text,), False, False, False)


def _verdict(rule: Rule, action: Action, deadline: float) -> bool | None:
    """Whether ``rule`` matches: True, False, or None when that cannot be known."""
    if not _names_match(rule.tool, action.names):
        return False
    sure = True
    if rule.outside_cwd:
        if action.outside is False:
            return False
        sure = action.outside is True
    if not rule.pattern:
        return True if sure else None
    if action.unsure and rule.decision == ALLOW:
        return None  # an allow rule lets by only what it has read whole
    compiled = _compiled(rule.pattern)
    if compiled is None:
        return None
    for text in action.texts:
        left = deadline - time.thread_time()
        if left <= 0:
            return None
        found = _search(compiled, text, min(MATCH_TIMEOUT_SECONDS, left))
        if found is None:
            return None
        if found:
            return True if sure else None
    return None if action.unsure else False


def _search(compiled: Any, text: str, budget: float) -> bool | None:
    """Whether the pattern is found in ``text``; None when matching it takes more than
    ``budget`` seconds of this thread's CPU time.

    The pattern library's timeout counts the wall clock, which also runs while the thread
    waits for a core or the GIL: on a loaded server an ordinary pattern would time out and
    its call be held for a person. A search that timed out having spent little CPU is tried
    again with more time, up to ``MATCH_WALL_MAX_SECONDS`` in all; one that spent half its
    budget working is a slow pattern."""
    began_cpu, began_wall = time.thread_time(), time.monotonic()
    wall = budget
    while True:
        try:
            return compiled.search(text, timeout=wall) is not None
        except TimeoutError:
            spent = time.thread_time() - began_cpu
            waited = time.monotonic() - began_wall
            if spent >= budget / 2 or waited >= MATCH_WALL_MAX_SECONDS:
                return None
            wall = min(wall * 4, MATCH_WALL_MAX_SECONDS - waited)


def _names_match(glob: str, names: tuple[str, ...]) -> bool:
    return tool_matches(glob, names[0], client_tool=names[1] if len(names) > 1 else None)


def rule_matches(
    rule: Rule,
    tool_name: str,
    tool_input: dict[str, Any],
    cwd: str,
    *,
    client_tool: str | None = None,
) -> bool:
    """Whether ``rule`` applies to the call: it matches, or it cannot be known and the
    rule holds calls back (an ``allow`` applies only to what it surely matches)."""
    action = read_action(tool_name, tool_input, cwd, client_tool=client_tool)
    deadline = time.thread_time() + limits.GATE_MATCH_BUDGET_SECONDS
    verdict = _verdict(rule, action, deadline)
    return verdict is True or (verdict is None and rule.decision != ALLOW)


def first_match(
    rules: list[Rule],
    tool_name: str,
    tool_input: dict[str, Any],
    cwd: str,
    *,
    client_tool: str | None = None,
) -> Rule | None:
    """The rule that decides this call (the first that matches), or None.

    A write to the supervision's own files is asked about before any rule
    (``SUPERVISION_RULE``). A rule that cannot be known to match asks: a ``deny`` rule
    asks instead of denying, an ``allow`` rule is passed over. Past the call's budget
    (``limits.GATE_MATCH_BUDGET_SECONDS`` for all its rules) the call is asked about."""
    action = read_action(tool_name, tool_input, cwd, client_tool=client_tool)
    if action.supervision:
        return SUPERVISION_RULE
    # CPU time of this thread (see ``_search``): a busy machine slows every call's matching
    # alike, and must not make ordinary calls wait for a person.
    deadline = time.thread_time() + limits.GATE_MATCH_BUDGET_SECONDS
    unsure: Rule | None = None
    for rule in rules:
        if time.thread_time() > deadline:
            return OVER_BUDGET_RULE
        verdict = _verdict(rule, action, deadline)
        if verdict is True and not (unsure is not None and rule.decision == ALLOW):
            return rule
        if verdict is None and rule.decision != ALLOW and unsure is None:
            # Asked under this rule, unless a later rule surely matches and holds it.
            note = f"{rule.label()} (the call could not be wholly read: a person decides)"
            unsure = dataclasses.replace(rule, decision=ASK, note=note[:NOTE_MAX])
    return unsure


def input_for(tool_name: str, text: str) -> dict[str, Any]:
    """A tool input that says ``text`` (a command, path or URL) the way ``tool_name``'s
    client sends it: what a person tests a rule with."""
    kind = kind_of(tool_name)
    if kind == "shell":
        return {"command": text}
    if tool_name in PATH_TOOLS:
        return {PATH_TOOLS[tool_name]: text}
    if kind in {"write", "read"}:
        return {"file_path": text}
    if kind == "fetch":
        return {"url": text}
    return {"command": text}


@dataclass(frozen=True)
class Explanation:
    """Which rule decides a call (``explain``): its 1-based number among the board's
    rules, or the built-in rule (``built_in``: what people call it), or none."""

    number: int | None
    rule: Rule | None
    built_in: str = ""

    @property
    def decision(self) -> str | None:
        return self.rule.decision if self.rule is not None else None

    @property
    def sentence(self) -> str:
        if self.rule is None:
            return "No rule matches: the client's own permission settings decide."
        if self.built_in:
            return f"The built-in {self.built_in} decides: {self.rule.decision} ({self.rule.note})."
        return f"Rule {self.number} decides: {self.rule.decision} ({self.rule.label()})."


def explain(rules: list[Rule], tool_name: str, tool_input: dict[str, Any], cwd: str) -> Explanation:
    """Which of ``rules`` decides the call, as ``first_match`` decides it, said for people."""
    rule = first_match(rules, tool_name, tool_input, cwd)
    if rule is None:
        return Explanation(None, None)
    if rule is SUPERVISION_RULE:
        return Explanation(None, rule, "supervision rule")
    if rule is OVER_BUDGET_RULE:
        return Explanation(None, rule, "rule on calls too long to check")
    # An unsure match is a copy of the rule (asking, with a note that says so).
    key = (rule.id, rule.tool, rule.pattern, rule.outside_cwd)
    number = next(
        n for n, r in enumerate(rules, 1) if (r.id, r.tool, r.pattern, r.outside_cwd) == key
    )
    return Explanation(number, rule)

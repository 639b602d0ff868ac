r"""Which of an agent's own tool calls need a person: gate rules, and what a call is doing.

A coding client sends each tool call to the board before it runs (a ``PreToolUse``
hook, SPEC §11). A board's gate rules match the call: the tool's name against a glob
(``Bash``, ``Write|Edit``, ``mcp__*``, or ``kind:shell`` for every client's shell tool,
SPEC §13) and a pattern against what the call does, and answer ``ask``, ``deny`` or
``allow``; the first rule that matches decides, and a call no rule matches gets no
decision (the client's own permissions apply).

What a call does is read, not just its raw text (``read_action``): a shell command is
parsed into the simple commands it runs (``boards.gates.shell``), and an ``ask`` or
``deny`` pattern matches if it matches the raw input or any of them; the paths it writes
are resolved against the session's folder (``outside_cwd`` rules; the temporary folders
are no one's, so a test run's log in ``/tmp`` is not "outside"). Any tool's input is read
by its shape too: an MCP tool given a ``command`` is a shell, one given a ``path`` and
``content`` a write.

An ``allow`` rule covers only what it matches whole: the raw input (the match spans it),
or each simple command of the line, as written (its redirections included), matched by
some allow rule, the same or an earlier one. A line an allow rule covers in part goes on
down the rules, and a later ``ask`` or ``deny`` rule that matches what is left holds it:
``^git checkout -- \.$`` allows that line, not ``git checkout -- . ; rm -rf ~``. Commands
that only move the line's folder or do nothing (``cd``, ``pushd``, ``popd``, ``true``,
``:``, assignments) and a shell whose code is read as commands of its own (``bash -c``)
need no rule of their own: ``cd build && npm test`` is allowed by ``^npm test$``. What cannot be read — a command no parser
reads, a path with an unknown variable, an input longer than ``INPUT_MATCH_MAX``, a
pattern too slow for the call's budget — is asked about: a rule that holds calls back
(``ask``, and ``deny`` as an ask) applies, one that lets them by (``allow``) does not.

Built in, before the board's rules: a write to the supervision's own files (the
clients' settings and hooks, ``.git/hooks``, ``.mcp.json``, the forwarder's
configuration, ``.env``/``.envrc`` the clients read) is always asked about
(``SUPERVISION_RULE``), so an agent cannot take itself off the board, whatever the
board's rules say; so is a line that names one of them with a write the reader cannot
list (git plumbing, archive extraction, ``cp -r``, an interpreter's code…), and a ``git
config`` that moves git's hooks. A signal that could reach the hooks' own processes
(``pkill -f PATTERN`` whose pattern finds a line of ``HOOK_PROCESSES``, ``kill -1``,
``killall python3``…) is asked about as well (``TAMPERING_RULE``): a hook killed
before it answers gives the client no verdict.

Pure functions over plain data: no database, no Django. A pattern is refused when saved
if compiling it could cost the server, or if it is not one Python's ``re`` reads the same
way (``pattern_problem``); patterns are matched with a time limit (the ``regex`` module,
in its ``re``-compatible version) inside one budget per call.
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
import warnings
from dataclasses import dataclass
from typing import Any

import regex

from boards.core import limits
from boards.gates import shell

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
# Claude Code's tool names by kind: the board's own vocabulary (the door normalises every
# client's calls to it). Each client's own names come from its row (``install_clients``):
# they hold even if the door did not normalise a call.
CLAUDE_TOOL_KINDS: dict[str, frozenset[str]] = {
    "shell": frozenset({"Bash"}),
    "write": frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"}),
    "read": frozenset({"Read", "NotebookRead", "Grep", "Glob", "LS"}),
    "fetch": frozenset({"WebFetch", "WebSearch"}),
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
# The supervision's own files that are no client's: git's hooks (and the config that can
# move them), MCP servers, the ``.env`` files clients read, the forwarder's board and
# token. Each client's own folders (its settings and hooks) come from its row.
BOARD_FILES = (
    r"(^|/)\.git/(hooks(/|$)|config$)|(^|/)\.mcp\.json$|(^|/)\.env(rc)?$"
    r"|(^|/)\.config/agent-kanban(/|$)|^/etc/agent-kanban(/|$)"
)
# The same files named anywhere in a line (inside a word: ``--cacheinfo 1,h,.claude/x``).
BOARD_NAMED = (
    r"(?<![\w.-])\.(mcp\.json|envrc|env)(?![\w.-])|\.git/(hooks|config)\b|\bagent-kanban\b"
)
# Folders no session owns: what is written there is no one's work.
TEMPORARY = re.compile(r"^/(tmp|var/tmp|private/tmp|dev/shm)(/|$)")
# The processes a gated hook runs as, as ``ps -o args`` and ``pgrep -f`` see them, the way
# ``agent-kanban connect`` writes them (tests/gates/test_gate_classes.py holds them to
# ``boards.clients.setup``, which the gate may not import): the shell the client starts, the
# forwarder's interpreter in its fast form and as the console script (the clients' own
# processes are their rows': the opencode plugin runs inside opencode, Gemini in node).
HOOK_FORWARDER = (
    "/usr/bin/python3 -I -S -c "
    "'import sys;sys.path.append(sys.argv.pop(1));import forwarder;sys.exit(forwarder.main())' "
    "/home/u/.config/agent-kanban"
)
HOOK_GUARD = (
    " || { [ $? = 2 ] || echo 'kanban-hook did not run, so this tool call is blocked: "
    "run agent-kanban connect again' >&2; exit 2; }"
)
HOOK_LINES = (
    f"{HOOK_FORWARDER} --client claude-code --timeout 3630{HOOK_GUARD}",
    f"{HOOK_FORWARDER} --client gemini --timeout 10",
    f"kanban-hook --client codex --timeout 598{HOOK_GUARD}",
)
HOOK_PROCESSES = (
    *(f"{shell} -c {line}" for line in HOOK_LINES for shell in ("/bin/sh", "/bin/bash")),
    *(" ".join(shlex.split(line.split(" || ")[0])) for line in HOOK_LINES),
    "/usr/bin/python3 /home/u/.local/bin/kanban-hook --client codex --timeout 598",
)
# Their names as ``pkill NAME``, ``killall NAME`` and ``pidof NAME`` see them (the clients'
# own binaries and processes come from their rows).
HOOK_PROCESS_NAMES: tuple[str, ...] = ("sh", "bash", "dash", "python3", "python3.12", "python")
HOOK_PROCESS_NAMES += ("kanban-hook", "node", "bun")


@dataclass(frozen=True)
class ClientFacts:
    """What the gate reads of one coding client (its row in ``boards.clients.registry``,
    which sits above the gate: ``boards.apps`` hands the rows in, ``install_clients``).

    ``folders``: where its settings and hooks live, under a home folder (``.claude``,
    ``.config/opencode``) or absolute (``/etc/codex``), which the supervision rule
    protects; ``tool_kinds``: its own tool names by kind; ``binary`` and ``processes``:
    its name and its process lines as ``pkill``/``ps`` see them (the tampering rule)."""

    folders: tuple[str, ...]
    tool_kinds: dict[str, tuple[str, ...]]
    binary: str
    processes: tuple[str, ...]


@dataclass(frozen=True)
class _Known:
    supervision_files: re.Pattern[str]
    supervision_named: re.Pattern[str]
    tool_kinds: dict[str, frozenset[str]]
    processes: tuple[str, ...]
    process_names: tuple[str, ...]


_known_clients: _Known | None = None


def install_clients(clients: list[ClientFacts]) -> None:
    """Tell the gate the coding clients' folders, tool names and processes (at app ready)."""
    global _known_clients
    files, named = [BOARD_FILES], [BOARD_NAMED]
    for folder in dict.fromkeys(f for c in clients for f in c.folders):
        spelled = re.escape(folder.rstrip("/"))
        if folder.startswith("/"):
            files.append(rf"^{spelled}(/|$)")
            named.append(rf"{spelled}\b")
        else:
            files.append(rf"(^|/){spelled}(/|$)")
            # One folder's name stands alone (``.claude``, not ``x.claude``); a path of two
            # (``.config/opencode``) is named by its spelling.
            named.append(
                rf"(?<![\w.-]){spelled}(?![\w.-])" if "/" not in folder else rf"{spelled}\b"
            )
    kinds = {kind: set(names) for kind, names in CLAUDE_TOOL_KINDS.items()}
    for c in clients:
        for kind, names in c.tool_kinds.items():
            kinds.setdefault(kind, set()).update(names)
    _known_clients = _Known(
        re.compile("|".join(files)),
        re.compile("|".join(named)),
        {kind: frozenset(names) for kind, names in kinds.items()},
        (*HOOK_PROCESSES, *(p for c in clients for p in c.processes)),
        (*HOOK_PROCESS_NAMES, *(c.binary for c in clients if c.binary)),
    )


def warm() -> None:
    """Pay the gate's one-time costs (the default rules' patterns, the shell parser's
    tables) when a process starts, not on its first tool call (apps.ready)."""
    first_match(list(DEFAULT_RULES), "Bash", {"command": "echo warm > /dev/null"}, "/")


def _known() -> _Known:
    if _known_clients is None:
        # Without the clients' folders the supervision rule would silently miss them.
        raise RuntimeError("the gate knows no clients (boards.apps installs the registry's)")
    return _known_clients


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
# Where credentials live (the forwarder's boards file among them).
_CREDENTIALS = (
    r"(\.ssh\b|\.aws\b|\.gnupg|\.netrc|\.kube/config|\.docker/config|\.config/gh\b|\.git-cred"
    r"|\.npmrc|\.pypirc|id_(rsa|ed25519|ecdsa|dsa)|credentials|agent-kanban/boards|\.env(?![\w.]))"
)
_NETWORK = r"(curl|wget|nc|ncat|netcat|socat|telnet|ssh|https?|xh|openssl)\b"
# New boards start with these: a person is asked before the commands that lose work or
# reach outside the machine (credentials sent, a cloud's or a database's data deleted),
# that leave something to run later (persistence), and before files are written outside
# the session's folder.
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
    Rule(
        "kind:shell",
        r"^git\s+(update-ref\s+(\S+\s+)*?-d\b|reflog\s+(expire|delete)\b|prune\b"
        r"|gc\s+(\S+\s+)*?--prune=(now|all)\b|filter-(branch|repo)\b"
        r"|worktree\s+remove\s+(\S+\s+)*?(-f|--force)\b)",
        note="git history or its safety net removed (reflog, unreachable commits, refs)",
    ),
    Rule(
        "kind:shell",
        rf"^(curl|wget|https?|xh|scp|sftp|rsync|nc|ncat|netcat|socat|rclone|gsutil)\b.*"
        rf"({_CREDENTIALS}|\$\((env|printenv|gh\s+auth\s+token)\b)",
        note="Sending credentials off the machine",
    ),
    Rule(
        "kind:shell",
        rf"{_CREDENTIALS}[^|]*\|(.*\|)?\s*{_NETWORK}",
        note="Sending credentials off the machine",
    ),
    Rule(
        "kind:shell",
        r"^(env|printenv|set|(export|declare)\s+-p|gh\s+auth\s+token|gcloud\s+auth\s+\S*token"
        r"|aws\s+configure\s+export-credentials|az\s+account\s+get-access-token"
        rf"|cat\s+/proc/\S+/environ)\b[^|]*\|(.*\|)?\s*{_NETWORK}",
        note="Sending credentials off the machine",
    ),
    Rule(
        "kind:shell",
        r"^gh\s+((\S+\s+)*?(repo|release|secret|variable|gist|codespace|ruleset|cache|project)"
        r"\s+delete|api\s+(\S+\s+)*?(-X|--method)(\s+|=)?DELETE)\b"
        r"|^aws\s+(\S+\s+)*?(s3\s+(rm\s+(\S+\s+)*?--recursive|rb)\b|\S+\s+(delete|terminate)-\S+)"
        r"|^(gcloud|az|doctl|flyctl|fly|hcloud)\s+(\S+\s+)*?(delete|destroy)\b",
        note="Deleting through a cloud or GitHub API",
    ),
    Rule(
        "kind:shell",
        r"^(kubectl\s+(\S+\s+)*?delete\s+(\S+\s+)*?(ns|namespaces?|nodes?|pvc?|crd|-A|--all"
        r"|--all-namespaces)|helm\s+(uninstall|delete)|(terraform|tofu)\s+(destroy|apply\s+(\S+\s+)*?"
        r"-destroy)|(pulumi|cdk|cdktf|serverless|sls)\s+(destroy|remove)|heroku\s+apps:destroy)\b",
        note="Deleting cluster or infrastructure resources",
    ),
    Rule(
        "kind:shell",
        r"(?i)^(psql|mysql|mariadb|sqlite3|duckdb|mongosh|mongo|sqlcmd)\b.*"
        r"\b(drop\s+(table|database|schema|collection|view)|truncate|dropdatabase|delete\s+from)\b"
        r"|^redis-cli\b.*\bflush(all|db)\b|^(dropdb|mysqladmin\s+(\S+\s+)*?drop)\b"
        r"|\b(drop\s+(table|database)|truncate)\b.*\|\s*(psql|mysql|sqlite3)\b",
        note="Dropping database tables or data",
    ),
    Rule(
        "kind:shell",
        r"^(crontab(?!\s+(-u\s+\S+\s+)?-l\b)|(at|batch)(?!\s+-[lrdc]\b)"
        r"|launchctl\s+(load|bootstrap|submit|enable)|systemctl\s+(\S+\s+)*?(enable|link)|loginctl\s+enable-linger|systemd-run\s+(\S+\s+)*?"
        r"--on-\S+|npm\s+(pkg\s+set\s+(\S+\s+)*?scripts\.(pre|post)?(install|prepare|uninstall)"
        r"|set-script))\b",
        note="Running something later or at login (persistence)",
    ),
    Rule("kind:write|kind:shell", outside_cwd=True, note="Writing outside the folder"),
)
# Built in, before a board's rules (the module's docstring).
SUPERVISION_RULE = Rule(
    "*", note="Changing the supervision's own files (client hooks and settings)", decision=ASK
)
TAMPERING_RULE = Rule(
    "*", note="Stopping the supervision's hooks (signals that reach their processes)", decision=ASK
)
# A call the board's rules could not be checked against within the call's budget.
OVER_BUDGET_RULE = Rule("*", note="Too long to check against the board's rules", decision=ASK)


def kind_of(tool_name: str) -> str:
    """What a tool does: shell, write, read, fetch, mcp or other (any client's names)."""
    if tool_name.startswith("mcp__"):
        return "mcp"
    for kind, names in _known().tool_kinds.items():
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
    million copies of ``a`` to the compiler). It is checked by Python's ``re`` and matched
    by ``regex``: one the two would read differently is refused, so the check holds for
    what is matched (``x{e<=9}`` is a literal to ``re`` and a fuzzy match of anything to
    ``regex``; ``[[:alpha:]]`` a set of characters to one, a class to the other)."""
    if not isinstance(pattern, str) or len(pattern) > PATTERN_MAX:
        return f"at most {PATTERN_MAX} characters"
    if "\x00" in pattern:
        return "must not contain the NUL character"
    try:
        with warnings.catch_warnings():
            # re warns where a later Python (and ``regex``) reads a set differently.
            warnings.simplefilter("error")
            size = _size(sre_parse.parse(pattern))
    except (re.error, ValueError, OverflowError, RecursionError, MemoryError, Warning) as exc:
        return f"not a regular expression (Python's syntax): {str(exc)[:120]}"
    if size > limits.GATE_PATTERN_SIZE_MAX:
        return (
            f"too large once its repeats are counted (at most {limits.GATE_PATTERN_SIZE_MAX}"
            " characters' worth): use fewer or smaller {n} repeats"
        )
    if (brace := _stray_brace(pattern)) is not None:
        return (
            f"a brace at character {brace + 1} is no repeat ({{n}}, {{n,m}}): write \\{{ for a"
            " brace (the matcher would read it as a fuzzy match)"
        )
    try:
        regex.compile(pattern, regex.VERSION0)
    except (regex.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        return f"not a regular expression: {str(exc)[:120]}"
    return None


_REPEAT = re.compile(r"\{(\d+(,\d*)?|,\d+)\}")


def _stray_brace(pattern: str) -> int | None:
    """Where an unescaped ``{`` outside a set begins no repeat, or None."""
    n, in_set = 0, False
    while n < len(pattern):
        ch = pattern[n]
        if ch == "\\":
            n += 2
            continue
        if in_set:
            in_set = ch != "]" or pattern[n - 1] == "["
        elif ch == "[":
            in_set = True
            if pattern[n + 1 : n + 2] == "^":
                n += 1
        elif ch == "{" and not _REPEAT.match(pattern, n):
            return n
        n += 1
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
    return regex.compile(pattern, regex.VERSION0)


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


# What an input says, by its shape, for a tool the gate does not know (an MCP tool's):
# a command run, or a file written.
COMMAND_KEYS = ("command", "cmd", "script")
WRITE_KEYS = ("content", "text", "edits", "new_string", "newString", "contents", "data")


def shape_of(tool_name: str, tool_input: dict[str, Any]) -> str:
    """What a call does, by its tool's name or else by its input's shape: an MCP tool (or
    one no client names) given a command is a shell, given a path and content a write."""
    kind = kind_of(tool_name)
    if kind not in {"mcp", "other"} or not isinstance(tool_input, dict):
        return kind
    if any(isinstance(tool_input.get(k), str | list) for k in COMMAND_KEYS):
        return "shell"
    if any(isinstance(tool_input.get(k), str) for k in PATH_KEYS) and any(
        k in tool_input for k in WRITE_KEYS
    ):
        return "write"
    return kind


def main_input(tool_name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
    """(kind, text) of what a call is about: its command, file path, URL or query."""
    kind = shape_of(tool_name, tool_input)
    if kind == "shell":
        key = next((k for k in COMMAND_KEYS if k in tool_input), "command")
        command = tool_input.get(key, "")
        args = tool_input.get("args")
        if isinstance(command, list):  # Codex's shell: ["bash", "-lc", "…"]
            return "command", shlex.join(str(word) for word in command)
        if isinstance(args, list) and args and kind_of(tool_name) != "shell":
            return "command", shlex.join([str(command), *(str(a) for a in args)])
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
    """Whether ``path`` (absolute, ``~``, or relative to ``cwd``) lies outside ``cwd`` (and
    outside the temporary folders, which are no one's)."""
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
    full = posixpath.normpath(full)
    return not (_inside(full, cwd) or TEMPORARY.match(full))


def _inside(full: str, cwd: str) -> bool:
    root = posixpath.normpath(cwd)
    return full == root or full.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Command:
    """One simple command of a shell line, as an allow rule must cover it: as written
    (``head``) or as read (``key``: its program named, its variables followed), with the
    texts read from it; ``exempt`` ones need no rule (``shell.HARMLESS``)."""

    head: str
    key: str
    texts: tuple[str, ...]
    exempt: bool


@dataclass(frozen=True)
class Action:
    """What a call does, as the rules see it (``read_action``).

    ``texts``: its raw main input, then (for a shell command) each simple command it runs.
    ``outside``: whether it writes (or, for a read tool, reads) outside the session's
    folder; None when a path cannot be resolved. ``supervision``: it writes the
    supervision's own files. ``unsure``: what it runs could not be wholly read.
    ``commands``: a shell line's simple commands (what an allow rule must cover).
    ``tampering``: it sends signals that could reach the hooks' processes."""

    kind: str
    names: tuple[str, ...]
    texts: tuple[str, ...]
    outside: bool | None
    supervision: bool
    unsure: bool
    commands: tuple[Command, ...] = ()
    tampering: bool = False


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
    read_as = tool_name if known else client_tool or tool_name
    if kind in {"mcp", "other"}:
        kind = shape_of(read_as, tool_input)
    _, text = main_input(read_as, tool_input)
    if len(text) > INPUT_MATCH_MAX:
        return Action(kind, names, (text[:INPUT_MATCH_MAX],), None, False, True)
    if kind == "shell":
        clients = _known()
        reading = shell.read_command(text, cwd)
        writes = reading.writes
        out: bool | None = False
        if any(
            w is not None and not (cwd and _inside(w, cwd)) and not TEMPORARY.match(w)
            for w in writes
        ):
            out = True
        elif any(w is None for w in writes):
            out = None
        spelled = [*reading.written, *(w for w in writes if w)]
        supervision = (
            any(clients.supervision_files.search(p) for p in spelled)
            or reading.hooks_moved
            or bool(reading.opaque and clients.supervision_named.search(text))
        )
        commands = tuple(
            Command(
                c.head,
                " ".join([c.texts[0], c.spelled]).strip() if c.texts else c.head,
                tuple(c.texts),
                c.exempt,
            )
            for c in reading.commands
        )
        return Action(
            kind,
            names,
            (text, *reading.texts),
            out,
            supervision,
            reading.unsure,
            commands,
            _tampering(reading),
        )
    if kind in {"write", "read"}:
        resolved = posixpath.normpath(posixpath.join(cwd, text)) if text and cwd else text
        home = shell.home_of(cwd)
        if text.startswith("~/") and home:
            resolved = home + text[1:]
        supervision = kind == "write" and bool(
            _known().supervision_files.search(text) or _known().supervision_files.search(resolved)
        )
        return Action(kind, names, (text,), outside(text, cwd), supervision, False)
    return Action(kind, names, (text,), False, False, False)


# -- signals that could stop the hooks (``TAMPERING_RULE``) ---------------------------------

KILLERS = {"kill", "pkill", "killall", "killall5", "skill"}
# pkill's and pgrep's options that take a value (a filter, not the pattern).
_PGREP_VALUES = {"-u", "-U", "-g", "-G", "-P", "-s", "-t", "-F", "-d", "--signal", "--euid"}
_PGREP_VALUES |= {"--uid", "--group", "--parent", "--pgroup", "--session", "--terminal"}
_PGREP_VALUES |= {"--pidfile", "--ns", "--nslist"}
_KILLALL_VALUES = {"-u", "--user", "-s", "--signal", "-o", "--older-than", "-y", "-n"}
_KILLALL_VALUES |= {"--younger-than"}


def _tampering(reading: shell.Reading) -> bool:
    """Whether the line sends signals that could reach the hooks' processes: a process
    picked by a name or pattern that finds one of them or their names
    (``HOOK_PROCESSES``, ``HOOK_PROCESS_NAMES`` and the clients' rows; a pattern that
    cannot be tried counts), every process (``kill -1``, ``pkill -u me``), or a process
    group the line does not know."""
    if reading.signals:
        return True
    runs = reading.runs
    if not any(run[0] in KILLERS for run in runs):
        return False
    fed = False  # a kill given its processes by another command (``$(pgrep …)``, xargs)
    for run in runs:
        name, args = run[0], run[1:]
        if name == "killall5":
            return True
        if name in {"pkill", "pgrep"} and _pgrep_reaches(args):
            return True
        if name == "killall" and _killall_reaches(args):
            return True
        if name == "pidof" and any(a in _known().process_names for a in args if a[:1] != "-"):
            return True
        if name in {"grep", "egrep", "fgrep"} and _grep_reaches(name, args):
            return True
        if name in {"awk", "gawk", "mawk"}:
            for found in re.finditer(r"/((?:[^/\\]|\\.)+)/", " ".join(args)):
                if _finds(found.group(1), _known().processes):
                    return True
        if name == "kill":
            pids = _kill_targets(args)
            if any(re.fullmatch(r"-\S+|0", p) for p in pids):
                return True  # every process, or whole process groups
            fed = fed or not pids or any("$(" in p or "`" in p for p in pids)
    selects = {"pgrep", "pidof", "grep", "egrep", "fgrep", "awk", "gawk", "mawk"}
    listed = any(run[0] in {"ps", "pstree"} for run in runs)
    return fed and listed and not any(run[0] in selects for run in runs)


def _kill_targets(args: list[str]) -> list[str]:
    """kill's process ids (its signal given as ``-9``, ``-KILL``, ``-s KILL``, ``-n 9``)."""
    rest = list(args)
    if rest[:1] and rest[0] in {"-l", "-L", "--list", "--table"}:
        return ["%"]  # lists signals, sends none
    if rest[:1] and rest[0] in {"-s", "-n", "--signal"}:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("-") and rest[0] != "--":
        rest = rest[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    return rest


def _pgrep_reaches(args: list[str]) -> bool:
    full = exact = fold = invert = False
    patterns: list[str] = []
    n = 0
    while n < len(args):
        arg = args[n]
        if arg in _PGREP_VALUES:
            n += 2
            continue
        if arg.startswith("--"):
            full |= arg == "--full"
            exact |= arg == "--exact"
            fold |= arg == "--ignore-case"
            invert |= arg == "--inverse"
        elif arg.startswith("-") and len(arg) > 1:
            if not re.fullmatch(r"-([0-9]+|[A-Z]+|SIG[A-Z]+)", arg):
                full |= "f" in arg
                exact |= "x" in arg
                fold |= "i" in arg
                invert |= "v" in arg
        else:
            patterns.append(arg)
        n += 1
    if invert or not patterns or _unknown(patterns[0]):
        return True  # every process but some, or every process of a user, group, parent
    pattern = patterns[0]
    if exact:
        pattern = f"^(?:{pattern})$"
    if fold:
        pattern = f"(?i){pattern}"
    return _finds(
        pattern, _known().processes if full else tuple(n[:15] for n in _known().process_names)
    )


def _killall_reaches(args: list[str]) -> bool:
    regexp = fold = False
    names: list[str] = []
    n = 0
    while n < len(args):
        arg = args[n]
        if arg in _KILLALL_VALUES:
            n += 2
            continue
        if arg.startswith("-") and len(arg) > 1:
            regexp |= arg in {"-r", "--regexp"}
            fold |= arg in {"-I", "--ignore-case"}
        else:
            names.append(arg)
        n += 1
    if not names or any(_unknown(name) for name in names):
        return True  # every process of a user, or names the line does not say
    for name in names:
        if regexp and _finds(f"(?i){name}" if fold else name, _known().process_names):
            return True
        if not regexp and any(
            (name.lower() == hook.lower()) if fold else name == hook
            for hook in _known().process_names
        ):
            return True
    return False


def _grep_reaches(name: str, args: list[str]) -> bool:
    fixed, fold, invert = name == "fgrep", False, False
    patterns: list[str] = []
    n = 0
    while n < len(args):
        arg = args[n]
        if arg in {"-e", "--regexp"} and n + 1 < len(args):
            patterns.append(args[n + 1])
            n += 2
            continue
        if arg.startswith("-") and len(arg) > 1:
            fixed |= "F" in arg or arg == "--fixed-strings"
            fold |= "i" in arg.lstrip("-")[:1] or arg == "--ignore-case"
            invert |= bool(re.fullmatch(r"-[a-zA-Z]*v[a-zA-Z]*", arg)) or arg == "--invert-match"
        elif not patterns:
            patterns.append(arg)
        n += 1
    if invert or any(_unknown(p) for p in patterns[:1]):
        return True  # every process but those it names, or a pattern not on the line
    for pattern in patterns[:1]:
        if fixed:
            pattern = re.escape(pattern)
        if _finds(f"(?i){pattern}" if fold else pattern, _known().processes):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _probe(pattern: str) -> Any:
    """A line's own pattern compiled (apart from the rules' cache, which it must not
    crowd out), or None when the rules' check refuses it."""
    return None if pattern_problem(pattern) is not None else regex.compile(pattern, regex.V0)


def _unknown(word: str) -> bool:
    """A word whose value the line does not give (a variable, a command's output)."""
    return bool(re.search(r"\$[\w{(]|`", word))


def _finds(pattern: str, lines: tuple[str, ...]) -> bool:
    """Whether the (extended regular expression) pattern is found in any of ``lines``;
    True when it cannot be tried (it does not compile, or takes too long)."""
    compiled = _probe(pattern)
    if compiled is None:
        return True
    for line in lines:
        found = _search(compiled, line, MATCH_TIMEOUT_SECONDS)
        if found is None or found:
            return True
    return False


# -- matching ---------------------------------------------------------------------------------


def _names_match(glob: str, action: Action) -> bool:
    names = action.names
    if tool_matches(glob, names[0], client_tool=names[1] if len(names) > 1 else None):
        return True
    # A tool read by its input's shape (an MCP tool that runs a command) is of that kind.
    return f"kind:{action.kind}" in {part.strip() for part in glob.split("|")}


def _verdict(
    rule: Rule, action: Action, deadline: float, texts: tuple[str, ...] | None = None
) -> bool | None:
    """Whether a rule that holds calls (ask, deny) matches ``texts`` (all the action's, by
    default): True, False, or None when that cannot be known."""
    placed = _placed(rule, action)
    if placed is False:
        return False
    sure = placed is True
    if not rule.pattern:
        return True if sure else None
    compiled = _compiled(rule.pattern)
    if compiled is None:
        return None
    for text in action.texts if texts is None else texts:
        left = deadline - time.thread_time()
        if left <= 0:
            return None
        found = _search(compiled, text, min(MATCH_TIMEOUT_SECONDS, left))
        if found is None:
            return None
        if found:
            return True if sure else None
    return None if action.unsure else False


def _placed(rule: Rule, action: Action) -> bool | None:
    """Whether the call is where the rule looks, its pattern aside: the rule names its
    tool and, for an ``outside_cwd`` rule, it reaches outside the session's folder. None
    when the folder it reaches cannot be known."""
    if not _names_match(rule.tool, action):
        return False
    if not rule.outside_cwd or action.outside is True:
        return True
    return False if action.outside is False else None


def _covers(rule: Rule, action: Action, covered: set[int], deadline: float) -> bool | None:
    """Whether an allow rule lets the call by: the raw input matched whole, or the line's
    every command matched by it or an earlier allow rule (``covered``, which this adds
    to). False when it does not (yet); None when that cannot be known (the rule is passed
    over)."""
    placed = _placed(rule, action)
    if placed is False:
        return False
    sure = placed is True
    if not rule.pattern:
        return True if sure else None
    if action.unsure:
        return None  # an allow rule lets by only what it has read whole
    compiled = _compiled(rule.pattern)
    if compiled is None:
        return None
    raw = action.texts[0]
    whole = _search(compiled, raw, _left(deadline), whole=True)
    if whole is None:
        return None
    if whole:
        return True if sure else None
    if not action.commands:
        # A path, a URL, a query: one text, matched as before.
        found = _search(compiled, raw, _left(deadline))
        if found is None:
            return None
        return (True if sure else None) if found else False
    for n, command in enumerate(action.commands):
        if n in covered or command.exempt:
            continue
        for text in dict.fromkeys((command.head, command.key)):
            found = _search(compiled, text, _left(deadline))
            if found is None:
                return None
            if found:
                covered.add(n)
                break
    every = all(n in covered or c.exempt for n, c in enumerate(action.commands))
    if every and covered:
        return True if sure else None
    return False


def _left(deadline: float) -> float:
    return max(0.0, min(MATCH_TIMEOUT_SECONDS, deadline - time.thread_time()))


def _rest(action: Action, covered: set[int]) -> tuple[str, ...]:
    """The texts a holding rule is matched against once allow rules covered some of the
    line's commands: those of the other commands, and those of the line as a whole."""
    if not covered:
        return action.texts
    mine = {t for n, c in enumerate(action.commands) if n in covered for t in (*c.texts, c.head)}
    others = {t for n, c in enumerate(action.commands) if n not in covered for t in c.texts}
    return tuple(t for t in action.texts[1:] if t in others or t not in mine)


def _search(compiled: Any, text: str, budget: float, *, whole: bool = False) -> bool | None:
    """Whether the pattern is found in ``text`` (``whole``: matches all of it); None when
    matching it takes more than ``budget`` seconds of this thread's CPU time.

    The pattern library's timeout counts the wall clock, which also runs while the thread
    waits for a core or the GIL: on a loaded server an ordinary pattern would time out and
    its call be held for a person. A search that timed out having spent little CPU is tried
    again with more time, up to ``MATCH_WALL_MAX_SECONDS`` in all; one that spent half its
    budget working is a slow pattern."""
    if budget <= 0:
        return None
    began_cpu, began_wall = time.thread_time(), time.monotonic()
    wall = budget
    find = compiled.fullmatch if whole else compiled.search
    while True:
        try:
            return find(text.strip() if whole else text, timeout=wall) is not None
        except TimeoutError:
            spent = time.thread_time() - began_cpu
            waited = time.monotonic() - began_wall
            if spent >= budget / 2 or waited >= MATCH_WALL_MAX_SECONDS:
                return None
            wall = min(wall * 4, MATCH_WALL_MAX_SECONDS - waited)


def rule_matches(
    rule: Rule,
    tool_name: str,
    tool_input: dict[str, Any],
    cwd: str,
    *,
    client_tool: str | None = None,
) -> bool:
    """Whether ``rule`` applies to the call: it matches, or it cannot be known and the
    rule holds calls back (an ``allow`` applies only to what it surely covers whole)."""
    action = read_action(tool_name, tool_input, cwd, client_tool=client_tool)
    if rule.pattern:
        _compiled(rule.pattern)  # before the budget, as in ``first_match``
    deadline = time.thread_time() + limits.GATE_MATCH_BUDGET_SECONDS
    if rule.decision == ALLOW:
        return _covers(rule, action, set(), deadline) is True
    return _verdict(rule, action, deadline) is not False


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
    (``SUPERVISION_RULE``), and so is a signal that could stop the hooks
    (``TAMPERING_RULE``). An allow rule decides only a call it covers whole (the module's
    docstring); one that covers some of a line's commands leaves the rest to the rules
    after it. A rule that cannot be known to match asks: a ``deny`` rule asks instead of
    denying, an ``allow`` rule is passed over. Past the call's budget
    (``limits.GATE_MATCH_BUDGET_SECONDS`` for all its rules) the call is asked about."""
    action = read_action(tool_name, tool_input, cwd, client_tool=client_tool)
    if action.supervision:
        return SUPERVISION_RULE
    if action.tampering:
        return TAMPERING_RULE
    # Compiled before the budget starts: compiling is paid once a pattern a process (and
    # bounded when the rule is saved), and a server's first call must not be held for a
    # person because it paid for it (the bench's first hook call was, at 0.1 s of CPU).
    for rule in rules:
        if rule.pattern:
            _compiled(rule.pattern)
    # CPU time of this thread (see ``_search``): a busy machine slows every call's matching
    # alike, and must not make ordinary calls wait for a person.
    deadline = time.thread_time() + limits.GATE_MATCH_BUDGET_SECONDS
    unsure: Rule | None = None
    covered: set[int] = set()
    for rule in rules:
        if time.thread_time() > deadline:
            return OVER_BUDGET_RULE
        if rule.decision == ALLOW:
            if _covers(rule, action, covered, deadline) is True and unsure is None:
                return rule
            continue
        verdict = _verdict(rule, action, deadline, _rest(action, covered))
        if verdict is True:
            return rule
        if verdict is None and unsure is None:
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
    if rule is TAMPERING_RULE:
        return Explanation(None, rule, "rule on stopping the supervision's hooks")
    if rule is OVER_BUDGET_RULE:
        return Explanation(None, rule, "rule on calls too long to check")
    # An unsure match is a copy of the rule (asking, with a note that says so).
    key = (rule.id, rule.tool, rule.pattern, rule.outside_cwd)
    number = next(
        n for n, r in enumerate(rules, 1) if (r.id, r.tool, r.pattern, r.outside_cwd) == key
    )
    return Explanation(number, rule)

"""CLIENTS: one row per coding client the board supervises through its hooks (SPEC §13).

Each row says what the client sends, how it blocks a call, how long it holds one,
and what it cannot do; its adapter module (``boards.clients.<module>``) reads the
client's hook input as Claude Code's (a normalised event: Claude's event and tool
names, Claude-shaped tool input, the client's own tool name beside them) and writes
the board's decision in the shape that client obeys. The row also says where
``agent-kanban connect`` writes its hooks (``settings``: per scope, and the file's
layout), its binary, the folders the gate's supervision rule protects and its tool names
by kind: ``setup``, the Connect page and the gate read them from here. Adding a client is
one row here, one adapter module and its test (docs/recipes.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from boards.clients import claude_code, codex, copilot, gemini, opencode, qwen
from boards.gates import matching


class Adapter(Protocol):
    """What an adapter module provides."""

    def normalise(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def answer(
        self, event: dict[str, Any], decision: str | None, reason: str, context: str
    ) -> dict[str, Any]: ...


# How a settings file holds the hooks (``setup.client_change``): Claude Code's layout
# (timeouts in seconds, or in milliseconds: Gemini CLI), Copilot CLI's own file, or
# opencode's plugin (no hook commands at all).
LAYOUTS = ("claude", "claude-ms", "copilot", "plugin")


@dataclass(frozen=True)
class Settings:
    """Where ``agent-kanban connect`` writes a client's hooks, per scope."""

    # The user's file, under the home folder; ``home_env`` names the variable that moves
    # its first folder (``CODEX_HOME`` for ``.codex``).
    user: str
    home_env: str = ""
    # The managed (system) file under the machine's root: hooks there are the
    # administrator's, which a project's own settings cannot switch off; "" for none.
    system: str = ""
    layout: str = "claude"
    note: str = ""  # what the Connect page says beside the file
    advice: str = ""  # what connect tells the person after writing the user's file
    # Set beside managed hooks where the client lets the system scope win (a project's
    # ``disableAllHooks`` then cannot).
    system_keys: Mapping[str, Any] = field(default_factory=dict)
    # Added to each gated hook (Claude Code's ``"onFailure": "block"``: a killed hook
    # blocks the call).
    gated_keys: Mapping[str, str] = field(default_factory=dict)

    def writes(self) -> str:
        """Where connect writes, as people read it (the Connect page)."""
        user = f"~/{self.user}"
        if self.home_env:
            user = f"${self.home_env}/{self.user.split('/', 1)[1]} ({user})"
        if self.note:
            user = f"{user[:-1]}; {self.note})" if user.endswith(")") else f"{user} ({self.note})"
        return f"{user}, or /{self.system} with --system" if self.system else user


@dataclass(frozen=True)
class Client:
    """One coding client: its door's name and what the board must know of its hooks."""

    name: str  # the door's name: POST /api/boards/<slug>/hooks/<name>
    display: str
    verified: str  # the version this row was checked with
    events: tuple[str, ...]  # the hook events it sends, in its own names
    gated: str  # the event that asks before a tool runs
    blocks_by: str
    holds_at_most: int | None  # seconds a hook may hold a call before the client goes on
    cannot: tuple[str, ...]
    adapter: ModuleType
    # A gated hook killed by a signal (a model's ``pkill -f`` loop):
    # what the client then does with the call (docs/clients.md, "killed hook").
    killed_hook: str = "runs the call: it has no setting that makes a failed hook block"
    settings: Settings = field(kw_only=True)
    binary: str = field(kw_only=True)  # its command on PATH (connect finds it installed)
    # Where its settings and hooks live, under a home folder or absolute (managed): the
    # gate's supervision rule asks before any write there, whatever a board's rules say.
    folders: tuple[str, ...] = field(kw_only=True)
    # Its own tool names by kind (shell, write, read, fetch), for the gate's ``kind:`` rules.
    tool_kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict, kw_only=True)
    # How ``ps -o args`` shows it running (the gate's rule on signals that stop hooks).
    processes: tuple[str, ...] = field(default=(), kw_only=True)

    def longest_hold(self) -> int | None:
        """Seconds the board may hold one of this client's calls: its cap, less a margin
        for the answer to reach it (Qwen holds 60 s, so the board answers by 55 s)."""
        return None if self.holds_at_most is None else self.holds_at_most - HOLD_MARGIN_SECONDS


HOLD_MARGIN_SECONDS = 5

CLIENTS: tuple[Client, ...] = (
    Client(
        "claude-code",
        "Claude Code",
        "2.1.332",
        claude_code.EVENTS,
        "PreToolUse",
        "exit 2 with the reason on stderr, or a deny answer",
        None,
        (),
        claude_code,
        'blocks the call: connect writes "onFailure": "block" on its gated hooks '
        "(ignored on TaskCompleted: a killed completion check lets the completion through)",
        settings=Settings(
            ".claude/settings.json",
            system="etc/claude-code/managed-settings.json",
            note="its hooks, merged",
            gated_keys={"onFailure": "block"},
        ),
        binary="claude",
        folders=(".claude", "/etc/claude-code"),
        processes=("node /usr/local/bin/claude",),
    ),
    Client(
        "codex",
        "Codex",
        "0.171",
        codex.EVENTS,
        "PreToolUse",
        "exit 2 with a non-empty stderr, or a deny answer",
        600,
        (
            "runs hooks not yet trusted silently without them: trust them once in /hooks, "
            "or install them as managed (/etc/codex/hooks.json)",
            "exit 2 with an empty stderr lets the call run",
            "cannot ask its person (an ask runs the call)",
            "codex exec refuses some calls itself (rm -f) even after a person approved",
        ),
        codex,
        settings=Settings(
            ".codex/hooks.json",
            home_env="CODEX_HOME",
            system="etc/codex/hooks.json",
            advice="Codex skips hooks it has not been told to trust: open `codex`, type /hooks "
            "and trust them once (or run connect again with --system, as root, to install "
            "them as managed in /etc/codex/hooks.json).",
        ),
        binary="codex",
        folders=(".codex", "/etc/codex"),
        tool_kinds={
            "shell": ("shell", "local_shell", "exec_command"),
            "write": ("apply_patch",),
            "fetch": ("web_search",),
        },
        processes=("/usr/local/bin/codex",),
    ),
    Client(
        "copilot",
        "GitHub Copilot CLI",
        "1.0.102",
        copilot.EVENTS,
        "PreToolUse",
        "a deny answer on stdout (exit 2 drops the reason)",
        None,
        (
            "needs PascalCase event names (camelCase payloads lack the event's name)",
            "sends no call id: its calls are matched by tool and input",
        ),
        copilot,
        "blocks the call: a hook that dies by a signal is an error, which it reads as a deny "
        "(a hook past its timeoutSec still runs the call)",
        settings=Settings(
            ".copilot/hooks/agent-kanban.json",
            home_env="COPILOT_HOME",
            layout="copilot",
            note="PascalCase event names",
        ),
        binary="copilot",
        folders=(".copilot",),
        tool_kinds={
            "shell": ("bash", "shell"),
            "write": ("create", "edit", "str_replace"),
            "read": ("view", "glob", "grep"),
            "fetch": ("web_fetch", "fetch"),
        },
        processes=("node /usr/local/bin/copilot",),
    ),
    Client(
        "gemini",
        "Gemini CLI",
        "0.61",
        gemini.EVENTS,
        "BeforeTool",
        'exit 2 with stderr, or {"decision": "deny"} (Claude\'s answer shape is ignored)',
        None,
        (
            "skips project hooks in an untrusted folder: the hooks are the user's",
            "sends no call id: its calls are matched by tool and input",
        ),
        gemini,
        settings=Settings(
            ".gemini/settings.json",
            system="etc/gemini-cli/settings.json",
            layout="claude-ms",
            note="user hooks, merged; project hooks do not run in an untrusted folder",
            system_keys={"hooksConfig": {"enabled": True}},
        ),
        binary="gemini",
        folders=(".gemini", "/etc/gemini-cli"),
        tool_kinds={
            "shell": ("run_shell_command",),
            "write": ("write_file", "replace"),
            "read": (
                "read_file",
                "read_many_files",
                "list_directory",
                "glob",
                "search_file_content",
            ),
            "fetch": ("web_fetch", "google_web_search"),
        },
        processes=("node /usr/local/lib/node_modules/@google/gemini-cli/dist/index.js",),
    ),
    Client(
        "qwen",
        "Qwen Code",
        "0.24",
        qwen.EVENTS,
        "PreToolUse",
        "exit 2 with stderr, or a deny answer",
        60,
        (
            "holds a hook 60 s at most, then runs the call: a held call ends with its "
            "rule's fallback 55 s after it",
        ),
        qwen,
        settings=Settings(
            ".qwen/settings.json",
            system="etc/qwen-code/settings.json",
            note="its hooks, merged",
            system_keys={"disableAllHooks": False},
        ),
        binary="qwen",
        folders=(".qwen", "/etc/qwen-code"),
        tool_kinds={
            "shell": ("run_shell_command",),
            "write": ("write_file", "replace"),
            "read": ("read_file", "read_many_files", "list_directory", "glob"),
        },
        processes=("node /usr/local/bin/qwen",),
    ),
    Client(
        "opencode",
        "opencode",
        "1.18",
        opencode.EVENTS,
        "tool.execute.before",
        "the plugin throws; the model reads the message",
        None,
        ("has no hook commands: a plugin file forwards its calls",),
        opencode,
        "blocks the call: the plugin runs inside opencode, with no process to kill",
        settings=Settings(
            ".config/opencode/plugin/agent-kanban.js",
            home_env="XDG_CONFIG_HOME",
            layout="plugin",
            note="a plugin: opencode has no hook commands",
        ),
        binary="opencode",
        folders=(".opencode", ".config/opencode"),
        tool_kinds={
            "shell": ("bash",),
            "write": ("write", "edit", "multiedit", "patch"),
            "read": ("read", "list", "glob", "grep"),
            "fetch": ("webfetch", "websearch"),
        },
        processes=(
            "/home/u/.opencode/bin/opencode",
            "opencode serve --hostname 127.0.0.1 --port 4096",
            "node /usr/local/bin/opencode",
        ),
    ),
)
BY_NAME: dict[str, Client] = {client.name: client for client in CLIENTS}
NAMES = tuple(BY_NAME)


def gate_facts() -> list[matching.ClientFacts]:
    """What the gate reads of every row (``boards.apps`` installs it at ready)."""
    return [
        matching.ClientFacts(c.folders, dict(c.tool_kinds), c.binary, c.processes) for c in CLIENTS
    ]


def client(name: str) -> Client | None:
    """The client whose door is called ``name``, or None."""
    return BY_NAME.get(name)

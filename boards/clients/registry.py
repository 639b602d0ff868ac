"""CLIENTS: one row per coding client the board supervises through its hooks (SPEC §13).

Each row says what the client sends, how it blocks a call, how long it holds one,
and what it cannot do; its adapter module (``boards.clients.<module>``) reads the
client's hook input as Claude Code's (a normalised event: Claude's event and tool
names, Claude-shaped tool input, the client's own tool name beside them) and writes
the board's decision in the shape that client obeys. Adding a client is one row
here and one adapter module.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from boards.clients import claude_code, codex, copilot, gemini, opencode, qwen


class Adapter(Protocol):
    """What an adapter module provides."""

    def normalise(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def answer(
        self, event: dict[str, Any], decision: str | None, reason: str, context: str
    ) -> dict[str, Any]: ...


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
    ),
)
BY_NAME: dict[str, Client] = {client.name: client for client in CLIENTS}
NAMES = tuple(BY_NAME)


def client(name: str) -> Client | None:
    """The client whose door is called ``name``, or None."""
    return BY_NAME.get(name)

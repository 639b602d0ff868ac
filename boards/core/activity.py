"""What an event means to a person: one sentence, and the signal it raises.

The activity feed, the board's live announcements, desktop notifications and
outbound webhooks all describe events with these functions, so a change reads
the same wherever a person meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from boards.core.reasons import REASONS, question
from boards.core.states import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    COMPLETED,
    FAILED,
    NEEDS_ATTENTION,
    RECLAIMED,
    EventKind,
)
from boards.models import Status

SIGNALS: dict[str, str] = {
    APPROVAL_REQUESTED: "Approval requested",
    APPROVAL_DECIDED: "Approval decided",
    FAILED: "Task failed",
    RECLAIMED: "Lease lapsed, task reclaimed",
    NEEDS_ATTENTION: "Task needs attention",
    COMPLETED: "Task completed",
}
# What a person's browser notifies about until they choose (the ones that wait for them).
DEFAULT_NOTIFY = (APPROVAL_REQUESTED, FAILED, RECLAIMED, NEEDS_ATTENTION)

STATUS_NAMES = dict(Status.choices)
# What a gate's held tool call records: one sentence shape (``_tool_call_sentence``).
TOOL_CALL_KINDS = (
    EventKind.TOOL_CALL_REQUESTED,
    EventKind.TOOL_CALL_APPROVED,
    EventKind.TOOL_CALL_DENIED,
    EventKind.TOOL_CALL_EXPIRED,
    EventKind.TOOL_CALL_RAN,
    EventKind.TOOL_CALL_CLEARED,
)


def notifies(reason: str, kinds: Iterable[str]) -> bool:
    """Whether an item that needs a person (SPEC §12) notifies someone who chose ``kinds``:
    its own signal (a request for approval, a failure), or any "needs attention"."""
    chosen = set(kinds)
    row = REASONS.get(reason)
    own = row.signal if row is not None else NEEDS_ATTENTION
    return own in chosen or NEEDS_ATTENTION in chosen


def needs_sentence(
    reason: str, failures: int = 0, max_attempts: int = 0, owner_state: str = ""
) -> str:
    """What a task that needs a person (SPEC §12, ``reason``) asks, in one sentence
    (``owner_state``: its owner is "silent" or "gone")."""
    return question(reason, failures, max_attempts, owner_state)


def status_to(data: dict[str, Any]) -> str | None:
    """The status an event's change went to (``data.fields.status.to``), or None."""
    change = (data.get("fields") or {}).get("status")
    return change.get("to") if isinstance(change, dict) else None


def signal_of(kind: str, data: dict[str, Any]) -> str | None:
    """The signal an event raises, or None."""
    if kind in (EventKind.APPROVAL_REQUESTED, EventKind.TOOL_CALL_REQUESTED):
        return APPROVAL_REQUESTED
    if kind in (
        EventKind.APPROVED,
        EventKind.DENIED,
        EventKind.TOOL_CALL_APPROVED,
        EventKind.TOOL_CALL_DENIED,
    ):
        return APPROVAL_DECIDED
    if kind == EventKind.RECLAIMED:
        return RECLAIMED
    if kind in (EventKind.NEEDS_ATTENTION, EventKind.TOOL_CALL_RAN):
        return NEEDS_ATTENTION
    to = status_to(data)
    if to == Status.FAILED:
        return FAILED
    if to == Status.COMPLETED:
        return COMPLETED
    return None


def _fields(data: dict[str, Any]) -> str:
    names = [name for name in (data.get("fields") or {}) if name != "status"]
    return ", ".join(names)


@dataclass(frozen=True)
class Told:
    """What a sentence is made from: the event's kind, its task ("#12", or "The board"),
    its actor (and " by <actor>" when there is one) and its data."""

    kind: str
    task: str
    actor: str
    by: str
    data: dict[str, Any]

    def get(self, key: str, default: Any = "") -> Any:
        return self.data.get(key, default)

    def quoted(self, key: str) -> str:
        """ ": “<data[key]>”" when the event carries one (a reason, a note), else nothing."""
        return f": “{self.data[key]}”" if self.data.get(key) else ""


def _updated(e: Told) -> str:
    changed = _fields(e.data)
    return f"{e.task} updated{e.by}" + (f" ({changed})" if changed else "")


def _moved(e: Told) -> str:
    to = status_to(e.data)
    return f"{e.task} moved to {STATUS_NAMES.get(to, to)}{e.by}" if to else _updated(e)


def _needs_attention(e: Told) -> str:
    if e.get("session"):
        return (
            f"{e.actor}'s session needs you: it sent the same tool call "
            f"{e.get('repeats', '?')} times in a row"
        )
    if "reason" not in e.data:  # recorded before reasons had names
        return f"{e.task} needs attention: failed or timed out {e.get('failures', '?')} times"
    sentence = needs_sentence(e.data["reason"], e.get("failures") or 0, e.get("maxAttempts") or 0)
    return f"{e.task} needs you: it {sentence}"


def _member(e: Told) -> str:
    who = e.get("person", "?")
    role = e.get("role")
    return f"{who} is now {role}{e.by}" if role else f"{who} removed from the board{e.by}"


def _invite(e: Told) -> str:
    action, role = e.get("action", "changed"), e.get("role", "?")
    if action == "accepted":
        return f"{e.actor} joined as {role} through an invite"
    return f"Invite link for a new {role} {action}{e.by}"


def _tool_call(e: Told) -> str:
    call = f"{e.get('tool', '?')} `{str(e.get('summary'))[:120]}`"
    if e.kind == EventKind.TOOL_CALL_REQUESTED:
        return f"{e.actor} asks to run {call} (rule “{e.get('rule')}”)"
    agent = e.get("agent", "?")
    if e.kind == EventKind.TOOL_CALL_RAN:
        why = f" ({e.get('why')})" if e.get("why") else ""
        return f"{agent} ran {call} without the board's verdict{why}: its hook was stopped"
    if e.kind == EventKind.TOOL_CALL_CLEARED:
        done = "its token revoked" if e.get("revoked") else "its session may go on"
        return f"{agent}'s ungated {call} cleared by {e.actor}: {done}{e.quoted('note')}"
    if e.kind == EventKind.TOOL_CALL_EXPIRED:
        return f"Nobody answered {agent}'s {call}: {e.get('fallback', 'deny')} by the rule"
    verb = "approved" if e.kind == EventKind.TOOL_CALL_APPROVED else "denied"
    return f"{agent}'s {call} {verb} by {e.actor}{e.quoted('note')}"


def _session(e: Told) -> str:
    where = f" in {e.data['cwd']}" if e.get("cwd") else ""
    verb = "started a session" if e.kind == EventKind.SESSION_STARTED else "ended its session"
    return f"{e.actor} {verb}{where}"


def _agent_state(e: Told) -> str:
    state = "went silent" if e.kind == EventKind.AGENT_SILENT else "is gone"
    return f"Agent {e.get('name', '?')} {state}: no call for a while"


def _runner(e: Told) -> str:
    name = e.get("name", "?")
    if e.kind == EventKind.RUNNER_SEEN:
        host = f" on {e.get('host')}" if e.get("host") else ""
        return f"Runner {name} connected{host}"
    if e.kind == EventKind.RUNNER_GONE:
        return f"Runner {name} is gone: it has not polled the board for a while"
    return f"{e.get('command', '?')} sent to runner {name}{e.by}"


def _pushed_item(e: Told) -> str:
    """The item a push named: a held call by its agent and command, a session by its
    agent, a task by its number."""
    if e.get("tool"):
        return f"{e.get('agent', '?')}'s {e.get('tool')} `{str(e.get('summary'))[:120]}`"
    if str(e.get("item")).startswith("session-") and e.get("agent"):
        return f"{e.get('agent')}'s session"
    return e.task


def _push(e: Told) -> str:
    what = _pushed_item(e)
    if e.kind == EventKind.PUSH_ACTED:
        verb = "approved" if e.get("action") == "approve" else "denied"
        return f"{what} {verb} from a push by {e.actor}"
    if e.kind == EventKind.STEP_UP:
        return f"{e.actor} confirmed approving {what} with a passkey"
    n = e.get("devices") or 0
    told = f"{n} device{'' if n == 1 else 's'}"
    failed = f" ({e.get('failed')} refused it)" if e.get("failed") else ""
    if e.kind == EventKind.PUSH_WITHDRAWN:
        return f"{what} no longer waits: its push withdrawn from {told}{failed}"
    again = " again, its links lapsed" if e.get("again") else ""
    return f"{what} pushed to {told}{again}{failed}"


def _listed(e: Told, key: str) -> str:
    return ", ".join(e.get(key) or {})


# One sentence per kind of event (a kind not listed reads as "#12 updated by …").
SENTENCES: dict[str, Callable[[Told], str]] = {
    EventKind.CREATED: lambda e: f"{e.task} “{e.get('subject')}” created{e.by}",
    EventKind.STATUS: _moved,
    EventKind.CLAIMED: lambda e: f"{e.task} claimed{e.by}",
    EventKind.APPROVAL_REQUESTED: lambda e: (
        f"{e.task} awaits approval, requested{e.by}{e.quoted('reason')}"
    ),
    EventKind.APPROVED: lambda e: f"{e.task} {e.kind}{e.by}{e.quoted('note')}",
    EventKind.DENIED: lambda e: f"{e.task} {e.kind}{e.by}{e.quoted('note')}",
    EventKind.APPROVAL_CLEARED: lambda e: (
        f"{e.task}'s approval request was cleared ({e.get('reason')})"
    ),
    EventKind.APPROVAL_CANCELLED: lambda e: (
        f"{e.task}'s waiting approval request was cancelled ({e.get('reason')})"
    ),
    EventKind.RECLAIMED: lambda e: (
        f"{e.task} returned to Pending: {e.get('owner') or 'its owner'}'s lease lapsed"
    ),
    EventKind.NEEDS_ATTENTION: _needs_attention,
    EventKind.REASSIGNED: lambda e: (
        f"{e.task} reassigned to {((e.get('fields') or {}).get('owner') or {}).get('to') or 'nobody'}{e.by}"
    ),
    EventKind.DELETED: lambda e: f"{e.task} “{e.get('subject')}” deleted{e.by}",
    EventKind.BLOCKED: lambda e: f"{e.task} is blocked",
    EventKind.UNBLOCKED: lambda e: f"{e.task} is ready: its blockers finished",
    EventKind.MESSAGE: lambda e: f"{e.actor} sent a message to {e.get('to', '?')}",
    EventKind.MEMBER: _member,
    EventKind.INVITE: _invite,
    EventKind.SETTINGS: lambda e: f"Board settings changed{e.by} ({_listed(e, 'fields')})",
    EventKind.RESET: lambda e: f"Board reset{e.by}",
    EventKind.RECOUNTED: lambda e: f"Board counts repaired{e.by} ({_listed(e, 'drift')})",
    EventKind.BOARD_CREATED: lambda e: f"Board created{e.by}",
    EventKind.AGENT_REMOVED: lambda e: f"Agent {e.get('name', '?')} removed{e.by}",
    EventKind.WEBHOOK: lambda e: f"Webhook {e.get('url')} {e.get('action', 'changed')}{e.by}",
    EventKind.WEBHOOK_TEST: lambda e: f"Test event sent{e.by}",
    **dict.fromkeys(TOOL_CALL_KINDS, _tool_call),
    EventKind.SESSION_STARTED: _session,
    EventKind.SESSION_ENDED: _session,
    EventKind.AGENT_SILENT: _agent_state,
    EventKind.AGENT_GONE: _agent_state,
    EventKind.RUNNER_SEEN: _runner,
    EventKind.RUNNER_GONE: _runner,
    EventKind.RUNNER_COMMAND: _runner,
    EventKind.PUSHED: _push,
    EventKind.PUSH_WITHDRAWN: _push,
    EventKind.PUSH_ACTED: _push,
    EventKind.STEP_UP: _push,
    EventKind.GATE_RULE: lambda e: f"Gate rule {e.get('action', 'changed')}{e.by}: {e.get('rule')}",
}


def describe(kind: str, number: int | None, actor: str, data: dict[str, Any]) -> str:
    """One sentence a person reads: "#12 moved to Completed by worker-2"."""
    task = f"#{number}" if number is not None else "The board"
    told = Told(kind, task, actor, f" by {actor}" if actor else "", data)
    return SENTENCES.get(kind, _updated)(told)

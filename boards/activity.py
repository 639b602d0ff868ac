"""What an event means to a person: one sentence, and the signal it raises.

The activity feed, the board's live announcements, desktop notifications and
outbound webhooks all describe events with these functions, so a change reads
the same wherever a person meets it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .models import Status

# Signals: the kinds of event a person can ask to be reached about (notifications,
# webhooks). Each event raises at most one.
APPROVAL_REQUESTED = "approval_requested"
APPROVAL_DECIDED = "approval_decided"
FAILED = "failed"
RECLAIMED = "reclaimed"
NEEDS_ATTENTION = "needs_attention"
COMPLETED = "completed"

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


def notifies(reason: str, kinds: Iterable[str]) -> bool:
    """Whether an item that needs a person (SPEC §12) notifies someone who chose ``kinds``:
    its own signal (a request for approval, a failure), or any "needs attention"."""
    chosen = set(kinds)
    own = {"approval": APPROVAL_REQUESTED, "failed": FAILED}.get(reason, NEEDS_ATTENTION)
    return own in chosen or NEEDS_ATTENTION in chosen


def needs_sentence(reason: str, failures: int = 0, max_attempts: int = 0) -> str:
    """What a task that needs a person (SPEC §12, ``reason``) asks, in one sentence."""
    if reason == "approval":
        return "waits for a person's approval"
    if reason == "failed":
        if max_attempts and failures >= max_attempts:
            return (
                f"failed or timed out {failures} time{'s' if failures != 1 else ''} (the "
                f"board allows {max_attempts}); retry it, reassign it or cancel it"
            )
        return "failed, and work waits on it; retry it, go on without it, or cancel the chain"
    if reason == "stranded":
        return (
            "was cancelled or denied, and work waits on it; go on without it, reopen it, "
            "or cancel what waits on it"
        )
    if reason == "not_started":
        return "was assigned and its owner has not started it; reassign it or release it"
    if reason == "no_progress":
        return "has made no progress for a long while; message its owner, release or reassign it"
    return reason


def status_to(data: dict[str, Any]) -> str | None:
    """The status an event's change went to (``data.fields.status.to``), or None."""
    change = (data.get("fields") or {}).get("status")
    return change.get("to") if isinstance(change, dict) else None


def signal_of(kind: str, data: dict[str, Any]) -> str | None:
    """The signal an event raises, or None."""
    if kind in ("approval_requested", "tool_call_requested"):
        return APPROVAL_REQUESTED
    if kind in ("approved", "denied", "tool_call_approved", "tool_call_denied"):
        return APPROVAL_DECIDED
    if kind == "reclaimed":
        return RECLAIMED
    if kind == "needs_attention":
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


def describe(kind: str, number: int | None, actor: str, data: dict[str, Any]) -> str:
    """One sentence a person reads: "#12 moved to Completed by worker-2"."""
    task = f"#{number}" if number is not None else "The board"
    by = f" by {actor}" if actor else ""
    to = status_to(data)
    if kind == "created":
        return f"{task} “{data.get('subject', '')}” created{by}"
    if kind == "status" and to:
        return f"{task} moved to {STATUS_NAMES.get(to, to)}{by}"
    if kind == "claimed":
        return f"{task} claimed{by}"
    if kind == "approval_requested":
        reason = f": “{data['reason']}”" if data.get("reason") else ""
        return f"{task} awaits approval, requested{by}{reason}"
    if kind in ("approved", "denied"):
        note = f": “{data['note']}”" if data.get("note") else ""
        return f"{task} {kind}{by}{note}"
    if kind == "approval_cleared":
        return f"{task}'s approval request was cleared ({data.get('reason', '')})"
    if kind == "reclaimed":
        owner = data.get("owner") or "its owner"
        return f"{task} returned to Pending: {owner}'s lease lapsed"
    if kind == "needs_attention":
        if data.get("session"):
            return (
                f"{actor}'s session needs you: it sent the same tool call "
                f"{data.get('repeats', '?')} times in a row"
            )
        if "reason" not in data:  # recorded before reasons had names
            return f"{task} needs attention: failed or timed out {data.get('failures', '?')} times"
        sentence = needs_sentence(
            data["reason"], data.get("failures") or 0, data.get("maxAttempts") or 0
        )
        return f"{task} needs you: it {sentence}"
    if kind == "reassigned":
        change = (data.get("fields") or {}).get("owner") or {}
        return f"{task} reassigned to {change.get('to') or 'nobody'}{by}"
    if kind == "deleted":
        return f"{task} “{data.get('subject', '')}” deleted{by}"
    if kind == "blocked":
        return f"{task} is blocked"
    if kind == "unblocked":
        return f"{task} is ready: its blockers finished"
    if kind == "message":
        return f"{actor} sent a message to {data.get('to', '?')}"
    if kind == "member":
        role = data.get("role")
        who = data.get("person", "?")
        return f"{who} is now {role}{by}" if role else f"{who} removed from the board{by}"
    if kind == "invite":
        action = data.get("action", "changed")
        role = data.get("role", "?")
        if action == "accepted":
            return f"{actor} joined as {role} through an invite"
        return f"Invite link for a new {role} {action}{by}"
    if kind == "settings":
        return f"Board settings changed{by} ({', '.join(data.get('fields') or {})})"
    if kind == "reset":
        return f"Board reset{by}"
    if kind == "board_created":
        return f"Board created{by}"
    if kind == "agent_removed":
        return f"Agent {data.get('name', '?')} removed{by}"
    if kind == "webhook":
        return f"Webhook {data.get('url', '')} {data.get('action', 'changed')}{by}"
    if kind == "webhook_test":
        return f"Test event sent{by}"
    if kind.startswith("tool_call_"):
        return _tool_call_sentence(kind, actor, data)
    if kind in ("session_started", "session_ended"):
        where = f" in {data['cwd']}" if data.get("cwd") else ""
        verb = "started a session" if kind == "session_started" else "ended its session"
        return f"{actor} {verb}{where}"
    if kind in ("agent_silent", "agent_gone"):
        state = "went silent" if kind == "agent_silent" else "is gone"
        return f"Agent {data.get('name', '?')} {state}: no call for a while"
    if kind == "gate_rule":
        return f"Gate rule {data.get('action', 'changed')}{by}: {data.get('rule', '')}"
    changed = _fields(data)
    return f"{task} updated{by}" + (f" ({changed})" if changed else "")


def _tool_call_sentence(kind: str, actor: str, data: dict[str, Any]) -> str:
    call = f"{data.get('tool', '?')} `{str(data.get('summary', ''))[:120]}`"
    if kind == "tool_call_requested":
        return f"{actor} asks to run {call} (rule “{data.get('rule', '')}”)"
    agent = data.get("agent", "?")
    if kind == "tool_call_expired":
        return f"Nobody answered {agent}'s {call}: {data.get('fallback', 'deny')} by the rule"
    note = f": “{data['note']}”" if data.get("note") else ""
    verb = "approved" if kind == "tool_call_approved" else "denied"
    return f"{agent}'s {call} {verb} by {actor}{note}"

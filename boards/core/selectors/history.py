"""The event log read back: a task's history, approvals, the activity feed, notifications, webhooks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import (
    Count,
    Q,
    QuerySet,
)

from boards.core import limits
from boards.core.activity import DEFAULT_NOTIFY, describe, signal_of
from boards.core.selectors.present import iso
from boards.core.states import EventKind, Status
from boards.models import Agent, Board, Event, Membership, Subscription, Webhook

APPROVAL_EVENTS = (
    EventKind.APPROVAL_REQUESTED,
    EventKind.APPROVED,
    EventKind.DENIED,
    EventKind.APPROVAL_CLEARED,
)


def approval_history(board: Board, number: int) -> list[dict[str, Any]]:
    """Every request and decision on the task, oldest first: who, when, which version, why."""
    events = _task_events(board, number).filter(kind__in=APPROVAL_EVENTS).order_by("seq")
    return [
        {
            "event": e.kind,
            "by": e.actor,
            "at": iso(e.created_at),
            "version": e.data.get("version"),
            "reason": e.data.get("reason"),
            "note": e.data.get("note"),
        }
        for e in events
    ]


def _task_events(board: Board, number: int) -> QuerySet[Event]:
    """The task's events since the board was last reset (numbers restart after a reset)."""
    last_reset = (
        Event.objects.filter(board=board, kind=EventKind.RESET)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
        or 0
    )
    return Event.objects.filter(board=board, task_number=number, seq__gt=last_reset)


def task_history(board: Board, number: int, *, limit: int = 200) -> list[Event]:
    """The task's latest events, newest first."""
    return list(_task_events(board, number).order_by("-seq")[:limit])


ACTIVITY_PAGE = limits.ACTIVITY_PAGE
ACTIVITY_MAX = limits.ACTIVITY_MAX


def activity_page(
    board: Board,
    *,
    actor: str = "",
    kind: str = "",
    task: int | None = None,
    before: int | None = None,
    after: int | None = None,
    limit: int = ACTIVITY_PAGE,
    matters: bool = False,
) -> list[Event]:
    """Events of the board, newest first (``after``: oldest first, the ones after that seq);
    ``matters``: only what a person looks for first (``MATTERS``).

    Each filter has its index (board, actor|kind|task_number, seq): a page costs the
    same however long the log is.
    """
    if "\x00" in actor or "\x00" in kind:
        # No actor or kind holds NUL (services refuse it), and PostgreSQL cannot compare it.
        return []
    events = Event.objects.filter(board=board)
    if actor:
        events = events.filter(actor=actor)
    if kind:
        events = events.filter(kind=kind)
    if task is not None:
        events = events.filter(task_number=task)
    if matters:
        events = events.filter(MATTERS)
    if after is not None:
        rows = list(events.filter(seq__gt=after).order_by("seq")[:limit])
    else:
        if before is not None:
            events = events.filter(seq__lt=before)
        rows = list(events.order_by("-seq")[:limit])
    for event in rows:
        event.sentence = describe(event.kind, event.task_number, event.actor, event.data)  # type: ignore[attr-defined]
    return rows


def event_json(event: Event) -> dict[str, Any]:
    """An event as the events API answers it."""
    return {
        "seq": event.seq,
        "kind": event.kind,
        "signal": signal_of(event.kind, event.data),
        "taskId": str(event.task_number) if event.task_number is not None else None,
        "actor": event.actor,
        "at": iso(event.created_at),
        "text": describe(event.kind, event.task_number, event.actor, event.data),
        "data": event.data,
    }


# Kinds offered as the feed's filter: the ones people ask about.
# What a person looks for first in the feed: failures, approvals asked and decided,
# reassignments, reclaimed leases, and tasks that came to need a person.
MATTERS = Q(
    kind__in=(
        EventKind.APPROVAL_REQUESTED,
        EventKind.APPROVED,
        EventKind.DENIED,
        EventKind.TOOL_CALL_REQUESTED,
        EventKind.TOOL_CALL_APPROVED,
        EventKind.TOOL_CALL_DENIED,
        # What the board decided itself: a held call's fallback when nobody answered, a
        # request withdrawn, an agent given up for gone.
        EventKind.TOOL_CALL_EXPIRED,
        # A call that ran without the board's verdict (its hook stopped), and who cleared it.
        EventKind.TOOL_CALL_RAN,
        EventKind.TOOL_CALL_CLEARED,
        EventKind.APPROVAL_CANCELLED,
        EventKind.AGENT_GONE,
        EventKind.REASSIGNED,
        EventKind.RECLAIMED,
        EventKind.NEEDS_ATTENTION,
    )
) | Q(kind=EventKind.STATUS, data__fields__status__to=Status.FAILED)

ACTIVITY_KINDS = (
    EventKind.CREATED,
    EventKind.CLAIMED,
    EventKind.STATUS,
    EventKind.UPDATED,
    EventKind.APPROVAL_REQUESTED,
    EventKind.APPROVED,
    EventKind.DENIED,
    EventKind.RECLAIMED,
    EventKind.NEEDS_ATTENTION,
    EventKind.REASSIGNED,
    EventKind.BLOCKED,
    EventKind.UNBLOCKED,
    EventKind.DELETED,
    EventKind.MESSAGE,
    EventKind.MEMBER,
    EventKind.SETTINGS,
    EventKind.WEBHOOK,
)


def activity_actors(board: Board) -> list[str]:
    """Who can be picked in the feed's filter: the board's agents and people."""
    agents = Agent.objects.filter(board=board).values_list("name", flat=True)
    people = Membership.objects.filter(board=board).values_list("user__username", flat=True)
    return sorted(set(agents) | set(people))


def notify_kinds(board: Board, user: Any) -> list[str]:
    """The signals that notify this person on this board (their choice, or the defaults)."""
    kinds = (
        Subscription.objects.filter(board=board, user=user).values_list("kinds", flat=True).first()
    )
    return list(DEFAULT_NOTIFY) if kinds is None else list(kinds)


def notify_choices(user: Any) -> dict[int, list[str]]:
    """Each board's signals that notify this person (their choice, else the defaults, for
    a board missing here), in one query."""
    rows = Subscription.objects.filter(user=user).values_list("board_id", "kinds")
    return {board_id: list(kinds) for board_id, kinds in rows}


def webhooks_with_deliveries(board: Board, recent: int = 10) -> Sequence[Webhook]:
    """The board's endpoints, each with its most recent deliveries (``recent_deliveries``)."""
    hooks = list(
        Webhook.objects.filter(board=board)
        .annotate(pending_count=Count("deliveries", filter=Q(deliveries__status="pending")))
        .order_by("id")
    )
    for hook in hooks:  # at most WEBHOOKS_PER_BOARD endpoints: one short read each
        hook.recent_deliveries = list(hook.deliveries.order_by("-id")[:recent])  # type: ignore[attr-defined]
    return hooks

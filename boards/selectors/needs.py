"""What waits for a person (SPEC §12), on one board or on every board a person may act on.

Tasks carry their reason (``Task.needs``, kept by the unit of work and the sweeper:
``rules.needs_of``); held tool calls and waiting client sessions are not tasks and
come from their own queries. ``needs_you`` merges the three, oldest first, each
item with the one decision asked, the recommended action first, and its actions.
A fixed number of queries, whatever the boards' history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.urls import reverse

from ..activity import DEFAULT_NOTIFY, describe, needs_sentence, notifies
from ..models import (
    Board,
    CallState,
    ClientSession,
    Event,
    Reason,
    SessionState,
    Task,
    ToolCall,
)
from ..rules import REPEATS_NO_PROGRESS
from .present import iso

# At most this many items of each kind per read (oldest first); more wait their turn.
ITEMS_SHOWN = 200


@dataclass(frozen=True)
class Action:
    """One thing a person can do about an item: a POST to a task or call action, or a
    GET of the page where the decision needs more than a click (a new owner)."""

    action: str
    label: str
    url: str
    method: str = "POST"
    # The least role it needs (``permissions.ACTIONS``).
    needs: str = "status"

    @property
    def gate(self) -> str:
        """The capability the page checks before it shows the action (``can.*``)."""
        if self.needs in ("approve", "deny"):
            return "approve"
        return "" if self.needs == "view" else "status"

    def as_json(self) -> dict[str, str]:
        return {"action": self.action, "label": self.label, "method": self.method, "url": self.url}


@dataclass
class Item:
    id: str
    board: Board
    reason: str
    question: str
    since: datetime | None
    subject: str
    agent: str
    task: Task | None = None
    call: ToolCall | None = None
    session: ClientSession | None = None
    recommended: Action | None = None
    actions: list[Action] = field(default_factory=list)

    @property
    def all_actions(self) -> list[Action]:
        """The recommended action first, then the others."""
        return ([self.recommended] if self.recommended else []) + self.actions

    def get_reason_display(self) -> str:
        return Reason(self.reason).label

    @property
    def task_id(self) -> int | None:
        return self.task.number if self.task is not None else None

    def allowed(self, may: Any) -> Item:
        """This item with only the actions ``may(action)`` allows the person."""
        recommended = self.recommended if self.recommended and may(self.recommended.needs) else None
        actions = [a for a in self.actions if may(a.needs)]
        return Item(
            **{**self.__dict__, "recommended": recommended, "actions": actions},
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "board": self.board.slug,
            "reason": self.reason,
            "question": self.question,
            "taskId": str(self.task_id) if self.task_id is not None else None,
            "subject": self.subject,
            "agent": self.agent or None,
            "since": iso(self.since),
            "recommended": self.recommended.as_json() if self.recommended else None,
            "actions": [a.as_json() for a in self.actions],
        }


def _task_action(board: Board, number: int, action: str, label: str, needs: str) -> Action:
    url = reverse("task-action", args=[board.slug, number, action])
    return Action(action, label, url, needs=needs)


def _open(board: Board, number: int, label: str, needs: str) -> Action:
    """The task's panel, where a choice needs more than one click (whom to give it to)."""
    return Action("open", label, reverse("task", args=[board.slug, number]), "GET", needs)


def task_item(task: Task, board: Board) -> Item:
    """A task that needs a person, with the decision its reason asks."""
    n = task.number

    def act(action: str, label: str, needs: str | None = None) -> Action:
        return _task_action(board, n, action, label, needs or action)

    reason = task.needs
    agent = task.owner
    recommended: Action | None
    if reason == Reason.APPROVAL:
        agent = task.approval_requested_by
        recommended = None
        actions = [act("approve", "Approve"), act("deny", "Deny")]
    elif reason == Reason.FAILED:
        recommended = act("retry", "Retry")
        actions = [
            act("skip", "Go on without it", "unblock"),
            act("cancel-chain", "Cancel it and what waits on it", "status"),
            _open(board, n, "Retry as another agent's…", "reassign"),
        ]
    elif reason == Reason.STRANDED:
        recommended = act("skip", "Go on without it", "unblock")
        actions = [
            act("reopen", "Reopen it", "status"),
            act("cancel-chain", "Cancel what waits on it", "status"),
        ]
    elif reason == Reason.NOT_STARTED:
        recommended = _open(board, n, "Reassign…", "reassign")
        actions = [act("release", "Release to anyone", "reassign"), act("message", "Message")]
    else:  # no_progress
        recommended = act("message", "Message")
        actions = [
            act("release", "Release to anyone", "reassign"),
            _open(board, n, "Reassign…", "reassign"),
        ]
    return Item(
        id=f"task-{n}",
        board=board,
        reason=reason,
        question=needs_sentence(reason, task.failures, board.max_attempts),
        since=task.needs_since,
        subject=f"#{n} {task.subject}",
        agent=agent,
        task=task,
        recommended=recommended,
        actions=actions,
    )


def call_item(call: ToolCall, board: Board) -> Item:
    def act(action: str, label: str) -> Action:
        return Action(
            action, label, reverse("call-decide", args=[board.slug, call.pk, action]), needs=action
        )

    return Item(
        id=f"call-{call.pk}",
        board=board,
        reason=Reason.APPROVAL,
        question=f"asks to run {call.tool_name}",
        since=call.requested_at,
        subject=f"{call.tool_name}: {call.summary[:200]}",
        agent=call.agent,
        call=call,
        actions=[act("approve", "Approve"), act("deny", "Deny")],
    )


def session_item(session: ClientSession, board: Board) -> Item:
    board_url = reverse("board", args=[board.slug])
    if session.repeats >= REPEATS_NO_PROGRESS:  # it loops, held on a call or not
        message = Action("message", "Message", reverse("message-send", args=[board.slug]))
        return Item(
            id=f"session-{session.pk}",
            board=board,
            reason=Reason.NO_PROGRESS,
            question=(
                f"sent the same tool call {session.repeats} times in a row: "
                f"{session.doing or 'no word on what'}"
            ),
            since=session.last_event_at,
            subject=f"{session.agent}'s session in {session.cwd or '?'}",
            agent=session.agent,
            session=session,
            recommended=message,
            actions=[Action("open", "Open the session", f"{board_url}#roster", "GET", "view")],
        )
    return Item(
        id=f"session-{session.pk}",
        board=board,
        reason=Reason.SESSION_WAITING,
        question=f"waits for you in its session: {session.doing or 'no word on what'}",
        since=session.last_event_at,
        subject=f"{session.agent}'s session in {session.cwd or '?'}",
        agent=session.agent,
        session=session,
        recommended=Action("open", "Open the session", f"{board_url}#roster", "GET", "view"),
    )


def _sessions_needing_person() -> QuerySet[ClientSession]:
    """Client sessions that wait for a person (and not on a held call, an item of its
    own), or that loop on one tool call (``rules.REPEATS_NO_PROGRESS``)."""
    waiting = Q(state=SessionState.WAITING) & ~Q(held__state=CallState.REQUESTED)
    looping = Q(repeats__gte=REPEATS_NO_PROGRESS) & ~Q(state=SessionState.ENDED)
    return ClientSession.objects.filter(waiting | looping)


# Fields an approval's own events carry: the request itself, not a change to decide on.
APPROVAL_BOOKKEEPING = frozenset({"approval", "requestedBy"})
# How many of the agent's latest actions a decision shows.
RECENT_ACTIONS = 5


@dataclass(frozen=True)
class Change:
    field: str
    before: Any
    after: Any


@dataclass
class Decided:
    """What a person reads before deciding on a task (SPEC §12): what changed since the
    version last approved, when one was, and what its agent did last."""

    approved_version: int | None
    changes: list[Change]
    recent: list[tuple[datetime, str]]


def decided(board: Board, task: Task, agent: str) -> Decided:
    """``task``'s changes since its last approval and ``agent``'s last few actions on the
    board, in at most three queries (the log's indexes by task and by actor)."""
    log = Event.objects.filter(board=board)
    approved = (
        log.filter(task_number=task.number, kind="approved").order_by("-seq").only("seq", "data")
    ).first()
    changes: dict[str, Change] = {}
    if approved is not None:
        later = log.filter(task_number=task.number, seq__gt=approved.seq).order_by("seq")
        for data in later.values_list("data", flat=True):
            for name, change in (data.get("fields") or {}).items():
                if not isinstance(change, dict) or name in APPROVAL_BOOKKEEPING:
                    continue
                first = changes.get(name)
                before = first.before if first else change.get("from")
                changes[name] = Change(name, before, change.get("to"))
    recent = (
        [
            (event.created_at, describe(event.kind, event.task_number, event.actor, event.data))
            for event in log.filter(actor=agent).order_by("-seq")[:RECENT_ACTIONS]
        ]
        if agent
        else []
    )
    return Decided(
        approved_version=(approved.data or {}).get("version") if approved else None,
        changes=[c for c in changes.values() if c.before != c.after],
        recent=recent,
    )


def needs_you(boards: Sequence[Board]) -> list[Item]:
    """Every item waiting for a person on these boards, oldest first (three queries)."""
    by_pk = {b.pk: b for b in boards}
    if not by_pk:
        return []
    tasks = (
        Task.objects.filter(board_id__in=by_pk)
        .needing_person()
        .order_by("needs_since", "number")[:ITEMS_SHOWN]
    )
    calls = ToolCall.objects.filter(board_id__in=by_pk, state=CallState.REQUESTED).order_by(
        "requested_at", "pk"
    )[:ITEMS_SHOWN]
    sessions = (
        _sessions_needing_person()
        .filter(board_id__in=by_pk)
        .order_by("last_event_at")[:ITEMS_SHOWN]
    )
    items = [task_item(t, by_pk[t.board_id]) for t in tasks]
    items += [call_item(c, by_pk[c.board_id]) for c in calls]
    items += [session_item(s, by_pk[s.board_id]) for s in sessions]
    # Oldest first; an item without a time (none should be) after the rest.
    items.sort(key=lambda i: (i.since is None, i.since or datetime.min, i.id))
    return items


def to_notify(items: Sequence[Item], choices: dict[int, list[str]]) -> list[Item]:
    """The items whose board's notification choices (``history.notify_choices``; the
    defaults where none) ask for a desktop notification."""
    return [
        item for item in items if notifies(item.reason, choices.get(item.board.pk, DEFAULT_NOTIFY))
    ]


def needs_counts(boards: Sequence[Board]) -> dict[int, int]:
    """How many items wait on each board (the tab count, ``/boards/``), in three queries."""
    counts = dict.fromkeys((b.pk for b in boards), 0)
    for rows in (
        Task.objects.needing_person(),
        ToolCall.objects.filter(state=CallState.REQUESTED),
        _sessions_needing_person(),
    ):
        grouped = rows.filter(board__in=boards).order_by().values_list("board")
        for board_id, n in grouped.annotate(n=Count("pk")):
            counts[board_id] += n
    return counts

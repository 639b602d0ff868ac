"""What waits for a person (SPEC §12), on one board or on every board a person may act on.

Tasks carry their reason (``Task.needs``, kept by the unit of work and the sweeper:
``rules.needs_of``); held tool calls and waiting client sessions are not tasks and
come from their own queries. ``needs_you`` merges the three by urgency (``urgency``:
held calls by their deadline, then approvals, then the rest oldest first), each item
with the one decision asked, the recommended action first, and its actions.
A fixed number of queries, whatever the boards' history.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone

from boards.core.activity import DEFAULT_NOTIFY, describe, needs_sentence, notifies
from boards.core.reasons import REASONS, Act, reason_row
from boards.core.rules import REPEATS_NO_PROGRESS, client_gone
from boards.core.selectors.agents import agents_away
from boards.core.selectors.present import iso
from boards.core.services.stepup import is_step_up
from boards.models import (
    Board,
    CallState,
    ClientSession,
    Event,
    Reason,
    SessionState,
    Task,
    ToolCall,
)

# At most this many items of each kind per read (oldest first); more wait their turn.
ITEMS_SHOWN = 200
# At most this many fields of a held call's input are shown (it keeps at most 50).
CALL_FIELDS_SHOWN = 20


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
        if self.needs in ("settings", "tokens"):  # both the admin's
            return "settings"
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
    # A held call whose client still waits: when the board answers it alone (its fallback).
    deadline: datetime | None = None

    @property
    def key(self) -> str:
        """This item and no later one of the same task or call: the note box's id, so a
        browser never carries a note typed for one decision into the next."""
        stamp = int(self.since.timestamp() * 1000) if self.since else 0
        return f"{self.board.slug}-{self.id}-{stamp}"

    @property
    def all_actions(self) -> list[Action]:
        """The recommended action first, then the others."""
        return ([self.recommended] if self.recommended else []) + self.actions

    @property
    def step_up(self) -> bool:
        """Approving it needs a passkey assertion from a person who has one (SPEC §14)."""
        return self.reason == Reason.APPROVAL and is_step_up(
            self.board, call=self.call, task=self.task
        )

    def get_reason_display(self) -> str:
        return Reason(self.reason).label

    @property
    def call_fields(self) -> list[tuple[str, str]]:
        """A held call's input as kept (``calls._bounded``: long strings shortened), field
        by field, what a person decides on: a Write's content, an Edit's old and new text."""
        if self.call is None or not isinstance(self.call.tool_input, dict):
            return []
        return [
            (str(name), value if isinstance(value, str) else json.dumps(value))
            for name, value in list(self.call.tool_input.items())[:CALL_FIELDS_SHOWN]
        ]

    @property
    def urgency(self) -> tuple[int, float, str]:
        """Where the item stands (smallest first): a held call by its deadline, since the
        board denies it alone then; then approvals; then the rest by how long they wait."""
        if self.deadline is not None:
            return (0, self.deadline.timestamp(), self.id)
        if self.reason == Reason.TAMPERING:  # a session ran what nobody allowed: first
            return (0, self.since.timestamp() if self.since else 0.0, self.id)
        tier = 1 if self.reason == Reason.APPROVAL else 2
        # An item without a time (none should be) after the rest of its tier.
        return (tier, self.since.timestamp() if self.since else float("inf"), self.id)

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
            # A held call's: when the board answers it alone (its rule's fallback).
            "deadline": iso(self.deadline),
            "session": self._session_json(),
        }

    @property
    def source_session(self) -> ClientSession | None:
        """The coding session the item comes from: a waiting session's, a held call's."""
        return self.session or (self.call.session if self.call is not None else None)

    def _session_json(self) -> dict[str, Any] | None:
        """The item's session with what its person last asked of it: what a supervisor
        decides with, away from the page as on it."""
        session = self.source_session
        if session is None:
            return None
        return {
            "id": session.session_id,
            "client": session.client,
            "host": session.host or None,
            "cwd": session.cwd,
            "goal": session.goal or None,
        }


def _task_action(board: Board, number: int, action: str, label: str, needs: str) -> Action:
    url = reverse("task-action", args=[board.slug, number, action])
    return Action(action, label, url, needs=needs)


def _open(board: Board, number: int, label: str, needs: str) -> Action:
    """The task's panel, where a choice needs more than one click (whom to give it to)."""
    return Action("open", label, reverse("task", args=[board.slug, number]), "GET", needs)


def task_item(task: Task, board: Board, owner_state: str = "") -> Item:
    """A task that needs a person, with the decision its reason asks (``REASONS``);
    ``owner_state``: its owner is "silent" or "gone" (it reads no message)."""
    row = reason_row(task.needs)
    away = bool(owner_state)
    recommended = row.recommended_for(away)

    def act(a: Act) -> Action:
        if a.opens_panel:
            return _open(board, task.number, a.label, a.needs)
        return _task_action(board, task.number, a.action, a.label, a.needs)

    return Item(
        id=f"task-{task.number}",
        board=board,
        reason=task.needs,
        question=needs_sentence(task.needs, task.failures, board.max_attempts, owner_state),
        since=task.needs_since,
        subject=f"#{task.number} {task.subject}",
        agent=task.approval_requested_by if task.needs == Reason.APPROVAL else task.owner,
        task=task,
        recommended=act(recommended) if recommended else None,
        actions=[act(a) for a in row.actions_for(away)],
    )


def call_item(call: ToolCall, board: Board, now: datetime | None = None) -> Item:
    if call.state == CallState.RAN:
        return ran_item(call, board)

    def act(action: str, label: str) -> Action:
        return Action(
            action, label, reverse("call-decide", args=[board.slug, call.pk, action]), needs=action
        )

    gone = call_gone(call, board, now)
    if gone:
        # Nobody waits for the answer: approving would report a success nothing obeys.
        question = f"asked to run {call.tool_name}, but {gone}: nobody waits for the answer"
        actions = [act("deny", "Dismiss (deny)")]
    else:
        question = f"asks to run {call.tool_name}"
        actions = [
            act("approve", "Approve"),
            act("deny", "Deny"),
            # A standing approval changes the gate rules: the rules page's role.
            *(
                Action(
                    a,
                    label,
                    reverse("call-decide", args=[board.slug, call.pk, a]),
                    needs="settings",
                )
                for a, label in (
                    ("approve-session", "Approve, and allow in this session from now on"),
                    ("approve-board", "Approve, and allow on this board from now on"),
                )
                if a != "approve-session" or call.session_id is not None
            ),
        ]
    return Item(
        id=f"call-{call.pk}",
        board=board,
        reason=Reason.APPROVAL,
        question=question,
        since=call.requested_at,
        subject=f"{call.tool_name}: {call.summary[:200]}",
        agent=call.agent,
        call=call,
        deadline=None if gone else call.deadline,
        actions=actions,
    )


def ran_item(call: ToolCall, board: Board) -> Item:
    """A call that ran without the board's verdict (its hook was stopped): the person
    clears it once they have looked, or revokes the token (``REASONS``' row)."""
    row = reason_row(Reason.TAMPERING)

    def act(a: Act) -> Action:
        url = reverse("call-decide", args=[board.slug, call.pk, a.action])
        return Action(a.action, a.label, url, needs=a.needs)

    return Item(
        id=f"call-{call.pk}",
        board=board,
        reason=Reason.TAMPERING,
        question=f"ran {call.tool_name} `{shown_call(call)}` {row.question}",
        since=call.ran_at or call.requested_at,
        subject=f"{call.tool_name}: {call.summary[:200]}",
        agent=call.agent,
        call=call,
        recommended=act(row.recommended) if row.recommended else None,
        actions=[act(a) for a in row.actions],
    )


def shown_call(call: ToolCall) -> str:
    """A call's command, path or URL as a sentence quotes it: one line, shortened."""
    text = " ".join(call.summary.split())
    return text if len(text) <= 120 else text[:119] + "…"


def call_gone(call: ToolCall, board: Board, now: datetime | None = None) -> str:
    """Why nobody waits for ``call``'s answer any more ("its session ended"…), or ""."""
    session = call.session
    return client_gone(
        session_state=session.state if session else None,
        last_event_at=session.last_event_at if session else None,
        deadline=call.deadline,
        silent_after=board.silent_after_seconds,
        now=now or timezone.now(),
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


def per_board(rows: QuerySet[Any], limit: int, *order: str) -> QuerySet[Any]:
    """At most ``limit`` rows of each board, in ``order``: one board's flood never hides
    or starves another's (a window over the board, filtered in the same query)."""
    rank = Window(RowNumber(), partition_by=[F("board_id")], order_by=[F(o).asc() for o in order])
    return rows.annotate(rank_in_board=rank).filter(rank_in_board__lte=limit)


def _per_board(rows: QuerySet[Any], *order: str) -> QuerySet[Any]:
    return per_board(rows, ITEMS_SHOWN, *order)


def _kinds(
    board_ids: Collection[int], deciding: Collection[int] | None
) -> tuple[QuerySet[Task], QuerySet[ToolCall], QuerySet[ClientSession]]:
    """The three kinds of item on these boards; approvals (gated tasks, held calls) only
    on the boards in ``deciding`` (all of them when None)."""
    tasks = Task.objects.filter(board_id__in=board_ids).needing_person()
    # Held calls, and calls that ran without the board's verdict until a person clears
    # them (both are the approvers' to decide).
    calls = ToolCall.objects.select_related("session", "gate_rule").filter(
        Q(state=CallState.REQUESTED) | Q(state=CallState.RAN, cleared_at__isnull=True),
        board_id__in=board_ids,
    )
    if deciding is not None:
        tasks = tasks.exclude(Q(needs=Reason.APPROVAL) & ~Q(board_id__in=deciding))
        calls = calls.filter(board_id__in=deciding)
    sessions = _sessions_needing_person().filter(board_id__in=board_ids)
    return tasks, calls, sessions


def needs_you(boards: Sequence[Board], *, deciding: Collection[int] | None = None) -> list[Item]:
    """Every item waiting for a person on these boards, most urgent first (``Item.urgency``:
    held calls by deadline, approvals, the rest oldest first), at most
    ``ITEMS_SHOWN`` of each kind per board (three queries); approvals only on the boards
    in ``deciding`` (board ids; all boards when None)."""
    by_pk = {b.pk: b for b in boards}
    if not by_pk:
        return []
    tasks, calls, sessions = _kinds(by_pk, deciding)
    now = timezone.now()
    task_rows = list(_per_board(tasks, "needs_since", "number"))
    # Whose owner reads no message changes what is recommended (``ReasonRow.owner_away``).
    owners = {t.owner for t in task_rows if t.owner and REASONS[t.needs].question_owner_away}
    away = agents_away(list(by_pk.values()), owners, now=now) if owners else {}
    items = [
        task_item(t, by_pk[t.board_id], away.get((t.board_id, t.owner), "")) for t in task_rows
    ]
    items += [call_item(c, by_pk[c.board_id], now) for c in _per_board(calls, "requested_at", "pk")]
    items += [
        session_item(s, by_pk[s.board_id]) for s in _per_board(sessions, "last_event_at", "pk")
    ]
    items.sort(key=lambda i: i.urgency)
    return items


def to_notify(items: Sequence[Item], choices: dict[int, list[str]]) -> list[Item]:
    """The items whose board's notification choices (``history.notify_choices``; the
    defaults where none) ask for a desktop notification."""
    return [
        item for item in items if notifies(item.reason, choices.get(item.board.pk, DEFAULT_NOTIFY))
    ]


def needs_counts(
    boards: Sequence[Board], *, deciding: Collection[int] | None = None
) -> dict[int, int]:
    """How many items wait on each board, exactly (the tab count, ``/boards/``, the
    inbox's count), in three queries; approvals only on the boards in ``deciding``."""
    counts = dict.fromkeys((b.pk for b in boards), 0)
    if not counts:
        return counts
    for rows in _kinds(counts, deciding):
        grouped = rows.order_by().values_list("board")
        for board_id, n in grouped.annotate(n=Count("pk")):
            counts[board_id] += n
    return counts

"""Reads shared by the tool API, the board views, the consumers and the services' answers.

Whole-board reads cost a constant number of queries: the tasks in one query,
the dependency edges in another, everything derived in Python.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import (
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from . import clients
from .activity import DEFAULT_NOTIFY, STATUS_NAMES, describe, signal_of
from .errors import InvalidInput, NotFound
from .models import (
    TERMINAL_STATUSES,
    Agent,
    AgentState,
    ApprovalState,
    Attempt,
    Board,
    Dependency,
    Event,
    Membership,
    Message,
    Status,
    Subscription,
    Task,
    Webhook,
    agent_state,
)
from .numbers import id_number, spelled

COLUMNS = ("pending", "in_progress", "blocked", "completed")
# A blocker that ended like this will not complete by itself: its dependents are stuck.
DEAD_ENDS = frozenset({Status.FAILED, Status.CANCELLED})
COUNT_KEYS = (
    "pending",
    "in_progress",
    "blocked",
    "completed",
    "failed",
    "cancelled",
    "ready",
    "stuck",
)


def parse_task_id(value: str | int, *, field: str = "taskId") -> int:
    """``"3"``, ``"#3"`` or ``3`` → 3; anything else is unknown (digits of another script
    are refused, naming ``field``: ``numbers``)."""
    number = id_number(value, field=field)
    if number is None:
        raise NotFound(f"Task #{str(value)[:40]} not found", code="task_not_found")
    return number


def board_get(slug: str) -> Board:
    board = Board.objects.filter(slug=slug).first()
    if board is None:
        raise NotFound(f"Board {slug[:64]!r} not found", code="board_not_found")
    return board


@dataclass
class TaskView:
    """A task with its relations resolved to public numbers."""

    task: Task
    blocked_by: list[int]
    open_blockers: list[int]
    blocks: list[int]
    children: list[int] = field(default_factory=list)
    depth: int | None = None
    # Blockers that failed or were cancelled: this task cannot start until a person acts.
    stuck_on: list[int] = field(default_factory=list)
    # The status each blocker in ``stuck_on`` ended with ("failed" / "cancelled").
    dead_ends: dict[int, str] = field(default_factory=dict)
    max_attempts: int = 3

    @property
    def number(self) -> int:
        return self.task.number

    @property
    def stuck(self) -> bool:
        return self.task.status not in TERMINAL_STATUSES and bool(self.stuck_on)

    @property
    def needs_attention(self) -> str | None:
        """Why a person must look (it failed or timed out maxAttempts times), or None."""
        task = self.task
        if task.failures >= self.max_attempts and task.status in (Status.PENDING, Status.FAILED):
            return (
                f"failed or timed out {task.failures} time(s) (the board allows "
                f"{self.max_attempts}); retry, reassign or cancel it"
            )
        return None

    @property
    def blocked(self) -> bool:
        return self.task.status not in TERMINAL_STATUSES and bool(self.open_blockers)

    @property
    def column(self) -> str:
        status = self.task.status
        if status == Status.PENDING:
            return "blocked" if self.blocked else "pending"
        if status == Status.IN_PROGRESS:
            return "in_progress"
        return "completed"

    @property
    def sort_key(self) -> int:
        """Where the card stands in its column: open columns by number; Completed the most
        recently finished first (the page sorts cards by this, pushed ones too)."""
        if self.column == "completed" and self.task.completed_at is not None:
            return -int(self.task.completed_at.timestamp() * 1000)
        return self.task.number

    @property
    def ready(self) -> bool:
        return (
            self.task.status == Status.PENDING
            and not self.blocked
            and self.task.approval_state != ApprovalState.REQUESTED
            and self.task.failures < self.max_attempts
        )


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def approval_to_dict(task: Task) -> dict:
    return {
        "required": task.approval_required,
        "state": task.approval_state,
        "requestedBy": task.approval_requested_by or None,
        "requestedAt": iso(task.approval_requested_at),
        "reason": task.approval_reason or None,
        "decidedBy": task.approval_decided_by or None,
        "decidedAt": iso(task.approval_decided_at),
        "note": task.approval_note or None,
        "version": task.approval_version,
    }


APPROVAL_EVENTS = ("approval_requested", "approved", "denied", "approval_cleared")


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


def task_to_dict(view: TaskView, *, with_children: bool = False) -> dict:
    """The one public shape of a task, used by every answer of the tool API."""
    task = view.task
    data = {
        "id": str(task.number),
        "subject": task.subject,
        "description": task.description,
        "activeForm": task.active_form,
        "status": task.status,
        "blocked": view.blocked,
        "owner": task.owner,
        "createdBy": task.created_by,
        "blockedBy": [str(n) for n in view.blocked_by],
        "blocks": [str(n) for n in view.blocks],
        "parentId": str(view_parent_number(task)) if task.parent_id else None,
        "metadata": task.metadata,
        "prompt": task.prompt,
        "result": task.result,
        "notes": task.notes,
        "approval": approval_to_dict(task),
        "priority": task.get_priority_display(),
        "stuck": view.stuck,
        "stuckOn": [str(n) for n in view.stuck_on] if view.stuck else [],
        "attempt": task.attempts,
        "lease": {"expiresAt": iso(task.lease_expires_at)} if task.lease_expires_at else None,
        "needsAttention": view.needs_attention is not None,
        "attention": view.needs_attention,
        "usage": usage_dict(task),
        "version": task.version,
        "createdAt": iso(task.created_at),
        "updatedAt": iso(task.updated_at),
        "completedAt": iso(task.completed_at),
    }
    if with_children:
        data["children"] = [str(n) for n in view.children]
    if view.depth is not None:
        data["depth"] = view.depth
    return data


def usage_dict(row: Task | Attempt) -> dict[str, Any]:
    """Tokens and cost reported on a task or an attempt, summed."""
    return {
        "inputTokens": row.input_tokens,
        "outputTokens": row.output_tokens,
        "costUsd": float(row.cost_usd),
    }


def view_parent_number(task: Task) -> int | None:
    # Annotated (task_views) or loaded (select_related, the snapshot): no query here.
    if task.parent_id is None:
        return None
    annotated = getattr(task, "parent_number", None)
    if annotated is not None:
        return int(annotated)
    return task.parent.number if task.parent is not None else None


@dataclass
class BoardSnapshot:
    """Every task of a board with its relations, read in two queries."""

    board: Board
    views: dict[int, TaskView]

    def ordered(self) -> list[TaskView]:
        return [self.views[n] for n in sorted(self.views)]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(COUNT_KEYS, 0)
        for view in self.views.values():
            status = view.task.status
            if status == Status.PENDING:
                counts["blocked" if view.blocked else "pending"] += 1
            else:
                counts[status] += 1
            if view.ready:
                counts["ready"] += 1
            if view.stuck:
                counts["stuck"] += 1
        return counts


def board_snapshot(board: Board) -> BoardSnapshot:
    tasks = list(Task.objects.filter(board=board).order_by("number"))
    by_pk = {task.pk: task for task in tasks}
    edges = Dependency.objects.filter(board=board).values_list("task_id", "blocker_id")
    blocked_by: dict[int, list[int]] = {}
    blocks: dict[int, list[int]] = {}
    for task_pk, blocker_pk in edges:
        blocked_by.setdefault(task_pk, []).append(blocker_pk)
        blocks.setdefault(blocker_pk, []).append(task_pk)
    children: dict[int, list[int]] = {}
    for task in tasks:
        if task.parent_id:
            parent = by_pk.get(task.parent_id)
            # Attach the parent object so task_to_dict reads its number without a query.
            task.parent = parent  # type: ignore[assignment]
            children.setdefault(task.parent_id, []).append(task.number)
    views: dict[int, TaskView] = {}
    for task in tasks:
        blockers = [by_pk[pk] for pk in blocked_by.get(task.pk, ()) if pk in by_pk]
        views[task.number] = TaskView(
            task=task,
            blocked_by=sorted(b.number for b in blockers),
            open_blockers=sorted(b.number for b in blockers if b.status != Status.COMPLETED),
            blocks=sorted(by_pk[pk].number for pk in blocks.get(task.pk, ()) if pk in by_pk),
            children=sorted(children.get(task.pk, ())),
            stuck_on=sorted(b.number for b in blockers if b.status in DEAD_ENDS),
            dead_ends={b.number: b.status for b in blockers if b.status in DEAD_ENDS},
            max_attempts=board.max_attempts,
        )
    return BoardSnapshot(board=board, views=views)


def task_views(
    board: Board, numbers: Iterable[int], *, with_children: bool = True
) -> dict[int, TaskView]:
    """Views of a few tasks (the ones a write touched), in two or three queries."""
    numbers = set(numbers)
    if not numbers:
        return {}
    # The parent's number, not the parent: a whole second task per row costs as much again.
    rows = Task.objects.filter(board=board, number__in=numbers).order_by()
    tasks = list(rows.annotate(parent_number=F("parent__number")))
    pks = [task.pk for task in tasks]
    edges = list(
        Dependency.objects.filter(Q(task_id__in=pks) | Q(blocker_id__in=pks)).values_list(
            "task_id", "task__number", "blocker_id", "blocker__number", "blocker__status"
        )
    )
    child_rows = (
        Task.objects.filter(parent_id__in=pks).values_list("parent_id", "number")
        if with_children
        else ()
    )
    children: dict[int, list[int]] = {}
    for parent_pk, number in child_rows:
        children.setdefault(parent_pk, []).append(number)
    # Grouped once: a page of a column is hundreds of tasks and as many edges.
    blockers_of: dict[int, list[tuple[int, str]]] = {}
    blocks_of: dict[int, list[int]] = {}
    for task_pk, task_number, blocker_pk, blocker_number, blocker_status in edges:
        blockers_of.setdefault(task_pk, []).append((blocker_number, blocker_status))
        blocks_of.setdefault(blocker_pk, []).append(task_number)
    views = {}
    for task in tasks:
        blockers = blockers_of.get(task.pk, [])
        views[task.number] = TaskView(
            task=task,
            blocked_by=sorted(bn for bn, _ in blockers),
            open_blockers=sorted(bn for bn, bs in blockers if bs != Status.COMPLETED),
            blocks=sorted(blocks_of.get(task.pk, [])),
            children=sorted(children.get(task.pk, ())),
            stuck_on=sorted(bn for bn, bs in blockers if bs in DEAD_ENDS),
            dead_ends={bn: bs for bn, bs in blockers if bs in DEAD_ENDS},
            max_attempts=board.max_attempts,
        )
    return views


def task_view(board: Board, number: int) -> TaskView:
    view = task_views(board, [number]).get(number)
    if view is None:
        raise NotFound(f"Task #{number} not found", code="task_not_found")
    return view


def derive_flags(pks: Iterable[int]) -> list[tuple[int, int, bool, bool, bool, bool]]:
    """Blocked and stuck as the blockers say now, for the given tasks, in two queries.

    Rows ``(pk, number, stored blocked, blocked, stuck, changed)``; a task that no
    longer exists is left out.
    """
    pks = set(pks)
    rows = (
        Task.objects.filter(pk__in=pks)
        .order_by()
        .values_list("pk", "number", "status", "blocked", "stuck")
    )
    blocker_statuses: dict[int, list[str]] = {}
    for task_pk, status in (
        Dependency.objects.filter(task_id__in=pks)
        .order_by()
        .values_list("task_id", "blocker__status")
    ):
        blocker_statuses.setdefault(task_pk, []).append(status)
    derived = []
    for pk, number, status, was_blocked, was_stuck in rows:
        finished = status in TERMINAL_STATUSES
        statuses = blocker_statuses.get(pk, ())
        blocked = not finished and any(s != Status.COMPLETED for s in statuses)
        stuck = not finished and any(s in DEAD_ENDS for s in statuses)
        changed = (blocked, stuck) != (was_blocked, was_stuck)
        derived.append((pk, number, was_blocked, blocked, stuck, changed))
    return sorted(derived, key=lambda row: row[1])


def cycle_through(edges: Iterable[tuple[int, int]]) -> list[int] | None:
    """A dependency cycle that one of the new ``edges`` (task pk, blocker pk) closes, as
    task numbers from its lowest around to it again (``[3, 5, 3]``); None when none does.

    Searches upstream from the new edges' blockers only: what waits on nothing new
    cannot have gained a cycle. One query per level of that search.
    """
    edges = list(edges)
    waits_on: dict[int, set[int]] = {}
    frontier = {blocker for _, blocker in edges}
    seen: set[int] = set()
    while frontier:
        seen |= frontier
        rows = Dependency.objects.filter(task_id__in=frontier).order_by()
        nxt: set[int] = set()
        for task_pk, blocker_pk in rows.values_list("task_id", "blocker_id"):
            waits_on.setdefault(task_pk, set()).add(blocker_pk)
            nxt.add(blocker_pk)
        frontier = nxt - seen
    for task_pk, blocker_pk in sorted(edges):
        waits_on.setdefault(task_pk, set()).add(blocker_pk)
    for task_pk, blocker_pk in sorted(edges):
        path = _path(waits_on, blocker_pk, task_pk)
        if path is not None:
            cycle = [task_pk, *path]  # task → blocker → … → task
            numbers = dict(Task.objects.filter(pk__in=cycle).values_list("pk", "number"))
            ring = [numbers[pk] for pk in cycle[:-1]]
            start = ring.index(min(ring))
            ring = ring[start:] + ring[:start]
            return [*ring, ring[0]]
    return None


def _path(graph: dict[int, set[int]], source: int, target: int) -> list[int] | None:
    """A path source → … → target along ``graph``'s edges (breadth first), or None."""
    parents: dict[int, int | None] = {source: None}
    queue = [source]
    for node in queue:
        if node == target:
            path = [node]
            while parents[path[-1]] is not None:
                path.append(parents[path[-1]])  # type: ignore[arg-type]
            return path[::-1]
        for nxt in sorted(graph.get(node, ())):
            if nxt not in parents:
                parents[nxt] = node
                queue.append(nxt)
    return None


VIEWS = {
    "all": lambda v: True,
    "open": lambda v: v.task.status in (Status.PENDING, Status.IN_PROGRESS),
    "ready": lambda v: v.ready,
    "blocked": lambda v: v.blocked,
    "stuck": lambda v: v.stuck,
    "in_progress": lambda v: v.task.status == Status.IN_PROGRESS,
    "done": lambda v: v.task.status in TERMINAL_STATUSES,
}


def task_list(
    board: Board,
    *,
    view: str = "all",
    status: str | None = None,
    owner: str | None = None,
    blocked: bool | None = None,
    parent_id: int | None = None,
    tree: bool = False,
) -> tuple[list[TaskView], BoardSnapshot]:
    snapshot = board_snapshot(board)
    selected = [
        v
        for v in snapshot.ordered()
        if VIEWS[view](v)
        and (status is None or v.task.status == status)
        and (owner is None or v.task.owner == owner)
        and (blocked is None or v.blocked == blocked)
        and (parent_id is None or view_parent_number(v.task) == parent_id)
    ]
    if tree:
        selected = tree_order(selected)
    return selected, snapshot


LIST_LIMIT_DEFAULT = 100


def _view_filter(view: str, board: Board) -> Q:
    pending = Q(status=Status.PENDING)
    # The unfinished statuses named (not "not terminal"), so an index on status finds them.
    unfinished = (Status.PENDING, Status.IN_PROGRESS)
    return {
        "all": Q(),
        "open": Q(status__in=unfinished),
        "ready": pending
        & Q(blocked=False, failures__lt=board.max_attempts)
        & ~Q(approval_state=ApprovalState.REQUESTED),
        "blocked": Q(blocked=True, status__in=unfinished),
        "stuck": Q(stuck=True, status__in=unfinished),
        "in_progress": Q(status=Status.IN_PROGRESS),
        "done": Q(status__in=TERMINAL_STATUSES),
    }[view]


def encode_cursor(number: int) -> str:
    return base64.urlsafe_b64encode(f"after:{number}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The number a cursor continues after; an unreadable cursor is the caller's mistake."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = raw.partition(":")
        after = spelled(number)
        if kind != "after" or after is None:
            raise ValueError(raw)
        return after
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            "cursor: not a cursor this server gave out; start again without one",
            field="cursor",
        ) from exc


# The task number as an expression: the same order, but no index can provide it.
_UNINDEXED_NUMBER = ExpressionWrapper(F("number") + 0, output_field=IntegerField())


@dataclass
class TaskPage:
    views: list[TaskView]
    total: int
    next_cursor: str | None


def task_page(
    board: Board,
    *,
    view: str = "all",
    status: str | None = None,
    owner: str | None = None,
    blocked: bool | None = None,
    parent_id: int | None = None,
    tree: bool = False,
    limit: int = LIST_LIMIT_DEFAULT,
    cursor: str | None = None,
) -> TaskPage:
    """One page of the board's tasks in number order, filtered in SQL.

    The cost is the page's, not the board's: the filters use the stored status,
    blocked and stuck columns, and the page continues after the cursor's number,
    so tasks created while an agent pages arrive on a later page, never twice.
    """
    rows = Task.objects.filter(board=board).filter(_view_filter(view, board)).order_by()
    if status is not None:
        rows = rows.filter(status=status)
    if owner is not None:
        rows = rows.filter(owner=owner)
    if blocked is not None:
        rows = (
            rows.filter(blocked=blocked)
            if blocked
            else rows.filter(Q(blocked=False) | Q(status__in=TERMINAL_STATUSES))
        )
    if parent_id is not None:
        rows = rows.filter(parent__number=parent_id, parent__board=board)
    total = rows.count()
    after = decode_cursor(cursor) if cursor else 0
    # Number order, but by which index: one status (a view of one status, or status=) is
    # served in order by (board, status, number). Other filters that keep few tasks (the
    # open views, an owner, a parent) must find them by their own index and sort the few:
    # ordered by the bare column, SQLite's planner walks (board, number) through the whole
    # history instead. All tasks, or all finished ones, are walked in number order.
    one_status = status is not None or view in ("in_progress", "ready")
    selective = view in ("open", "blocked", "stuck") or owner is not None or parent_id is not None
    order: Any = "number" if one_status or not selective else _UNINDEXED_NUMBER
    numbers = list(
        rows.filter(number__gt=after).order_by(order).values_list("number", flat=True)[: limit + 1]
    )
    more = len(numbers) > limit
    numbers = numbers[:limit]
    found = task_views(board, numbers, with_children=False)
    views = [found[n] for n in numbers if n in found]
    if tree:
        views = tree_order(views)
    next_cursor = encode_cursor(numbers[-1]) if more and numbers else None
    return TaskPage(views, total, next_cursor)


# How many cards a column shows at first (and per "show more"): Completed shows the most
# recently finished, the open columns the lowest numbers.
COLUMN_PAGE = {"pending": 200, "in_progress": 200, "blocked": 200, "completed": 50}


def _column_rows(board: Board, key: str) -> QuerySet[Task]:
    rows = Task.objects.filter(board=board)
    if key == "pending":
        return rows.filter(status=Status.PENDING, blocked=False).order_by("number")
    if key == "blocked":
        return rows.filter(status=Status.PENDING, blocked=True).order_by("number")
    if key == "in_progress":
        return rows.filter(status=Status.IN_PROGRESS).order_by("number")
    return rows.filter(status__in=TERMINAL_STATUSES).order_by("-completed_at", "-number")


def column_page(
    board: Board, key: str, cursor: str | None = None
) -> tuple[list[TaskView], str | None]:
    """A column's next cards after ``cursor`` (the last card shown), and the cursor for more."""
    if key not in COLUMN_PAGE:
        raise NotFound(f"No column {key[:20]!r}", code="column_not_found")
    limit = COLUMN_PAGE[key]
    rows = _column_rows(board, key)
    if cursor:
        after = decode_cursor(cursor)
        last = Task.objects.filter(board=board, number=after).first()
        if key == "completed" and last is not None and last.completed_at is not None:
            rows = rows.filter(
                Q(completed_at__lt=last.completed_at)
                | Q(completed_at=last.completed_at, number__lt=after)
            )
        elif key != "completed":
            rows = rows.filter(number__gt=after)
        else:
            rows = rows.none()
    numbers = list(rows.values_list("number", flat=True)[: limit + 1])
    more = len(numbers) > limit
    numbers = numbers[:limit]
    found = task_views(board, numbers, with_children=False)
    views = [found[n] for n in numbers if n in found]
    return views, (encode_cursor(numbers[-1]) if more and numbers else None)


def task_summary(view: TaskView) -> dict[str, Any]:
    """A task as lists show it: what an agent needs to choose work, not its full text."""
    task = view.task
    data: dict[str, Any] = {
        "id": str(task.number),
        "subject": task.subject,
        "status": task.status,
        "blocked": view.blocked,
        "owner": task.owner,
        "blockedBy": [str(n) for n in view.open_blockers] if view.blocked else [],
    }
    if task.status == Status.IN_PROGRESS and task.active_form:
        data["activeForm"] = task.active_form
    if task.parent_id:
        data["parentId"] = str(view_parent_number(task))
    if task.approval_required or task.approval_state != ApprovalState.NONE:
        data["approval"] = task.approval_state
    if task.priority != 2:
        data["priority"] = task.get_priority_display()
    if view.stuck:
        data["stuckOn"] = [str(n) for n in view.stuck_on]
    if view.needs_attention:
        data["needsAttention"] = True
    if view.depth is not None:
        data["depth"] = view.depth
    return data


def tree_order(views: list[TaskView]) -> list[TaskView]:
    """Depth-first by parent, each view's ``depth`` set; roots are those whose parent is not listed."""
    present = {v.number: v for v in views}
    kids: dict[int, list[TaskView]] = {}
    roots = []
    for v in views:
        parent = view_parent_number(v.task)
        if parent is not None and parent in present:
            kids.setdefault(parent, []).append(v)
        else:
            roots.append(v)
    ordered: list[TaskView] = []
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        v, depth = stack.pop()
        v.depth = depth
        ordered.append(v)
        stack.extend((child, depth + 1) for child in reversed(kids.get(v.number, [])))
    return ordered


STATUS_MARKS: dict[str, str] = {
    Status.PENDING: " ",
    Status.IN_PROGRESS: ">",
    Status.COMPLETED: "x",
    Status.FAILED: "!",
    Status.CANCELLED: "-",
}


def tasks_as_text(views: list[TaskView]) -> str:
    """Seed 004's compact rendering: ``#2. [ ] Write tests  blocked by: #1``."""
    lines = []
    for v in views:
        indent = "  " * (v.depth or 0)
        line = f"{indent}#{v.number}. [{STATUS_MARKS[v.task.status]}] {v.task.subject}"
        if v.task.owner:
            line += f"  @{v.task.owner}"
        if v.blocked:
            line += "  blocked by: " + ", ".join(f"#{n}" for n in v.open_blockers)
        elif v.task.status in (Status.FAILED, Status.CANCELLED):
            line += f"  ({v.task.status})"
        if v.task.approval_state == ApprovalState.REQUESTED:
            line += "  (awaiting approval)"
        lines.append(line)
    return "\n".join(lines)


def _task_events(board: Board, number: int) -> QuerySet[Event]:
    """The task's events since the board was last reset (numbers restart after a reset)."""
    last_reset = (
        Event.objects.filter(board=board, kind="reset")
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
        or 0
    )
    return Event.objects.filter(board=board, task_number=number, seq__gt=last_reset)


def task_history(board: Board, number: int, *, limit: int = 200) -> list[Event]:
    """The task's latest events, newest first."""
    return list(_task_events(board, number).order_by("-seq")[:limit])


def unread_count(board: Board, agent: str) -> int:
    return Message.objects.filter(board=board, recipient=agent, read_at__isnull=True).count()


def board_counts(board: Board) -> dict[str, int]:
    """The counts of TaskList and the header, whatever the board's history: open tasks
    grouped from their stored flags, finished ones from the board's counters."""
    counts = dict.fromkeys(COUNT_KEYS, 0)
    rows = (
        Task.objects.filter(board=board, status__in=(Status.PENDING, Status.IN_PROGRESS))
        .order_by()
        .values_list("status", "blocked", "stuck")
        .annotate(n=Count("pk"))
    )
    for status, blocked, stuck, n in rows:
        if status == Status.PENDING:
            counts["blocked" if blocked else "pending"] += n
        else:
            counts[status] += n
        if stuck:
            counts["stuck"] += n
    finished = Board.objects.filter(pk=board.pk).values_list(
        "completed_count", "failed_count", "cancelled_count"
    )
    counts["completed"], counts["failed"], counts["cancelled"] = finished.get()
    counts["ready"] = (
        Task.objects.filter(board=board).filter(_view_filter("ready", board)).order_by().count()
    )
    return counts


def attention_requests(board: Board) -> list[Task]:
    """Tasks that failed or timed out the board's maxAttempts times: a person decides."""
    return list(
        Task.objects.filter(
            board=board,
            status__in=(Status.PENDING, Status.FAILED),
            failures__gte=board.max_attempts,
        ).order_by("updated_at", "number")[:50]
    )


def approval_requests(board: Board) -> list[Task]:
    """Tasks waiting for a person's decision, oldest request first."""
    return list(
        Task.objects.filter(board=board, approval_state=ApprovalState.REQUESTED)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("approval_requested_at", "number")
    )


def roster(board: Board) -> list[dict[str, Any]]:
    """Every agent seen on the board: what it owns, its state (``models.agent_state``:
    working, idle, silent, gone) and its latest client session, if any (two queries)."""
    now = timezone.now()
    sessions = clients.live_sessions(board)

    def owned(*statuses: str) -> Coalesce:
        counted = (
            Task.objects.filter(board=board, owner=OuterRef("name"), status__in=statuses)
            .order_by()
            .values("owner")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(counted), 0)

    agents = (
        Agent.objects.filter(board=board)
        .order_by("name")
        .annotate(
            open_count=owned(Status.PENDING, Status.IN_PROGRESS),
            in_progress_count=owned(Status.IN_PROGRESS),
        )
    )
    rows = []
    for agent in agents:
        session = sessions.get(agent.name)
        state = agent_state(
            last_seen=agent.last_seen,
            holding=agent.in_progress_count,
            session_state=session.state if session else None,
            silent_after=board.silent_after_seconds,
            now=now,
        )
        rows.append(
            {
                "name": agent.name,
                "last_seen": agent.last_seen,
                "owned": agent.open_count,
                "in_progress": agent.in_progress_count,
                "state": state,
                # Holding work while silent or gone: its cards say so.
                "stale": bool(agent.in_progress_count)
                and state in (AgentState.SILENT, AgentState.GONE),
                "session": session,
            }
        )
    return rows


def board_progress(boards: Iterable[Board]) -> dict[int, dict[str, int]]:
    """Tasks in all and completed, per board: open tasks grouped, finished ones counted."""
    boards = list(boards)
    open_counts = dict(
        Task.objects.filter(board__in=boards, status__in=(Status.PENDING, Status.IN_PROGRESS))
        .values("board")
        .annotate(n=Count("id"))
        .order_by()
        .values_list("board", "n")
    )
    return {
        b.pk: {
            "total": open_counts.get(b.pk, 0)
            + b.completed_count
            + b.failed_count
            + b.cancelled_count,
            "done": b.completed_count,
        }
        for b in boards
    }


def attempts(task: Task) -> list[dict[str, Any]]:
    """Every attempt at the task, oldest first, as TaskGet answers them."""
    return [
        {
            "n": a.n,
            "agent": a.agent or None,
            "startedAt": iso(a.started_at),
            "endedAt": iso(a.ended_at),
            "outcome": a.outcome or None,
            "result": a.result or None,
            "notes": a.notes or None,
            "usage": usage_dict(a),
        }
        for a in Attempt.objects.filter(task=task).order_by("n")
    ]


# -- the activity feed --------------------------------------------------------------------

ACTIVITY_PAGE = 50
ACTIVITY_MAX = 500


def activity_page(
    board: Board,
    *,
    actor: str = "",
    kind: str = "",
    task: int | None = None,
    before: int | None = None,
    after: int | None = None,
    limit: int = ACTIVITY_PAGE,
) -> list[Event]:
    """Events of the board, newest first (``after``: oldest first, the ones after that seq).

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
ACTIVITY_KINDS = (
    "created",
    "claimed",
    "status",
    "updated",
    "approval_requested",
    "approved",
    "denied",
    "reclaimed",
    "needs_attention",
    "reassigned",
    "blocked",
    "unblocked",
    "deleted",
    "message",
    "member",
    "settings",
    "webhook",
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


# -- "why isn't this ready?" ----------------------------------------------------------------

READINESS_MAX_TASKS = 500


def _status_words(status: str, owner: str) -> str:
    return f"{STATUS_NAMES.get(status, status).lower()}, {owner or 'unowned'}"


def readiness(board: Board, task: Task) -> dict[str, Any]:
    """Why ``task`` is not ready: its unfinished blockers, down to the ones that can move
    now, and the reason in one sentence.

    One query per level of the chain (each reads the blockers of the level before),
    at most ``READINESS_MAX_TASKS`` tasks.
    """
    if task.status in TERMINAL_STATUSES:
        reason = f"it is {STATUS_NAMES[task.status].lower()}"
        return {"ready": False, "reason": reason, "chain": [], "movable": []}
    # blocker edges of every unfinished task reached: number -> [(number, status, owner)]
    waits: dict[int, list[tuple[int, str, str]]] = {}
    info: dict[int, tuple[str, str]] = {task.number: (task.status, task.owner)}
    level = [task.pk]
    pk_of = {task.number: task.pk}
    while level and len(info) < READINESS_MAX_TASKS:
        rows = list(
            Dependency.objects.filter(task_id__in=level)
            .exclude(blocker__status=Status.COMPLETED)
            .values_list(
                "task__number", "blocker_id", "blocker__number", "blocker__status", "blocker__owner"
            )
        )
        level = []
        for number, blocker_pk, blocker, status, owner in rows:
            waits.setdefault(number, []).append((blocker, status, owner))
            if blocker not in info:
                info[blocker] = (status, owner)
                pk_of[blocker] = blocker_pk
                if status not in TERMINAL_STATUSES:
                    level.append(blocker_pk)
    chain = [
        {
            "id": str(number),
            "status": status,
            "owner": owner,
            "waitsOn": [str(b) for b, _, _ in sorted(waits.get(number, []))],
            "canMove": status not in TERMINAL_STATUSES and not waits.get(number),
        }
        for number, (status, owner) in sorted(info.items())
        if number != task.number
    ]
    direct = sorted(waits.get(task.number, []))
    if not direct:
        if task.status == Status.IN_PROGRESS:
            reason = f"it is in progress with {task.owner or 'nobody'}"
        else:
            reason = "nothing blocks it: it can be claimed now"
        return {
            "ready": task.status == Status.PENDING,
            "reason": reason,
            "chain": [],
            "movable": [],
        }

    def explain(number: int, seen: frozenset[int]) -> str:
        status, owner = info[number]
        if status in TERMINAL_STATUSES:
            return f"#{number} ({STATUS_NAMES[status].lower()}: it will not complete by itself)"
        below = sorted(waits.get(number, []))
        head = f"#{number} ({_status_words(status, owner)})"
        if not below:
            return head + ", which waits on nothing"
        if number in seen or len(seen) > 8:
            return head + ", which waits on more"
        first = below[0][0]
        rest = f" and {len(below) - 1} more" if len(below) > 1 else ""
        return head + f", which waits on {explain(first, seen | {number})}{rest}"

    parts = [explain(number, frozenset({task.number})) for number, _, _ in direct]
    return {
        "ready": False,
        "reason": "waiting on " + "; and on ".join(parts),
        "chain": chain,
        "movable": [c["id"] for c in chain if c["canMove"]],
    }


# -- the dependency graph ------------------------------------------------------------------

GRAPH_MAX_NODES = 2000
GRAPH_SCOPES = ("open", "all")


def _column(status: str, blocked: bool) -> str:
    if status == Status.PENDING:
        return "blocked" if blocked else "pending"
    if status == Status.IN_PROGRESS:
        return "in_progress"
    return "completed"


def graph(board: Board, scope: str = "open", around: int | None = None) -> dict[str, Any]:
    """The board's dependency graph as nodes and edges, and the critical path of unfinished
    work (the longest chain of open tasks, each waiting on the one before).

    ``scope``: "open" (pending and in progress, the default), "all", or ``around`` a task:
    everything its blockers and dependents reach. At most ``GRAPH_MAX_NODES`` nodes.
    """
    tasks = Task.objects.filter(board=board).order_by("number")
    if around is not None:
        numbers = _neighbourhood(board, around)
        tasks = tasks.filter(number__in=numbers)
    elif scope == "open":
        tasks = tasks.filter(status__in=(Status.PENDING, Status.IN_PROGRESS))
    elif scope != "all":
        raise InvalidInput("scope: open, all or task", field="scope")
    rows = list(
        tasks.values_list(
            "pk",
            "number",
            "subject",
            "status",
            "owner",
            "blocked",
            "stuck",
            "failures",
            "parent__number",
            "cost_usd",
        )[: GRAPH_MAX_NODES + 1]
    )
    truncated = len(rows) > GRAPH_MAX_NODES
    rows = rows[:GRAPH_MAX_NODES]
    number_of = {pk: number for pk, number, *_ in rows}
    # One side in SQL, the other here: both as IN lists, SQLite probes every pair.
    edges = [
        (number_of[blocker], number_of[task])
        for task, blocker in Dependency.objects.filter(task_id__in=list(number_of)).values_list(
            "task_id", "blocker_id"
        )
        if blocker in number_of
    ]
    open_numbers = {number for _, number, _, status, *_ in rows if status not in TERMINAL_STATUSES}
    critical = _longest_chain(
        open_numbers, [(a, b) for a, b in edges if a in open_numbers and b in open_numbers]
    )
    nodes = [
        {
            "id": str(number),
            "subject": subject,
            "status": status,
            "column": _column(status, blocked),
            "owner": owner,
            "stuck": stuck and status not in TERMINAL_STATUSES,
            "attention": failures >= board.max_attempts
            and status in (Status.PENDING, Status.FAILED),
            "parentId": str(parent) if parent else None,
            "costUsd": float(cost),
        }
        for _, number, subject, status, owner, blocked, stuck, failures, parent, cost in rows
    ]
    return {
        "nodes": nodes,
        "edges": [{"from": str(a), "to": str(b)} for a, b in sorted(edges)],
        "critical": [str(n) for n in critical],
        "truncated": truncated,
        "seq": board.last_seq,
    }


def _neighbourhood(board: Board, number: int, limit: int = 500) -> set[int]:
    """The task, and every task its blockers and dependents reach (both ways)."""
    start = Task.objects.filter(board=board, number=number).values_list("pk", flat=True).first()
    if start is None:
        raise NotFound(f"Task #{number} not found", code="task_not_found")
    seen = {start}
    for forward in (True, False):
        level = {start}
        while level and len(seen) < limit:
            pairs = (
                Dependency.objects.filter(blocker_id__in=level).values_list("task_id", flat=True)
                if forward
                else Dependency.objects.filter(task_id__in=level).values_list(
                    "blocker_id", flat=True
                )
            )
            level = set(pairs) - seen
            seen |= level
    return set(Task.objects.filter(pk__in=seen).values_list("number", flat=True))


def _longest_chain(numbers: set[int], edges: list[tuple[int, int]]) -> list[int]:
    """The longest path of the DAG (by task count), in order; ties: lowest numbers."""
    after: dict[int, list[int]] = {n: [] for n in numbers}
    waiting = {n: 0 for n in numbers}
    for blocker, task in edges:
        after[blocker].append(task)
        waiting[task] += 1
    order = sorted(n for n in numbers if waiting[n] == 0)
    best: dict[int, tuple[int, int | None]] = {n: (1, None) for n in numbers}
    queue = list(order)
    i = 0
    while i < len(queue):  # Kahn's order: every blocker before its dependents
        n = queue[i]
        i += 1
        for m in sorted(after[n]):
            if best[n][0] + 1 > best[m][0]:
                best[m] = (best[n][0] + 1, n)
            waiting[m] -= 1
            if waiting[m] == 0:
                queue.append(m)
    if not best:
        return []
    end = min(best, key=lambda n: (-best[n][0], n))
    chain = [end]
    while best[chain[-1]][1] is not None:
        chain.append(best[chain[-1]][1])  # type: ignore[arg-type]
    return chain[::-1]

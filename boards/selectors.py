"""Reads shared by the tool API, the board views, the consumers and the services' answers.

Whole-board reads cost a constant number of queries: the tasks in one query,
the dependency edges in another, everything derived in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from .errors import NotFound
from .models import (
    TERMINAL_STATUSES,
    Agent,
    ApprovalState,
    Attempt,
    Board,
    Dependency,
    Event,
    Message,
    Status,
    Task,
)

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


def parse_task_id(value: str | int) -> int:
    """``"3"``, ``"#3"`` or ``3`` → 3; anything else is unknown."""
    text = str(value).strip().lstrip("#")
    if not text.isdigit() or len(text) > 9:
        raise NotFound(f"Task #{str(value)[:40]} not found", code="task_not_found")
    return int(text)


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


def view_parent_number(task: Task) -> int | None:
    # Loaded by select_related / the snapshot, so reading it costs no query.
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
    tasks = list(Task.objects.filter(board=board, number__in=numbers).select_related("parent"))
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
    views = {}
    for task in tasks:
        blockers = [(bn, bs) for tpk, _, _, bn, bs in edges if tpk == task.pk]
        views[task.number] = TaskView(
            task=task,
            blocked_by=sorted(bn for bn, _ in blockers),
            open_blockers=sorted(bn for bn, bs in blockers if bs != Status.COMPLETED),
            blocks=sorted(tn for _, tn, bpk, _, _ in edges if bpk == task.pk),
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


def find_cycle(board: Board) -> list[int] | None:
    """A dependency cycle of the board as task numbers (first = last), or None.

    Depth-first with three colours, lowest numbers first, so a cycle reads the
    same way every time: ``[3, 5, 3]``.
    """
    graph: dict[int, list[int]] = {}
    for task, blocker in Dependency.objects.filter(board=board).values_list(
        "task__number", "blocker__number"
    ):
        graph.setdefault(task, []).append(blocker)
    done: set[int] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
            elif nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def blocked_numbers(board: Board) -> set[int]:
    """Numbers of the board's tasks that are blocked right now, in one query."""
    return set(
        Dependency.objects.filter(board=board)
        .exclude(task__status__in=TERMINAL_STATUSES)
        .exclude(blocker__status=Status.COMPLETED)
        .values_list("task__number", flat=True)
    )


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
    """The column counts without loading the tasks, in one aggregate query."""
    open_blocker = Dependency.objects.filter(task=OuterRef("pk")).exclude(
        blocker__status=Status.COMPLETED
    )
    dead_blocker = Dependency.objects.filter(task=OuterRef("pk"), blocker__status__in=DEAD_ENDS)
    pending = Q(status=Status.PENDING)
    free = Q(is_blocked=False)
    counts = (
        Task.objects.filter(board=board)
        .annotate(is_blocked=Exists(open_blocker), is_stuck=Exists(dead_blocker))
        .aggregate(
            pending=Count("pk", filter=pending & free),
            blocked=Count("pk", filter=pending & Q(is_blocked=True)),
            in_progress=Count("pk", filter=Q(status=Status.IN_PROGRESS)),
            completed=Count("pk", filter=Q(status=Status.COMPLETED)),
            failed=Count("pk", filter=Q(status=Status.FAILED)),
            cancelled=Count("pk", filter=Q(status=Status.CANCELLED)),
            ready=Count(
                "pk",
                filter=pending
                & free
                & ~Q(approval_state=ApprovalState.REQUESTED)
                & Q(failures__lt=board.max_attempts),
            ),
            stuck=Count(
                "pk",
                filter=Q(status__in=(Status.PENDING, Status.IN_PROGRESS)) & Q(is_stuck=True),
            ),
        )
    )
    return {key: counts[key] for key in COUNT_KEYS}


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
    """Every agent seen on the board, with what it owns and whether it went quiet (one query)."""
    idle = timezone.now() - timedelta(seconds=settings.KANBAN_AGENT_IDLE_SECONDS)

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
    return [
        {
            "name": agent.name,
            "last_seen": agent.last_seen,
            "owned": agent.open_count,
            "in_progress": agent.in_progress_count,
            "stale": bool(agent.in_progress_count) and agent.last_seen < idle,
        }
        for agent in agents
    ]


def board_progress(boards: Iterable[Board]) -> dict[int, dict[str, int]]:
    """Tasks in all and completed, per board (one grouped query)."""
    return {
        row["board"]: row
        for row in Task.objects.filter(board__in=list(boards))
        .values("board")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status=Status.COMPLETED)))
        .order_by()
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
        }
        for a in Attempt.objects.filter(task=task).order_by("n")
    ]

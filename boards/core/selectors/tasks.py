"""Tasks as the board and the tool API read them: views with their relations, pages, columns, counts."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from django.db.models import (
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    QuerySet,
)

from boards.core import limits
from boards.core.activity import needs_sentence
from boards.core.errors import InvalidInput, NotFound, refuse
from boards.core.fulltext import Terms, search_terms
from boards.core.numbers import id_number, spelled
from boards.core.rules import (
    TaskQuerySet,
    awaits_person,
    column_of,
    is_ready,
)
from boards.core.selectors.search import TaskFilter, search_matching, search_ranked
from boards.core.states import DEAD_ENDS
from boards.models import (
    TERMINAL_STATUSES,
    Attempt,
    AttemptOutcome,
    Board,
    Dependency,
    Label,
    Message,
    Status,
    Task,
)

COLUMNS = ("pending", "in_progress", "blocked", "completed")


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
        raise refuse("task_not_found", number=str(value)[:40])
    return number


def board_get(slug: str) -> Board:
    board = Board.objects.filter(slug=slug).first()
    if board is None:
        raise refuse("board_not_found", slug=slug[:64])
    return board


# Added to a pinned card's sort key: ahead of every unpinned one (timestamps in ms).
PINNED_AHEAD = 10**14


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
    labels: list[str] = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.task.number

    @property
    def stuck(self) -> bool:
        # Stored by the unit of work (``rules.gives_up``): a first failure's dependents are
        # not stuck while an agent may still retry it (the board's failureGraceSeconds).
        return self.task.status not in TERMINAL_STATUSES and self.task.stuck

    @property
    def needs_attention(self) -> str | None:
        """Why a person must look (its stored reason, SPEC §12, in words), or None."""
        if not self.task.needs:
            return None
        return needs_sentence(self.task.needs, self.task.failures, self.max_attempts)

    @property
    def blocked(self) -> bool:
        return self.task.status not in TERMINAL_STATUSES and bool(self.open_blockers)

    @property
    def awaits_person(self) -> bool:
        """An open gated task no person has approved (``rules.awaits_person``): the card's
        "needs approval" tag, or "awaiting approval" once a claim asked."""
        return self.task.status not in TERMINAL_STATUSES and awaits_person(self.task)

    @property
    def column(self) -> str:
        return column_of(self.task.status, self.blocked)

    @property
    def sort_key(self) -> int:
        """Where the card stands in its column: open columns by number, ascending;
        Completed by when it finished, descending (the page places pushed cards by this:
        htmx's ``upsert``, ``push.html#card``)."""
        if self.column == "completed" and self.task.completed_at is not None:
            finished = int(self.task.completed_at.timestamp() * 1000)
            # A failure or a cancellation is pinned on top (the column sorts newest first),
            # whether anything waits on it or not: twenty completions after it must not
            # push it out of sight.
            return finished + PINNED_AHEAD if self.pinned else finished
        return self.task.number

    @property
    def pinned(self) -> bool:
        """Ended without completing: first in its column until a person acts on it."""
        return self.task.status in DEAD_ENDS

    @property
    def ready(self) -> bool:
        return is_ready(self.task, self.blocked, self.max_attempts)


def view_parent_number(task: Task) -> int | None:
    # Annotated (task_views) or loaded (select_related): no query here.
    if task.parent_id is None:
        return None
    annotated = getattr(task, "parent_number", None)
    if annotated is not None:
        return int(annotated)
    return task.parent.number if task.parent is not None else None


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
    return _views_of(board, tasks, pks, labels_of(pks), with_children=with_children)


def task_selection(board: Board, rows: TaskQuerySet) -> list[TaskView]:
    """Every task ``rows`` keeps (``task_rows``, a column...), in number order, as views
    without children or labels, in two queries whatever the board's size: the seed
    dialects' lists and answers, which have no pages."""
    tasks = list(rows.order_by().annotate(parent_number=F("parent__number")))
    # Sorted here, not by the query: ordered by number, SQLite's planner may walk the
    # board's whole (board, number) index to keep a few tasks (see ``task_page``).
    tasks.sort(key=lambda task: task.number)
    # The relations by a subquery, not a list of every key: a whole board's keys may be
    # more than a query may carry (PostgreSQL takes 65,535 parameters).
    return list(_views_of(board, tasks, rows.values("pk"), {}, with_children=False).values())


def _views_of(
    board: Board,
    tasks: list[Task],
    pks: list[int] | QuerySet[Task, Any],
    labels: dict[int, list[str]],
    *,
    with_children: bool,
) -> dict[int, TaskView]:
    """Views of ``tasks`` (their keys ``pks``), with their relations: one query for the
    dependency edges, one for the children when asked."""
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
    return {
        task.number: view_of(
            board,
            task,
            blockers=blockers_of.get(task.pk, []),
            blocks=blocks_of.get(task.pk, []),
            children=children.get(task.pk, []),
            labels=labels.get(task.pk, []),
        )
        for task in tasks
    }


def view_of(
    board: Board,
    task: Task,
    *,
    blockers: Iterable[tuple[int, str]],
    blocks: Iterable[int],
    children: Iterable[int],
    labels: list[str],
) -> TaskView:
    """A task's view from its relations: its blockers (number, status), the numbers of
    the tasks it blocks and of its children, its labels (sorted)."""
    blockers = list(blockers)
    return TaskView(
        task=task,
        blocked_by=sorted(bn for bn, _ in blockers),
        open_blockers=sorted(bn for bn, bs in blockers if bs != Status.COMPLETED),
        blocks=sorted(blocks),
        children=sorted(children),
        stuck_on=sorted(bn for bn, bs in blockers if bs in DEAD_ENDS),
        dead_ends={bn: bs for bn, bs in blockers if bs in DEAD_ENDS},
        max_attempts=board.max_attempts,
        labels=labels,
    )


def labels_of(pks: Iterable[int]) -> dict[int, list[str]]:
    """Each task's labels, sorted (one query)."""
    found: dict[int, list[str]] = {}
    rows = Label.objects.filter(task_id__in=list(pks)).order_by("name")
    for task_pk, name in rows.values_list("task_id", "name"):
        found.setdefault(task_pk, []).append(name)
    return found


def task_view(board: Board, number: int) -> TaskView:
    view = task_views(board, [number]).get(number)
    if view is None:
        raise refuse("task_not_found", number=number)
    return view


# The recent completed attempts a board's usual cycle time is measured over.
CYCLE_SAMPLE = 200


def cycle_p90(board_id: int) -> float | None:
    """The 90th percentile of the board's last ``CYCLE_SAMPLE`` completed attempts, in
    seconds (None before any): its usual cycle time, against which a hold is long."""
    seconds: list[float] = sorted(
        s
        for s in Attempt.objects.filter(
            task__board_id=board_id, outcome=AttemptOutcome.COMPLETED, seconds__isnull=False
        )
        .order_by("-ended_at")
        .values_list("seconds", flat=True)[:CYCLE_SAMPLE]
        if s is not None
    )
    if not seconds:
        return None
    return seconds[math.ceil(0.9 * len(seconds)) - 1]  # nearest rank


LIST_LIMIT_DEFAULT = limits.LIST_PAGE


def encode_cursor(number: int, kind: str = "after") -> str:
    """A page's continuation: ``after`` a task number, or (a search, in rank order) the
    ``rank`` position the next page starts at."""
    return base64.urlsafe_b64encode(f"{kind}:{number}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str = "after") -> int:
    """The number a cursor continues after; an unreadable cursor is the caller's mistake."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        given, _, number = raw.partition(":")
        after = spelled(number)
        if given != kind or after is None:
            raise ValueError(raw)
        return after
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            "cursor: not a cursor this server gave out for this list (a search's cursor "
            "continues that search only); start again without one",
            field="cursor",
        ) from exc


# The task number as an expression: the same order, but no index can provide it.
_UNINDEXED_NUMBER = ExpressionWrapper(F("number") + 0, output_field=IntegerField())


@dataclass
class TaskPage:
    views: list[TaskView]
    total: int
    next_cursor: str | None
    # A search's page: where each task matched (number → snippet with fulltext's marks).
    matches: dict[int, str] = field(default_factory=dict)


class RowFilters(TypedDict, total=False):
    """TaskList's filters (``task_rows``)."""

    view: str
    status: str | None
    owner: str | None
    blocked: bool | None
    parent_id: int | None
    label: str | None


def task_rows(board: Board, **filters: Unpack[RowFilters]) -> TaskQuerySet:
    """The board's tasks that TaskList's filters keep, as a query on the stored status,
    blocked and stuck columns (``rules.TaskQuerySet``), unordered."""
    view = filters.get("view") or "all"
    status, owner, blocked = filters.get("status"), filters.get("owner"), filters.get("blocked")
    parent_id, label = filters.get("parent_id"), filters.get("label")
    rows = Task.objects.filter(board=board).view(view, board.max_attempts).order_by()
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
    if label is not None:
        rows = rows.filter(label_rows__name=label.lower())
    return rows


def task_page(
    board: Board,
    *,
    tree: bool = False,
    limit: int = LIST_LIMIT_DEFAULT,
    cursor: str | None = None,
    query: str | None = None,
    **filters: Unpack[RowFilters],
) -> TaskPage:
    """One page of the board's tasks in number order, filtered in SQL.

    The cost is the page's, not the board's: the filters use the stored status,
    blocked and stuck columns, and the page continues after the cursor's number,
    so tasks created while an agent pages arrive on a later page, never twice.

    With a ``query`` (``fulltext.search_terms``), only the tasks whose text holds every
    word, best match first, each with its snippet; its pages follow the rank order by
    position (``search_page``).
    """
    rows = task_rows(board, **filters)
    view = filters.get("view") or "all"
    status, owner = filters.get("status"), filters.get("owner")
    parent_id, label = filters.get("parent_id"), filters.get("label")
    if query is not None:
        return search_page(board, rows, search_terms(query), limit=limit, cursor=cursor, tree=tree)
    total = rows.count()
    after = decode_cursor(cursor) if cursor else 0
    # Number order, but by which index: one status (a view of one status, or status=) is
    # served in order by (board, status, number). Other filters that keep few tasks (the
    # open views, an owner, a parent) must find them by their own index and sort the few:
    # ordered by the bare column, SQLite's planner walks (board, number) through the whole
    # history instead. All tasks, or all finished ones, are walked in number order.
    one_status = status is not None or view in ("in_progress", "ready")
    selective = (
        view in ("open", "blocked", "stuck", "needs_person")
        or owner is not None
        or parent_id is not None
        or label is not None
    )
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


def search_page(
    board: Board,
    rows: QuerySet[Task],
    terms: Terms,
    *,
    limit: int,
    cursor: str | None,
    tree: bool = False,
) -> TaskPage:
    """A page of the ``rows`` that match, in rank order. The cursor is the position the
    next page starts at: a rank is no key to continue after (it changes with the text), so
    a task whose text changes while an agent pages may move to another page."""
    matching = search_matching(rows, terms)
    total = matching.count()
    offset = decode_cursor(cursor, "rank") if cursor else 0
    ranked = search_ranked(rows, terms, limit=limit + 1, offset=offset)
    more = len(ranked) > limit
    ranked = ranked[:limit]
    numbers = [number for _, number, _ in ranked]
    found = task_views(board, numbers, with_children=False)
    views = [found[n] for n in numbers if n in found]
    if tree:
        views = tree_order(views)
    next_cursor = encode_cursor(offset + limit, "rank") if more else None
    matches = {number: snippet for _, number, snippet in ranked}
    return TaskPage(views, total, next_cursor, matches)


# How many cards a column shows at first (and per "show more"): about two screens of a
# laptop (a card is ~70 px tall), so a backlog of thousands costs the page what a small
# board does. Completed shows the most recently finished, the open columns the lowest numbers.
COLUMN_PAGE = {"pending": 30, "in_progress": 30, "blocked": 30, "completed": 20}


def _column_rows(board: Board, key: str) -> QuerySet[Task]:
    rows = Task.objects.filter(board=board).in_column(key)
    if key == "completed":
        return rows.order_by("-completed_at", "-number")
    return rows.order_by("number")


def column_page(
    board: Board, key: str, cursor: str | None = None, filters: TaskFilter | None = None
) -> tuple[list[TaskView], str | None]:
    """A column's next cards after ``cursor`` (the last card shown), and the cursor for more;
    only those ``filters`` keep (the board's search and filters), in the column's order."""
    numbers, more = column_numbers(board, key, cursor, filters)
    found = task_views(board, numbers, with_children=False)
    return [found[n] for n in numbers if n in found], more


def column_numbers(
    board: Board, key: str, cursor: str | None = None, filters: TaskFilter | None = None
) -> tuple[list[int], str | None]:
    """The numbers of ``column_page``'s cards, in order, and the cursor for more: what a
    page shows of the column (a push trims an open page to them), without the cards."""
    if key not in COLUMN_PAGE:
        raise NotFound(f"No column {key[:20]!r}", code="column_not_found")
    limit = COLUMN_PAGE[key]
    rows = _column_rows(board, key)
    if filters:
        rows = filters.apply(rows)
    if key == "completed":
        numbers = _completed_numbers(board, rows, limit, cursor)
    else:
        if cursor:
            rows = rows.filter(number__gt=decode_cursor(cursor))
        numbers = list(rows.values_list("number", flat=True)[: limit + 1])
    more = len(numbers) > limit
    numbers = numbers[:limit]
    return numbers, (encode_cursor(numbers[-1]) if more and numbers else None)


def _completed_numbers(
    board: Board, rows: QuerySet[Task], limit: int, cursor: str | None
) -> list[int]:
    """Completed's next numbers (one more than a page when there are more): the failures
    and cancellations first (``TaskView.pinned``), then the rest, each part the most
    recently finished first; the cursor is the last card shown, and its part says where
    the page goes on."""
    order = ("-completed_at", "-number")
    pinned = rows.filter(status__in=DEAD_ENDS).order_by(*order)
    rest = rows.exclude(status__in=DEAD_ENDS).order_by(*order)
    if cursor:
        after = decode_cursor(cursor)
        last = Task.objects.filter(board=board, number=after).first()
        if last is None or last.completed_at is None:
            pinned, rest = pinned.none(), rest.none()
        else:
            later = Q(completed_at__lt=last.completed_at) | Q(
                completed_at=last.completed_at, number__lt=after
            )
            if last.status in DEAD_ENDS:
                pinned = pinned.filter(later)
            else:
                pinned, rest = pinned.none(), rest.filter(later)
    # Both parts read whatever the first holds: the page costs the same queries always.
    numbers = list(pinned.values_list("number", flat=True)[: limit + 1])
    numbers += list(rest.values_list("number", flat=True)[: limit + 1])
    return numbers


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


def unread_count(board: Board, agent: str) -> int:
    return Message.objects.filter(board=board, recipient=agent, read_at__isnull=True).count()


def board_counts(board: Board) -> dict[str, int]:
    """The counts of TaskList and the header, whatever the board's size: the counters the
    unit of work keeps on the board (open ones and finished ones), in one query."""
    fields = [f"{key}_count" for key in COUNT_KEYS]
    values = Board.objects.filter(pk=board.pk).values_list(*fields).get()
    return dict(zip(COUNT_KEYS, values, strict=True))


def board_progress(boards: Iterable[Board]) -> dict[int, dict[str, int]]:
    """Tasks in all, completed and stuck, per board, from the counters each board keeps."""
    return {
        b.pk: {
            "total": b.pending_count
            + b.blocked_count
            + b.in_progress_count
            + b.completed_count
            + b.failed_count
            + b.cancelled_count,
            "done": b.completed_count,
            "stuck": b.stuck_count,
        }
        for b in boards
    }

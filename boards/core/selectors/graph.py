"""The dependency graph: cycles, "why isn't this ready?", and the graph page."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from boards.core.activity import STATUS_NAMES
from boards.core.errors import InvalidInput, refuse
from boards.core.rules import UNFINISHED, awaits_person, column_of, gives_up, is_ready
from boards.core.selectors.tasks import labels_of
from boards.models import TERMINAL_STATUSES, ApprovalState, Board, Dependency, Status, Task


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


READINESS_MAX_TASKS = 500

# What readiness reads of each task it reaches (``_Node``), as ``values_list`` names.
_NODE_FIELDS = (
    "number",
    "status",
    "owner",
    "failures",
    "completed_at",
    "approval_required",
    "approval_state",
    "approval_requested_by",
)


@dataclass(frozen=True)
class _Node:
    """A task as readiness explains it."""

    number: int
    status: str
    owner: str
    failures: int
    completed_at: datetime | None
    approval_required: bool
    approval_state: str
    approval_requested_by: str

    @property
    def asked(self) -> bool:
        """A claim on it waits for a person's approval (the owner is set on approval)."""
        return self.status not in TERMINAL_STATUSES and self.approval_state == (
            ApprovalState.REQUESTED
        )


def _status_words(status: str, owner: str) -> str:
    return f"{STATUS_NAMES.get(status, status).lower()}, {owner or 'unowned'}"


def _dead_end_words(node: _Node, max_attempts: int) -> str:
    """A blocker that will not complete by itself, and what a person can do about it."""
    n = node.number
    if node.status == Status.FAILED:
        times = f" {node.failures} times" if node.failures >= max_attempts > 1 else ""
        return (
            f"#{n} (failed{times}: it will not complete by itself; a person can retry "
            f"#{n}, go on without it, or cancel what waits on it)"
        )
    what = "denied" if node.approval_state == ApprovalState.DENIED else "cancelled"
    return (
        f"#{n} ({what}: it will not complete by itself; a person can reopen #{n}, "
        f"go on without it, or cancel what waits on it)"
    )


def readiness(board: Board, task: Task) -> dict[str, Any]:
    """Why ``task`` is not ready: its unfinished blockers, down to the ones that can move
    now and the ones only a person can move (an approval asked, a failure past its
    grace, a cancelled blocker), and the reason in one sentence.

    One query per level of the chain (each reads the blockers of the level before),
    at most ``READINESS_MAX_TASKS`` tasks.
    """
    max_attempts = board.max_attempts
    grace = timedelta(seconds=board.failure_grace_seconds)
    now = timezone.now()
    me = _Node(*(getattr(task, name) for name in _NODE_FIELDS))

    def dead(node: _Node) -> bool:
        return gives_up(
            node.status,
            node.failures,
            node.completed_at,
            max_attempts=max_attempts,
            grace=grace,
            now=now,
        )

    def used_up(node: _Node) -> bool:
        return node.status == Status.PENDING and node.failures >= max_attempts

    if task.status in TERMINAL_STATUSES:
        return {
            "ready": False,
            "reason": _finished_words(me, max_attempts, dead(me)),
            "chain": [],
            "movable": [],
            "waitsForPerson": [],
        }
    # blocker edges of every unfinished task reached: number -> [blocker numbers]
    waits: dict[int, list[int]] = {}
    info: dict[int, _Node] = {task.number: me}
    level = [task.pk]
    while level and len(info) < READINESS_MAX_TASKS:
        rows = list(
            Dependency.objects.filter(task_id__in=level)
            .exclude(blocker__status=Status.COMPLETED)
            .values_list("task__number", "blocker_id", *(f"blocker__{f}" for f in _NODE_FIELDS))
        )
        level = []
        for number, blocker_pk, *values in rows:
            node = _Node(*values)
            waits.setdefault(number, []).append(node.number)
            if node.number not in info:
                info[node.number] = node
                if node.status not in TERMINAL_STATUSES:
                    level.append(blocker_pk)

    def for_person(node: _Node) -> bool:
        """Only a person can move it on: an approval asked, a dead end, attempts used up."""
        return node.asked or used_up(node) or dead(node)

    chain = [
        {
            "id": str(number),
            "status": node.status,
            "owner": node.owner,
            "waitsOn": [str(b) for b in sorted(waits.get(number, []))],
            "canMove": node.status not in TERMINAL_STATUSES
            and not waits.get(number)
            and not for_person(node),
            "waitsForPerson": for_person(node),
        }
        for number, node in sorted(info.items())
        if number != task.number
    ]
    person = [c["id"] for c in chain if c["waitsForPerson"]]
    direct = sorted(waits.get(task.number, []))
    if not direct:
        return {
            "ready": is_ready(task, False, max_attempts),
            "reason": _unblocked_words(me, max_attempts),
            "chain": [],
            "movable": [],
            "waitsForPerson": [str(task.number)] if for_person(me) else [],
        }

    def explain(number: int, seen: frozenset[int]) -> str:
        node = info[number]
        if node.status in TERMINAL_STATUSES:
            if dead(node):
                return _dead_end_words(node, max_attempts)
            return f"#{number} failed (attempt {node.failures} of {max_attempts}), may be retried"
        if node.asked:
            return (
                f"#{number}, which waits for approval by a person "
                f"(asked by {node.approval_requested_by or 'an agent'})"
            )
        if used_up(node):
            return (
                f"#{number} (pending, failed {node.failures} times: a person can retry, "
                "reassign or cancel it)"
            )
        gated = ""
        if awaits_person(node):
            gated = ", needs approval to start"
        head = f"#{number} ({_status_words(node.status, node.owner)}{gated})"
        below = sorted(waits.get(number, []))
        if not below:
            return head + ", which waits on nothing"
        if number in seen or len(seen) > 8:
            return head + ", which waits on more"
        rest = f" and {len(below) - 1} more" if len(below) > 1 else ""
        return head + f", which waits on {explain(below[0], seen | {number})}{rest}"

    parts = [explain(number, frozenset({task.number})) for number in direct]
    reason = "waiting on " + "; and on ".join(parts)
    if me.asked:
        reason += f"; and it waits for a person's approval (asked by {me.approval_requested_by})"
        person.append(str(task.number))
    return {
        "ready": False,
        "reason": reason,
        "chain": chain,
        "movable": [c["id"] for c in chain if c["canMove"]],
        "waitsForPerson": person,
    }


def _finished_words(node: _Node, max_attempts: int, dead: bool) -> str:
    """Why a finished task is not ready."""
    if node.status == Status.FAILED:
        if node.failures >= max_attempts:
            return (
                f"it failed {node.failures} times (the board allows {max_attempts}): "
                "a person can retry it, reassign it or cancel it"
            )
        tries = f"attempt {node.failures} of {max_attempts}"
        if dead:
            return f"it failed ({tries}): a person can retry it"
        return f"it failed ({tries}) and may be retried"
    if node.status == Status.CANCELLED and node.approval_state == ApprovalState.DENIED:
        return "it was denied by a person"
    return f"it is {STATUS_NAMES[node.status].lower()}"


def _unblocked_words(node: _Node, max_attempts: int) -> str:
    """Why an unfinished task that waits on no other task is (or is not) ready."""
    if node.asked:
        return (
            f"it waits for a person's approval (asked by {node.approval_requested_by}, "
            "who starts it once approved)"
        )
    if node.status == Status.IN_PROGRESS:
        return f"it is in progress with {node.owner or 'nobody'}"
    if node.failures >= max_attempts:
        return (
            f"it failed {node.failures} times (the board allows {max_attempts}): "
            "a person can retry it, reassign it or cancel it"
        )
    if node.owner:
        return f"nothing blocks it: it waits for {node.owner} to start it"
    if awaits_person(node):
        return "nothing blocks it: it can be claimed now, and a claim asks a person's approval"
    return "nothing blocks it: it can be claimed now"


GRAPH_MAX_NODES = 2000


GRAPH_SCOPES = ("open", "all")


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
        # Open work, and the failed or cancelled tasks it still waits on: the cause of a
        # stuck chain is shown beside the chain.
        waiting = Dependency.objects.filter(blocker=OuterRef("pk"), task__status__in=UNFINISHED)
        tasks = tasks.filter(
            Q(status__in=UNFINISHED)
            | (Q(status__in=(Status.FAILED, Status.CANCELLED)) & Exists(waiting))
        )
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
            "needs",
            "parent__number",
            "cost_usd",
            "approval_required",
            "approval_state",
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
    labels = labels_of(number_of)
    nodes = [
        {
            "id": str(number),
            "subject": subject,
            "labels": labels.get(pk, []),
            "status": status,
            "column": column_of(status, blocked),
            "owner": owner,
            "stuck": stuck and status not in TERMINAL_STATUSES,
            "attention": bool(needs),
            "needs": needs or None,
            "parentId": str(parent) if parent else None,
            "costUsd": float(cost),
            "approval": _approval(status, required, approval),
        }
        for (
            pk,
            number,
            subject,
            status,
            owner,
            blocked,
            stuck,
            needs,
            parent,
            cost,
            required,
            approval,
        ) in rows
    ]
    return {
        "nodes": nodes,
        "edges": [{"from": str(a), "to": str(b)} for a, b in sorted(edges)],
        "critical": [str(n) for n in critical],
        "truncated": truncated,
        "seq": board.last_seq,
    }


def _approval(status: str, required: bool, state: str) -> str | None:
    """A node's gate, as the board's card says it: "requested" (awaiting a person's
    approval), "required" (gated: a claim will wait for one), else None."""
    if status in TERMINAL_STATUSES:
        return None
    if state == "requested":
        return "requested"
    if required and state != "approved":
        return "required"
    return None


def _neighbourhood(board: Board, number: int, limit: int = 500) -> set[int]:
    """The task, and every task its blockers and dependents reach (both ways)."""
    start = Task.objects.filter(board=board, number=number).values_list("pk", flat=True).first()
    if start is None:
        raise refuse("task_not_found", number=number)
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

"""The dependency graph: cycles, "why isn't this ready?", and the graph page."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Exists, OuterRef, Q

from ..activity import STATUS_NAMES
from ..errors import InvalidInput, NotFound
from ..models import (
    TERMINAL_STATUSES,
    Board,
    Dependency,
    Status,
    Task,
)
from ..rules import UNFINISHED, column_of


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
    nodes = [
        {
            "id": str(number),
            "subject": subject,
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
            _,
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

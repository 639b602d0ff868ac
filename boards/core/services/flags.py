"""A task's stored flags (blocked, stuck, what needs a person) derived from its relations
now: the write path's rule, run by the unit of work for every task a write touches
(``work.Work``) and by the sweeper. The rules themselves are ``boards.core.rules``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from boards.core.rules import gives_up, needs_of
from boards.core.states import UNFINISHED
from boards.models import TERMINAL_STATUSES, Board, Dependency, Status, Task


@dataclass(frozen=True)
class Flags:
    """A task's stored flags as its relations say now (``derive_flags``)."""

    pk: int
    number: int
    was_blocked: bool
    blocked: bool
    stuck: bool
    was_needs: str
    needs: str
    changed: bool
    failures: int
    # What the board's kept counts read too (``rules.counted_bits``), so the write that
    # derived the flags counts the task without reading it again.
    status: str = ""
    approval_state: str = ""
    counted: int = 0
    # Its edges as read to derive the flags, for the view of a write's answer (``view_of``):
    # its blockers (number, status) and the numbers of every task it blocks.
    blockers: tuple[tuple[int, str], ...] = ()
    blocks: tuple[int, ...] = ()


# The columns ``derive_flags`` reads: what ``rules.needs_of`` looks at, the stored flags and
# the kept counts' (a whole task row is four times the columns, and costs as much more).
FLAG_FIELDS = (
    "number",
    "status",
    "owner",
    "failures",
    "approval_state",
    "completed_at",
    "assigned_at",
    "started_at",
    "needs",
    "needs_since",
    "blocked",
    "stuck",
    "counted",
)


def derive_flags(
    board: Board,
    pks: Iterable[int],
    now: datetime,
    stalled_before: datetime | None = None,
    unattended: bool | None = None,
    *,
    known: Mapping[int, Task] | None = None,
) -> list[Flags]:
    """Blocked, stuck and what needs a person (``rules``), as the task's blockers and
    dependents say now, for the given tasks: their rows and their edges, two queries; a
    task that no longer exists is left out. Ordered by number. ``stalled_before``: the
    sweeper's measure of no progress, ``unattended`` its measure of a board every agent
    left (``rules.needs_of``). ``known``: tasks in hand as stored (by pk), not read again
    (only the edges are read when every task is known)."""
    pks = set(pks)
    known = {pk: task for pk, task in (known or {}).items() if pk in pks}
    tasks = list(known.values())
    if pks - set(known):
        rows = Task.objects.filter(pk__in=pks - set(known)).only(*FLAG_FIELDS).order_by()
        tasks += list(rows)
    tasks.sort(key=lambda task: task.number)
    grace = timedelta(seconds=board.failure_grace_seconds)
    max_attempts = board.max_attempts
    # The edges both ways in one read: each task's blockers, and every task it blocks,
    # finished or not (whether one waits on it; for a write's answer, all it blocks).
    blockers: dict[int, list[tuple[int, str, int, datetime | None]]] = {}
    dependents: dict[int, list[tuple[int, str]]] = {}
    for task_pk, blocker_pk, number, status, *blocker in (
        Dependency.objects.filter(Q(task_id__in=pks) | Q(blocker_id__in=pks))
        .order_by()
        .values_list(
            "task_id",
            "blocker_id",
            "task__number",
            "task__status",
            "blocker__number",
            "blocker__status",
            "blocker__failures",
            "blocker__completed_at",
        )
    ):
        if task_pk in pks:
            blockers.setdefault(task_pk, []).append(tuple(blocker))  # type: ignore[arg-type]
        if blocker_pk in pks:
            dependents.setdefault(blocker_pk, []).append((number, status))
    derived = []
    for task in tasks:
        finished = task.status in TERMINAL_STATUSES
        edges = blockers.get(task.pk, ())
        blocked = not finished and any(s != Status.COMPLETED for _, s, _, _ in edges)
        stuck = not finished and any(
            gives_up(s, f, at, max_attempts=max_attempts, grace=grace, now=now)
            for _, s, f, at in edges
        )
        waits = dependents.get(task.pk, ())
        needs = needs_of(
            task,
            blocked=blocked,
            waiting=any(status in UNFINISHED for _, status in waits),
            max_attempts=max_attempts,
            grace=grace,
            now=now,
            stalled_before=stalled_before,
            unattended=unattended,
        )
        changed = (blocked, stuck, needs) != (task.blocked, task.stuck, task.needs)
        derived.append(
            Flags(
                task.pk,
                task.number,
                task.blocked,
                blocked,
                stuck,
                task.needs,
                needs,
                changed,
                task.failures,
                task.status,
                task.approval_state,
                task.counted,
                blockers=tuple((n, s) for n, s, _, _ in edges),
                blocks=tuple(n for n, _ in waits),
            )
        )
    return derived

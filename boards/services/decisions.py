"""A person's decisions on what needs them (SPEC §12), each with an optional note that
reaches the agent concerned (its inbox, ``unread`` on its next call; the decision is a
write on the task, so a TaskWatch on it returns).

Retry, reopen and release are the plain status and owner changes; "go on without
it" and "cancel the chain" act on the task's dependents as well, in one unit of work.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.utils import timezone

from .. import limits
from ..errors import Conflict, refuse
from ..models import UNFINISHED, Board, Message, Status, Task
from ..rules import NO_PROGRESS_FLOOR, no_progress_after
from ..selectors import cycle_p90
from ..states import EventKind
from . import lifecycle
from .tasks import _update
from .work import Outcome, Work, text, unit_of_work

logger = logging.getLogger(__name__)

SWEEPER_ACTOR = "system"
NOTE_MAX = limits.NOTE_MAX
# A chain cancelled at once stops here (the rest stays for another decision).
CHAIN_MAX = 500


def _tell(work: Work, task: Task, recipient: str, what: str, note: str) -> None:
    """The agent concerned hears of the decision, with the person's note."""
    if not recipient or recipient == work.actor:
        return
    body = f"#{task.number} “{task.subject}”: {what} by {work.actor}" + (
        f": {note}" if note else "."
    )
    Message.objects.create(
        board=work.board, recipient=recipient, sender=work.actor, task_number=task.number, body=body
    )


def _waiting_on(task: Task) -> list[Task]:
    """The unfinished tasks that wait on ``task``, by number (locked by the unit of work)."""
    return list(Task.objects.filter(blocker_links__blocker=task).unfinished().order_by("number"))


def go_on_without(
    *, board: Board, person: str, task_id: str | int, note: str = "", approver: bool = True
) -> Outcome:
    """Take ``task`` out of its unfinished dependents' blockers: they go on without it."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True, approver=approver) as work:
        task = work.task(task_id)
        dependents = _waiting_on(task)
        if not dependents:
            raise Conflict(
                f"Nothing waits on #{task.number}: there is nothing to go on with",
                code="nothing_waits",
            )
        for dependent in dependents:
            _update(work, dependent, {"remove_blocked_by": [task.number]})
        numbers = ", ".join(f"#{d.number}" for d in dependents)
        _tell(work, task, task.owner, f"{numbers} go on without it", note)
        for dependent in dependents:
            _tell(work, dependent, dependent.owner, f"goes on without #{task.number}", note)
    return Outcome(task.number, work.changes)


def cancel_chain(
    *, board: Board, person: str, task_id: str | int, note: str = "", approver: bool = True
) -> Outcome:
    """Cancel ``task`` (when unfinished) and every unfinished task that waits on it,
    directly or through others."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True, approver=approver) as work:
        task = work.task(task_id)
        chain: list[Task] = [task] if task.status not in (Status.COMPLETED,) else []
        seen = {task.pk}
        level = [task]
        while level and len(seen) < CHAIN_MAX:
            found = Task.objects.filter(blocker_links__blocker__in=level).unfinished()
            level = [t for t in found.order_by("number") if t.pk not in seen]
            seen.update(t.pk for t in level)
            chain += level
        cancelled = []
        for member in chain:
            if member.status in UNFINISHED:
                lifecycle.check_status(work, member, Status.CANCELLED)
                owner = member.owner
                _update(work, member, {"status": Status.CANCELLED})
                cancelled.append(member)
                _tell(work, member, owner, "cancelled", note)
        if not cancelled:
            raise refuse("terminal", number=task.number, status=task.status)
    return Outcome(task.number, work.changes)


def reopen(
    *, board: Board, person: str, task_id: str | int, note: str = "", approver: bool = True
) -> Outcome:
    """Back to pending (a retry, or a reopen of cancelled or denied work): its attempts
    counted afresh, unowned, its result kept in its attempts (``lifecycle.set_status``),
    its last owner told."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True, approver=approver) as work:
        task = work.task(task_id)
        owner = task.owner
        if task.status == Status.PENDING and task.failures:
            # Pending with its attempts used up (its leases lapsed): they count afresh.
            failures, task.failures = task.failures, 0
            work.save_task(
                task, EventKind.UPDATED, fields={"failures": {"from": failures, "to": 0}}
            )
        else:
            _update(work, task, {"status": Status.PENDING})
        _tell(work, task, owner, "set back to pending", note)
    return Outcome(task.number, work.changes)


def release(*, board: Board, person: str, task_id: str | int, note: str = "") -> Outcome:
    """Free the task for any agent: unowned and, if it was in progress, pending again
    (its owner's attempt ends; its next write gets ``lease_lost``)."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True) as work:
        task = work.task(task_id)
        lifecycle.check_reassign(work, task)
        owner = task.owner
        if not owner:
            raise Conflict(f"#{task.number} has no owner to release it from", code="not_owned")
        fields: dict[str, str] = {"owner": ""}
        if task.status == Status.IN_PROGRESS:
            fields["status"] = Status.PENDING
            task.lease_lost_by = owner
        _update(work, task, fields, kind=EventKind.REASSIGNED)
        _tell(work, task, owner, "released to any agent", note)
    return Outcome(task.number, work.changes)


def needs_sweep(*, now: datetime | None = None) -> int:
    """Record what comes to need a person by time alone (SPEC §12): a failure nobody
    retried within its board's ``failureGraceSeconds`` (its dependents turn stuck with
    it), an assignment not started within it, work held far past the board's usual
    cycle. Each is a write on its board (an event, pushed), so every page shows it within
    a sweep. A board that fails is logged and skipped. Returns how many tasks were
    rechecked."""
    now = now or timezone.now()
    try:
        rechecked = _stalled_sweep(now)
    except Exception:  # the graces below are swept all the same
        logger.exception("no-progress sweep failed")
        rechecked = 0
    rows = Task.objects.may_come_to_need_a_person().values_list(
        "board_id", "pk", "status", "completed_at", "assigned_at", "board__failure_grace_seconds"
    )
    due: dict[int, set[int]] = {}
    for board_id, pk, status, completed_at, assigned_at, grace in rows.order_by()[:2000]:
        since = completed_at if status == Status.FAILED else assigned_at
        if since is None or since <= now - timedelta(seconds=grace):
            due.setdefault(board_id, set()).add(pk)
    for board_id, pks in due.items():
        try:
            rechecked += _recheck(Board.objects.get(pk=board_id), pks, now)
        except Exception:
            logger.exception("needs sweep of board %s failed", board_id)
    return rechecked


# Each board's usual cycle time, re-measured at most once a minute by this process's
# sweeper: (when measured, p90 seconds).
_CYCLES: dict[int, tuple[float, float | None]] = {}
CYCLE_REMEASURE_SECONDS = 60.0


def _usual_cycle(board_id: int) -> float | None:
    measured = _CYCLES.get(board_id)
    clock = time.monotonic()
    if measured is None or clock - measured[0] > CYCLE_REMEASURE_SECONDS:
        measured = (clock, cycle_p90(board_id))
        _CYCLES[board_id] = measured
    return measured[1]


def _stalled_sweep(now: datetime) -> int:
    """Work held past its board's ``rules.no_progress_after`` needs a person."""
    held = Task.objects.held_since(now - NO_PROGRESS_FLOOR).values_list(
        "board_id", "pk", "started_at"
    )
    by_board: dict[int, list[tuple[int, datetime]]] = {}
    # The longest held first: a board with thousands of long holds cannot starve the rest.
    for board_id, pk, started_at in held.order_by("started_at")[:2000]:
        by_board.setdefault(board_id, []).append((pk, started_at))
    rechecked = 0
    for board_id, rows in by_board.items():
        try:
            stalled_before = now - no_progress_after(_usual_cycle(board_id))
            due = {pk for pk, started_at in rows if started_at <= stalled_before}
            if due:
                board = Board.objects.get(pk=board_id)
                rechecked += _recheck(board, due, now, stalled_before)
        except Exception:
            logger.exception("no-progress sweep of board %s failed", board_id)
    return rechecked


def _recheck(
    board: Board, pks: set[int], now: datetime, stalled_before: datetime | None = None
) -> int:
    with unit_of_work(board, SWEEPER_ACTOR, person=True) as work:
        work.now = now  # the moment the graces were measured at
        work.stalled_before = stalled_before
        work.recheck.update(pks)
        # A failure past its grace leaves its dependents stuck: theirs change too.
        work.recheck.update(
            Task.objects.filter(blocker_links__blocker_id__in=pks)
            .unfinished()
            .values_list("pk", flat=True)
        )
    return len(pks)

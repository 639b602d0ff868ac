"""A person's decisions on what needs them (SPEC §12), each with an optional note that
reaches the agent concerned (its inbox, ``unread`` on its next call; the decision is a
write on the task, so a TaskWatch on it returns).

Retry, reopen and release are the plain status and owner changes; "go on without
it" and "cancel the chain" act on the task's dependents as well: going on in one unit of work,
cancelling in chunks of the chain the person was shown.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.utils import timezone

from boards.core import limits
from boards.core.errors import Conflict, refuse
from boards.core.rules import NO_PROGRESS_FLOOR, no_progress_after
from boards.core.selectors import cycle_p90
from boards.core.selectors.agents import boards_unattended
from boards.core.services import lifecycle
from boards.core.services.tasks import _update
from boards.core.services.work import Outcome, Work, text, unit_of_work
from boards.core.states import EventKind
from boards.models import UNFINISHED, Board, Message, Reason, Status, Task
from boards.needs.reads import per_board

logger = logging.getLogger(__name__)

SWEEPER_ACTOR = "system"
NOTE_MAX = limits.NOTE_MAX
# A chain cancelled at once stops here (the rest stays for another decision).
CHAIN_MAX = 5_000
# Tasks cancelled per unit of work: about a millisecond each, so each write holds the
# board's lock for a fraction of a second, whatever the chain's length.
CHAIN_CHUNK = 200


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


def chain_to_cancel(task: Task) -> list[int]:
    """What "cancel the chain" of ``task`` would cancel now: the task when unfinished,
    then every unfinished task that waits on it, directly or through others, level by
    level (at most ``CHAIN_MAX``). The panel shows this list and posts it back."""
    chain = [task.number] if task.status in UNFINISHED else []
    seen = {task.pk}
    level = [task.pk]
    while level and len(chain) < CHAIN_MAX:
        found = (
            Task.objects.filter(blocker_links__blocker__in=level)
            .unfinished()
            .exclude(pk__in=seen)
            .distinct()
            .order_by("number")
            .values_list("pk", "number")
        )
        rows = list(found[: CHAIN_MAX - len(chain)])
        seen.update(pk for pk, _ in rows)
        chain += [number for _, number in rows]
        level = [pk for pk, _ in rows]
    return chain


def cancel_chain(
    *,
    board: Board,
    person: str,
    task_id: str | int,
    note: str = "",
    approver: bool = True,
    shown: Sequence[int] | None = None,
) -> Outcome:
    """Cancel ``task`` (when unfinished) and every unfinished task that waits on it,
    directly or through others (``chain_to_cancel``).

    ``shown``: the chain as the person saw it; when it is no longer the chain, nothing
    is cancelled (409 ``chain_changed``): they would cancel what they never saw. The
    chain is cancelled ``CHAIN_CHUNK`` tasks per unit of work, so a long one never holds
    the board's write lock for long; each later chunk cancels what is still unfinished
    of the chain that was checked (a task finished meanwhile stays finished).
    """
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True, approver=approver) as work:
        task = work.task(task_id)
        chain = chain_to_cancel(task)
        if shown is not None and sorted(shown) != sorted(chain):
            raise refuse("chain_changed", number=task.number, count=len(chain), shown=len(shown))
        if not chain:
            raise refuse("terminal", number=task.number, status=task.status)
        _cancel(work, chain[:CHAIN_CHUNK], note)
    changes = list(work.changes)
    for start in range(CHAIN_CHUNK, len(chain), CHAIN_CHUNK):
        with unit_of_work(board, person, person=True, approver=approver) as work:
            _cancel(work, chain[start : start + CHAIN_CHUNK], note)
        changes += work.changes
    return Outcome(task.number, changes)


def _cancel(work: Work, numbers: Sequence[int], note: str) -> None:
    members = Task.objects.filter(board=work.board, number__in=numbers, status__in=UNFINISHED)
    for member in members.order_by("number"):
        lifecycle.check_status(work, member, Status.CANCELLED)
        owner = member.owner
        _update(work, member, {"status": Status.CANCELLED})
        _tell(work, member, owner, "cancelled", note)


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
    try:
        rechecked += _unattended_sweep(now)
    except Exception:
        logger.exception("unattended sweep failed")
    rows = Task.objects.may_come_to_need_a_person().values_list(
        "board_id", "pk", "status", "completed_at", "assigned_at", "board__failure_grace_seconds"
    )
    due: dict[int, set[int]] = {}
    for board_id, pk, status, completed_at, assigned_at, grace in rows.order_by().filter(
        pk__in=per_board(Task.objects.may_come_to_need_a_person(), SWEPT_PER_BOARD, "pk").values(
            "pk"
        )
    ):
        since = completed_at if status == Status.FAILED else assigned_at
        if since is None or since <= now - timedelta(seconds=grace):
            due.setdefault(board_id, set()).add(pk)
    for board_id, pks in due.items():
        try:
            rechecked += _recheck(Board.objects.get(pk=board_id), pks, now)
        except Exception:
            logger.exception("needs sweep of board %s failed", board_id)
    return rechecked


# Tasks each sweep rechecks on one board at most (the rest at the next sweep).
SWEPT_PER_BOARD = 500

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
    longest = per_board(
        Task.objects.held_since(now - NO_PROGRESS_FLOOR), SWEPT_PER_BOARD, "started_at", "pk"
    )
    by_board: dict[int, list[tuple[int, datetime]]] = {}
    # The longest held first, each board with its own limit: a board with thousands of
    # long holds cannot starve the rest.
    for board_id, pk, started_at in longest.values_list("board_id", "pk", "started_at"):
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


def _unattended_sweep(now: datetime) -> int:
    """Ready work on a board whose every agent is gone needs a person (it is flagged
    nowhere else: nobody will claim it); once an agent is back, those items clear."""
    candidates = Board.objects.filter(
        pk__in=Task.objects.filter(status=Status.PENDING, blocked=False)
        .order_by()
        .values("board_id")
    )
    boards = list(candidates)
    if not boards:
        return 0
    left = boards_unattended(boards, now=now)
    rechecked = 0
    for board in boards:
        try:
            unattended = board.pk in left
            rows = (
                Task.objects.filter(board=board).may_come_to_be_unattended(board.max_attempts)
                if unattended
                else Task.objects.filter(board=board, needs=Reason.UNATTENDED)
            )
            pks = set(rows.order_by("number").values_list("pk", flat=True)[:SWEPT_PER_BOARD])
            if pks:
                rechecked += _recheck(board, pks, now, unattended=unattended)
        except Exception:
            logger.exception("unattended sweep of board %s failed", board.pk)
    return rechecked


def _recheck(
    board: Board,
    pks: set[int],
    now: datetime,
    stalled_before: datetime | None = None,
    *,
    unattended: bool | None = None,
) -> int:
    with unit_of_work(board, SWEEPER_ACTOR, person=True) as work:
        work.now = now  # the moment the graces were measured at
        work.stalled_before = stalled_before
        work.unattended = unattended
        work.recheck.update(pks)
        # A failure past its grace leaves its dependents stuck: theirs change too.
        work.recheck.update(
            Task.objects.filter(blocker_links__blocker_id__in=pks)
            .unfinished()
            .values_list("pk", flat=True)
        )
    return len(pks)

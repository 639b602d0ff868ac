"""The board's rules, each written once: as a query (``TaskQuerySet``) and, beside it,
its Python twin for a task already in hand.

"Ready", "in which column" and "what needs a person" (SPEC §12) are decided here
and nowhere else: claim-next, the list filters, the columns, the "Needs you"
strip, the inbox and the graph read the query; the unit of work stores the
flags the twins derive.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db import models
from django.db.models import Q

from boards.core.states import (
    DEAD_ENDS,
    GONE_FACTOR,
    TERMINAL_STATUSES,
    UNFINISHED,
    ApprovalState,
    Reason,
    SessionState,
    Status,
)

COLUMNS = ("pending", "in_progress", "blocked", "completed")


class _TaskLike(Protocol):
    status: str
    owner: str
    failures: int
    approval_state: str
    completed_at: datetime | None
    assigned_at: datetime | None
    started_at: datetime | None
    needs: str
    needs_since: datetime | None


class TaskQuerySet(models.QuerySet):
    def unfinished(self) -> TaskQuerySet:
        return self.filter(status__in=UNFINISHED)

    def finished(self) -> TaskQuerySet:
        return self.filter(status__in=TERMINAL_STATUSES)

    def ready(self, max_attempts: int) -> TaskQuerySet:
        """Claimable now (twin: ``is_ready``)."""
        return self.filter(status=Status.PENDING, blocked=False, failures__lt=max_attempts).exclude(
            approval_state=ApprovalState.REQUESTED
        )

    def in_column(self, key: str) -> TaskQuerySet:
        """The cards of one board column (twin: ``column_of``)."""
        if key == "pending":
            return self.filter(status=Status.PENDING, blocked=False)
        if key == "blocked":
            return self.filter(status=Status.PENDING, blocked=True)
        if key == "in_progress":
            return self.filter(status=Status.IN_PROGRESS)
        return self.finished()

    def needing_person(self) -> TaskQuerySet:
        """Tasks a person must decide on (twin: ``needs_of``, stored by the unit of work
        and the sweeper in ``needs``)."""
        return self.exclude(needs="")

    def may_come_to_need_a_person(self) -> TaskQuerySet:
        """Tasks a reason can come to by time alone, when their board's grace ends: a
        failure that dependents wait on, an assignment not started (the sweeper
        re-derives these when it is due; ``needs_of`` decides)."""
        failed = Q(status=Status.FAILED, dependent_links__task__status__in=UNFINISHED)
        assigned = Q(status=Status.PENDING, blocked=False, assigned_at__isnull=False)
        return self.filter(needs="").filter(failed | assigned).distinct()

    def may_come_to_be_unattended(self, max_attempts: int) -> TaskQuerySet:
        """Ready work nothing asks a person about yet: it is unattended when every agent
        of its board is gone (``needs_of``'s ``unattended``, the sweeper's measure)."""
        return self.ready(max_attempts).filter(needs="")

    def counted_now(self, max_attempts: int) -> Iterator[tuple[int, int, int]]:
        """Each task's (pk, the kept counts it adds to now, what was counted for it):
        ``counted_bits`` read from the stored columns."""
        rows = self.order_by().values_list(
            "pk", "status", "blocked", "stuck", "needs", "failures", "approval_state", "counted"
        )
        for pk, status, blocked, stuck, needs, failures, approval, stored in rows.iterator():
            bits = counted_bits(
                status=status,
                blocked=blocked,
                stuck=stuck,
                needs=needs,
                failures=failures,
                approval_state=approval,
                max_attempts=max_attempts,
            )
            yield pk, bits, stored

    def held_since(self, before: datetime) -> TaskQuerySet:
        """In-progress work held since before ``before`` with nothing asked of a person
        yet: it may have stopped making progress (``needs_of`` decides, against the
        board's ``no_progress_after``)."""
        return self.filter(status=Status.IN_PROGRESS, needs="", started_at__lte=before)

    def view(self, name: str, max_attempts: int) -> TaskQuerySet:
        """TaskList's ``view`` filter (twin: ``in_view``)."""
        if name == "all":
            return self
        if name == "open":
            return self.unfinished()
        if name == "ready":
            return self.ready(max_attempts)
        if name == "blocked":
            return self.filter(blocked=True, status__in=UNFINISHED)
        if name == "stuck":
            return self.filter(stuck=True, status__in=UNFINISHED)
        if name == "in_progress":
            return self.filter(status=Status.IN_PROGRESS)
        if name == "needs_person":
            return self.needing_person()
        return self.finished()  # "done"


VIEWS = ("all", "open", "ready", "blocked", "stuck", "in_progress", "done", "needs_person")


def awaits_person(task: Any) -> bool:
    """A gated task no person has approved: what it holds back, only a person releases."""
    return bool(task.approval_required) and task.approval_state != ApprovalState.APPROVED


def column_of(status: str, blocked: bool) -> str:
    if status == Status.PENDING:
        return "blocked" if blocked else "pending"
    if status == Status.IN_PROGRESS:
        return "in_progress"
    return "completed"


def is_ready(task: _TaskLike, blocked: bool, max_attempts: int) -> bool:
    return (
        task.status == Status.PENDING
        and not blocked
        and task.approval_state != ApprovalState.REQUESTED
        and task.failures < max_attempts
    )


def in_view(name: str, task: Any, *, blocked: bool, stuck: bool, max_attempts: int) -> bool:
    unfinished = task.status in UNFINISHED
    return {
        "all": True,
        "open": unfinished,
        "ready": is_ready(task, blocked, max_attempts),
        "blocked": blocked and unfinished,
        "stuck": stuck and unfinished,
        "in_progress": task.status == Status.IN_PROGRESS,
        "needs_person": bool(getattr(task, "needs", "")),
        "done": task.status in TERMINAL_STATUSES,
    }[name]


def gives_up(
    status: str,
    failures: int,
    completed_at: datetime | None,
    *,
    max_attempts: int,
    grace: timedelta,
    now: datetime,
) -> bool:
    """A blocker that ended like this will not complete by itself: its dependents are
    stuck. A first failure may still be retried by an agent for ``grace``."""
    if status not in DEAD_ENDS:
        return False
    if status == Status.CANCELLED or failures >= max_attempts:
        return True
    return completed_at is None or completed_at <= now - grace


# In-progress work held past this many times the board's p90 cycle time, and never
# sooner than the floor, has stopped making progress (SPEC §12).
NO_PROGRESS_FACTOR = 3
NO_PROGRESS_FLOOR = timedelta(minutes=10)
# A client session that sends the same tool call this many times in a row is looping.
REPEATS_NO_PROGRESS = 10


def no_progress_after(p90_cycle_seconds: float | None) -> timedelta:
    """How long a hold may last before it reads as no progress, on a board whose recent
    completed attempts took ``p90_cycle_seconds`` (None: no history yet)."""
    if not p90_cycle_seconds:
        return NO_PROGRESS_FLOOR
    return max(NO_PROGRESS_FLOOR, timedelta(seconds=NO_PROGRESS_FACTOR * p90_cycle_seconds))


def needs_of(
    task: _TaskLike,
    *,
    blocked: bool,
    waiting: bool,
    max_attempts: int,
    grace: timedelta,
    now: datetime,
    stalled_before: datetime | None = None,
    unattended: bool | None = None,
) -> str:
    """Why the task waits for a person (a ``Reason``), or "" (SPEC §12).

    ``waiting``: some unfinished task waits on it. ``stalled_before``: in-progress work
    started before then makes no progress (the sweeper's measure; a write in between
    keeps what the sweeper found for the same hold). ``unattended``: every agent of the
    board is gone (the sweeper's measure; None, a write: what the sweeper found stands
    while the task stays ready). Reasons that come true with time are stored by the
    sweeper, the others by the write that makes them.
    """
    if unattended is None:
        unattended = task.needs == Reason.UNATTENDED
    status = task.status
    if status in UNFINISHED and task.approval_state == ApprovalState.REQUESTED:
        return Reason.APPROVAL
    started = task.started_at
    if status == Status.IN_PROGRESS and started is not None:
        since = task.needs_since
        if task.needs == Reason.NO_PROGRESS and since is not None and since >= started:
            return Reason.NO_PROGRESS  # the same hold: the agent's calls do not end it
        if stalled_before is not None and started <= stalled_before:
            return Reason.NO_PROGRESS
    if task.failures >= max_attempts and status in (Status.PENDING, Status.FAILED):
        return Reason.FAILED  # its attempts are used up
    if status == Status.FAILED and waiting:
        ended = task.completed_at
        if ended is None or ended <= now - grace:
            return Reason.FAILED
    if status == Status.CANCELLED and waiting:
        return Reason.STRANDED
    assigned = task.assigned_at
    if (
        status == Status.PENDING
        and task.owner
        and assigned
        and not blocked
        and (assigned <= now - grace)
    ):
        return Reason.NOT_STARTED
    if unattended and is_ready(task, blocked, max_attempts):
        return Reason.UNATTENDED
    return ""


def client_gone(
    *,
    session_state: str | None,
    last_event_at: datetime | None,
    deadline: datetime | None,
    silent_after: int,
    now: datetime,
) -> str:
    """Why nobody waits for a held tool call's answer any more, or "": its session ended,
    its client gave up waiting (the rule's wait is over), or the session has sent
    nothing for as long as makes an agent gone (``states.agent_state``)."""
    if session_state == SessionState.ENDED:
        return "its session ended"
    if deadline is not None and deadline < now:
        return "its client stopped waiting at the rule's deadline"
    if last_event_at is not None and last_event_at <= now - timedelta(
        seconds=GONE_FACTOR * silent_after
    ):
        return "its session is gone"
    return ""


# The open counts a board keeps (``Board.<key>_count``), each a bit of a task's
# ``counted``: what it adds to them as it stands.
KEPT_COUNTS = ("pending", "blocked", "in_progress", "ready", "stuck", "needs_person")
_BITS = {key: 1 << i for i, key in enumerate(KEPT_COUNTS)}


def counted_bits(
    *,
    status: str,
    blocked: bool,
    stuck: bool,
    needs: str,
    failures: int,
    approval_state: str,
    max_attempts: int,
) -> int:
    """The kept counts a task adds to (twin of ``TaskQuerySet.in_column`` / ``ready`` /
    ``view``), as a bit set."""
    bits = 0
    if status == Status.PENDING:
        bits |= _BITS["blocked" if blocked else "pending"]
        if not blocked and failures < max_attempts and approval_state != ApprovalState.REQUESTED:
            bits |= _BITS["ready"]
    elif status == Status.IN_PROGRESS:
        bits |= _BITS["in_progress"]
    if stuck and status in UNFINISHED:
        bits |= _BITS["stuck"]
    if needs:
        bits |= _BITS["needs_person"]
    return bits


def count_delta(before: int, after: int) -> dict[str, int]:
    """How a task's move from ``before`` to ``after`` bits changes each kept count."""
    return {
        key: ((after & bit) > 0) - ((before & bit) > 0)
        for key, bit in _BITS.items()
        if (after ^ before) & bit
    }

"""Approvals (seed 001's confirmation): agents ask, people decide. The rules are ``lifecycle``'s."""

from __future__ import annotations

from boards.core import limits
from boards.core.services import lifecycle, stepup
from boards.core.services.work import Outcome, shown, text, unit_of_work
from boards.core.states import EventKind
from boards.models import ApprovalState, Board, Message


def approval_request(*, board: Board, agent: str, task_id: str | int, reason: str) -> Outcome:
    """An agent asks a person before doing something on a task ("about to run the migration")."""
    reason = text("reason", reason, limits.APPROVAL_REASON_MAX, required=True)
    with unit_of_work(board, agent) as work:
        task = work.task(task_id)
        lifecycle.request_approval(work, task, reason)
    return Outcome(task.number, work.changes)


def approval_decide(
    *,
    board: Board,
    person: str,
    task_id: str | int,
    approve: bool,
    note: str = "",
    version: int | None = None,
) -> Outcome:
    """A person approves or denies a pending request (``lifecycle.decide``); ``version``,
    the task version they saw, refuses a decision on a task changed since."""
    note = text("note", note or "", limits.NOTE_MAX)
    with unit_of_work(board, person, person=True) as work:
        task = work.task(task_id)
        if approve:
            stepup.step_up_check(board=work.board, person=person, task=task)
        lifecycle.decide(work, task, approve=approve, note=note, version=version)
        if note and task.approval_requested_by:
            # The person's note reaches the agent that asked (its inbox, ``unread``).
            verdict = "approved" if approve else "denied"
            body = f"#{task.number} “{task.subject}” {verdict} by {person}: {note}"
            Message.objects.create(
                board=work.board,
                recipient=task.approval_requested_by,
                sender=person,
                task_number=task.number,
                body=body,
            )
            work.record(
                EventKind.MESSAGE, task.number, to=task.approval_requested_by, body=shown(body)
            )
    return Outcome(task.number, work.changes)


def approval_require(*, board: Board, person: str, task_id: str | int, required: bool) -> Outcome:
    """A person marks a task as needing approval before it starts (or lifts that)."""
    with unit_of_work(board, person, person=True) as work:
        task = work.task(task_id)
        if task.approval_required != required:
            task.approval_required = required
            if not required and task.approval_state == ApprovalState.REQUESTED:
                task.approval_state = ApprovalState.NONE
            work.save_task(task, EventKind.UPDATED, fields={"approvalRequired": {"to": required}})
    return Outcome(task.number, work.changes)

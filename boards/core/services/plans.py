"""A coding client's own plan as cards (SPEC §11): each task of a session's list is one
card, owned by the session's agent, kept in step with the client's tasks.

A card is keyed by (board, plan, the client's task id), the plan being the shared task
list or else the session, so a replayed or compacted session's events find the card they
made instead of making another.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q

from boards.core import limits
from boards.core.errors import ServiceError
from boards.core.rules import awaits_person
from boards.core.services import lifecycle
from boards.core.services.tasks import _create, _update
from boards.core.services.work import Work, unit_of_work
from boards.core.states import TERMINAL_STATUSES
from boards.models import ApprovalState, Board, Status, Task

logger = logging.getLogger(__name__)

STATUSES = {
    "pending": Status.PENDING,
    "in_progress": Status.IN_PROGRESS,
    "completed": Status.COMPLETED,
    "deleted": Status.CANCELLED,
}
ID_MAX = 128


@dataclass(frozen=True)
class PlanStep:
    """What one client event says of one of its tasks ("" and None: it does not say)."""

    client_task_id: str
    subject: str = ""
    description: str | None = None
    active_form: str | None = None
    status: str | None = None
    blocked_by: Sequence[str] = ()


def _card(work: Work, plan: str, client_task_id: str, session: str = "") -> Task | None:
    """The card of the client's task in ``plan`` (or, given ``session``, one the session
    made in a shared list: a command hook does not know the list's name)."""
    where = Q(client_plan=plan) | Q(session=session) if session else Q(client_plan=plan)
    return (
        Task.objects.select_for_update()
        .filter(where, board=work.board, client_task_id=client_task_id)
        .order_by("-number")
        .first()
    )


def _apply(work: Work, session: str, plan: str, step: PlanStep) -> None:
    task = _card(work, plan, step.client_task_id)
    if task is None:
        if not step.subject:
            return  # an update of a task made before the board saw the session
        task = _create(
            work,
            subject=step.subject[: limits.SUBJECT_MAX],
            description=(step.description or "")[: limits.LONG_TEXT_MAX],
            active_form=(step.active_form or "")[: limits.SUBJECT_MAX],
            owner=work.actor,
            session=session,
            client_plan=plan,
            client_task_id=step.client_task_id,
        )
    fields: dict = {}
    if step.subject and step.subject != task.subject:
        fields["subject"] = step.subject[: limits.SUBJECT_MAX]
    if step.description is not None:
        fields["description"] = step.description[: limits.LONG_TEXT_MAX]
    if step.active_form is not None:
        fields["active_form"] = step.active_form[: limits.SUBJECT_MAX]
    if step.status in STATUSES:
        fields["status"] = STATUSES[step.status]
    if fields.get("status") == Status.COMPLETED and _completed_unasked(work, task):
        del fields["status"]  # the card waits for the person, who now sees it asked
    blockers = [
        n
        for n in Task.objects.filter(
            board=work.board, client_plan=plan, client_task_id__in=list(step.blocked_by)
        ).values_list("number", flat=True)
        if n != task.number
    ]
    if blockers:
        fields["add_blocked_by"] = blockers
    if fields:
        _update(work, task, fields)


def _completed_unasked(work: Work, task: Task) -> bool:
    """The session completed a card that waits for a person's approval, though the board
    refused it no completion (its ``TaskCompleted`` check never answered: the client
    goes on when that hook fails, killed or timed out). The completion is not the
    session's to make, and not to be dropped without a word either: the approval is asked
    for (a Needs-you item), unless it already is. True when the card stays as it is."""
    if task.status in TERMINAL_STATUSES or not awaits_person(task):
        return False
    if task.approval_state not in (ApprovalState.REQUESTED, ApprovalState.DENIED):
        lifecycle.request_approval(
            work,
            task,
            f"{work.actor} completed “{task.subject[:200]}” in its session without the "
            "board's approval: approve it, then complete the card",
        )
    return True


def plan_apply(
    *, board: Board, agent: str, session: str, plan: str, steps: Sequence[PlanStep]
) -> None:
    """Keep a session's plan in step with what its client says of its tasks: a task not
    seen before is a new card owned by ``agent``; a known one is updated (a status the
    board's rules refuse is left as it is, since the client has already moved on; a
    completion of a card that waits for a person asks for the approval). Each step is
    its own unit of work."""
    for step in steps:
        if not step.client_task_id:
            continue
        try:
            with unit_of_work(board, agent) as work:
                _apply(work, session[:ID_MAX], plan[:ID_MAX], step)
        except ServiceError as error:
            logger.info("plan of session %s: step %s left: %s", session[:40], step, error)


def plan_complete(*, board: Board, agent: str, session: str, plan: str, step: PlanStep) -> str:
    """The session is about to complete one of its tasks (Claude Code's ``TaskCompleted``,
    which the board may refuse). Returns why it may not ("" when it may): its card waits
    for a person's approval, which is then asked for (a Needs-you item) unless it already
    is. Once a person approved it, the card is completed here."""
    with unit_of_work(board, agent) as work:
        task = _card(work, plan[:ID_MAX], step.client_task_id, session[:ID_MAX])
        if task is None or not awaits_person(task) or task.status in TERMINAL_STATUSES:
            if task is None:
                _apply(work, session[:ID_MAX], plan[:ID_MAX], step)
            return ""
        if task.approval_state == ApprovalState.DENIED:
            note = f": {task.approval_note}" if task.approval_note else ""
            return (
                f"Card #{task.number} “{task.subject}” was denied by "
                f"{task.approval_decided_by or 'a person'} on the board{note}. "
                "Do not complete it; ask a person on the board."
            )
        if task.approval_state != ApprovalState.REQUESTED:
            lifecycle.request_approval(
                work, task, f"{agent} wants to complete “{task.subject[:200]}”"
            )
        return (
            f"Card #{task.number} “{task.subject}” needs a person's approval on the board "
            "before it is completed; the approval is requested. Do not mark it completed "
            "until a person approves it: go on with other work, then try again."
        )

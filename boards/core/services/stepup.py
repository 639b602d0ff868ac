"""Step-up approvals (SPEC §14): what must not be approved by a tap.

A held tool call whose rule is marked step-up, or a gated task on a board whose setting
says so, is a step-up item. For a person who has a passkey, approving one — from any
door — needs a passkey assertion made for that item (its exact state) within
KANBAN_STEP_UP_SECONDS; denying never does, and a person with no passkey approves as
before. The assertion itself is verified above (``boards.push.passkeys``), which records
it here (``step_up_record``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from boards.core.errors import PermissionDenied
from boards.core.services import pushes
from boards.core.services.work import unit_of_work
from boards.core.states import EventKind
from boards.models import Board, CallState, Passkey, StepUp, Task, ToolCall


def call_key(call: ToolCall) -> str:
    """A held call's name as pushes and step-ups know it; a call that ran without the
    board's verdict is another item (its approval's push is withdrawn, its own sent)."""
    return f"call-{call.pk}-ran" if call.state == CallState.RAN else f"call-{call.pk}"


def task_key(task: Task) -> str:
    """A task in one exact state: its number and version."""
    return f"task-{task.number}@{task.version}"


def is_step_up(board: Board, *, call: ToolCall | None = None, task: Task | None = None) -> bool:
    """Whether approving this item is a step-up."""
    if call is not None:
        # The rule's flag as it is now (made step-up after the call was held: the
        # approval needs the passkey); a rule deleted since leaves it as it was then.
        rule = call.gate_rule if call.gate_rule_id is not None else None
        return rule.step_up if rule is not None else call.step_up
    return task is not None and board.step_up_approvals


def _user(person: Any) -> Any:
    if isinstance(person, str):
        return get_user_model().objects.filter(username=person).first()
    return person


def step_up_needed(*, user: Any, board: Board, item_key: str, step_up: bool = True) -> bool:
    """Whether approving the item needs an assertion the person has not made yet: it is
    a step-up item, they have a passkey, and none was made for it lately."""
    user = _user(user)
    if not step_up or user is None or not Passkey.objects.filter(user=user).exists():
        return False
    since = timezone.now() - timedelta(seconds=settings.KANBAN_STEP_UP_SECONDS)
    made = StepUp.objects.filter(user=user, board=board, item=item_key, at__gte=since)
    return not made.exists()


def step_up_check(
    *, board: Board, person: Any, call: ToolCall | None = None, task: Task | None = None
) -> None:
    """Refuse (403 ``step_up_required``) a person's approval that needs a passkey first."""
    if not is_step_up(board, call=call, task=task):
        return
    key = call_key(call) if call is not None else task_key(task)  # type: ignore[arg-type]
    if step_up_needed(user=person, board=board, item_key=key):
        raise PermissionDenied(
            "Approving this needs your passkey: confirm it with your passkey for this item, "
            "then approve (denying needs none)",
            code="step_up_required",
        )


def step_up_record(*, user: Any, board: Board, item_key: str) -> StepUp:
    """Keep that ``user`` made a passkey assertion for the item now (verified by the
    caller), and say so in the board's event log (``step_up``)."""
    with unit_of_work(board, user.get_username(), person=True) as work:
        made = StepUp.objects.create(user=user, board=work.board, item=item_key, at=work.now)
        pushes.record_item(work, EventKind.STEP_UP, item_key)
    return made

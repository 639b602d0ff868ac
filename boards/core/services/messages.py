"""Messages from people to agents, queued until the agent reads its inbox."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from boards.core import events, limits
from boards.core.services import agents
from boards.core.services.work import NAME_MAX, shown, text, unit_of_work
from boards.core.states import EventKind
from boards.models import Board, Message


def message_send(
    *, board: Board, sender: str, recipient: str, body: str, task_id: str | int | None = None
) -> Message:
    """Queue a person's message for an agent, optionally about a task."""
    recipient = text("recipient", recipient, NAME_MAX, required=True)
    recipient = agents.checked_name(board, recipient, field="recipient")
    body = text("body", body, limits.MESSAGE_MAX, required=True)
    with unit_of_work(board, sender, person=True) as work:
        about = work.task(task_id, field="task") if task_id is not None and task_id != "" else None
        number = about.number if about else None
        message = Message.objects.create(
            board=work.board, recipient=recipient, sender=sender, task_number=number, body=body
        )
        work.record(EventKind.MESSAGE, number, to=recipient, body=shown(body))
    return message


def inbox_read(*, board: Board, agent: str, ack: bool = False) -> list[Message]:
    """The agent's unread messages, oldest first; ``ack`` marks them read."""
    with transaction.atomic():
        messages = list(
            Message.objects.filter(board=board, recipient=agent, read_at__isnull=True).order_by(
                "created_at", "id"
            )
        )
        if ack and messages:
            Message.objects.filter(pk__in=[m.pk for m in messages]).update(read_at=timezone.now())
            # The people who sent them see them read (the board's message box).
            events.publish(board, [], [], header=True)
    return messages

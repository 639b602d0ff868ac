"""The canonical tools (SPEC §4): each validated input mapped onto one service or selector.

A handler takes the authenticated ``Caller`` and its validated input model and
returns an ``Answer``. Validation, identity, ``unreadMessages`` and error mapping
are the tool pipeline's (``boards.tools``), which every door goes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from . import schemas, selectors, services
from .auth import Caller
from .errors import InvalidInput, TooManyRequests
from .events import listening
from .models import TERMINAL_STATUSES, ApprovalState, Board, Event

logger = logging.getLogger(__name__)


@dataclass
class Answer:
    body: dict[str, Any]
    status: int = 200


def _task(board: Board, number: int | None, *, children: bool = True) -> dict | None:
    if number is None:
        return None
    return selectors.task_to_dict(selectors.task_view(board, number), with_children=children)


def _counts(board: Board) -> dict[str, int]:
    return selectors.board_counts(board)


def _written(caller: Caller, outcome: services.Outcome) -> Answer:
    return Answer({"task": _task(caller.board, outcome.task_number), "changes": outcome.changes})


def handle_task_create(caller: Caller, data: schemas.TaskCreateInput) -> Answer:
    outcome = services.task_create(
        board=caller.board,
        actor=caller.agent,
        subject=data.subject,
        description=data.description,
        active_form=data.activeForm,
        blocked_by=data.blockedBy,
        blocks=data.blocks,
        parent_id=data.parentId,
        metadata=data.metadata,
        prompt=data.prompt,
        requires_approval=data.requiresApproval,
        priority=data.priority,
    )
    return _written(caller, outcome)


def handle_task_get(caller: Caller, data: schemas.TaskGetInput) -> Answer:
    number = selectors.parse_task_id(data.taskId)
    task = _task(caller.board, number)
    assert task is not None
    task["approval"]["history"] = selectors.approval_history(caller.board, number)
    view = selectors.task_view(caller.board, number)
    task["attempts"] = selectors.attempts(view.task)
    task["readiness"] = selectors.readiness(caller.board, view.task)
    return Answer({"task": task})


def handle_task_update(caller: Caller, data: schemas.TaskUpdateInput) -> Answer:
    outcome = services.task_update(
        board=caller.board, actor=caller.agent, task_id=data.taskId, **schemas.update_kwargs(data)
    )
    return _written(caller, outcome)


def handle_task_list(caller: Caller, data: schemas.TaskListInput) -> Answer:
    page = selectors.task_page(
        caller.board,
        view=data.view,
        status=data.status,
        owner=data.owner,
        blocked=data.blocked,
        parent_id=int(data.parentId) if data.parentId else None,
        tree=data.tree,
        limit=data.limit,
        cursor=data.cursor,
    )
    body: dict[str, Any] = {
        "total": page.total,
        "counts": _counts(caller.board),
        "nextCursor": page.next_cursor,
    }
    if data.format == "text":
        body["text"] = selectors.tasks_as_text(page.views)
    elif data.detail:
        body["tasks"] = [selectors.task_to_dict(v) for v in page.views]
    else:
        body["tasks"] = [selectors.task_summary(v) for v in page.views]
    return Answer(body)


def handle_task_claim(caller: Caller, data: schemas.TaskClaimInput) -> Answer:
    if data.taskId is None:
        outcome = services.task_claim_next(
            board=caller.board, agent=caller.agent, lease_seconds=data.leaseSeconds
        )
        if outcome.task_number is None:
            return Answer({"task": None, "changes": [], "message": "No task is ready to claim."})
    else:
        outcome = services.task_claim(
            board=caller.board,
            agent=caller.agent,
            task_id=data.taskId,
            lease_seconds=data.leaseSeconds,
        )
    answer = _written(caller, outcome)
    if outcome.awaiting_approval:
        answer.body["awaitingApproval"] = True
        answer.status = 202
    return answer


def handle_task_reassign(caller: Caller, data: schemas.TaskReassignInput) -> Answer:
    outcome = services.task_reassign(
        board=caller.board, actor=caller.agent, task_id=data.taskId, owner=data.owner
    )
    return _written(caller, outcome)


def _batch_op(op: schemas.BatchCreate | schemas.BatchUpdate | schemas.BatchDelete) -> dict:
    if isinstance(op, schemas.BatchCreate):
        return {
            "op": "create",
            "ref": op.ref,
            "subject": op.subject,
            "description": op.description,
            "active_form": op.activeForm,
            "blocked_by": op.blockedBy,
            "blocks": op.blocks,
            "parent_id": op.parentId,
            "metadata": op.metadata,
            "prompt": op.prompt,
            "requires_approval": op.requiresApproval,
            "priority": op.priority,
        }
    if isinstance(op, schemas.BatchUpdate):
        return {"op": "update", "task_id": op.taskId, **schemas.update_kwargs(op)}
    return {"op": "delete", "task_id": op.taskId}


def handle_task_batch(caller: Caller, data: schemas.TaskBatchInput) -> Answer:
    outcome = services.task_batch(
        board=caller.board, actor=caller.agent, ops=[_batch_op(op) for op in data.ops]
    )
    return Answer(
        {
            "operations": outcome.operations,
            "changes": outcome.changes,
            "counts": _counts(caller.board),
        }
    )


def handle_task_request_approval(caller: Caller, data: schemas.TaskRequestApprovalInput) -> Answer:
    outcome = services.approval_request(
        board=caller.board, agent=caller.agent, task_id=data.taskId, reason=data.reason
    )
    return _written(caller, outcome)


def handle_inbox_read(caller: Caller, data: schemas.InboxReadInput) -> Answer:
    messages = services.inbox_read(board=caller.board, agent=caller.agent, ack=data.ack)
    return Answer(
        {
            "messages": [
                {
                    "id": m.pk,
                    "from": m.sender,
                    "taskId": str(m.task_number) if m.task_number else None,
                    "body": m.body,
                    "sentAt": selectors.iso(m.created_at),
                }
                for m in messages
            ],
            "acknowledged": data.ack,
        }
    )


def _watch_state(
    caller: Caller, number: int, start_state: str | None
) -> tuple[bool, dict | None, str]:
    """(finished?, task, approval state) for a watched task."""
    views = selectors.task_views(caller.board, [number])
    view = views.get(number)
    if view is None:
        if start_state is None:
            selectors.task_view(caller.board, number)  # raises NotFound
        return True, None, ""
    task = view.task
    state = task.approval_state
    done = task.status in TERMINAL_STATUSES
    if start_state is None:
        # The caller's own request was decided just before it started watching.
        last = (
            Event.objects.filter(board=caller.board, task_number=number)
            .order_by("-seq")
            .values_list("kind", flat=True)
            .first()
        )
        done = done or (
            last in ("approved", "denied") and task.approval_requested_by == caller.agent
        )
    elif start_state == ApprovalState.REQUESTED and state != ApprovalState.REQUESTED:
        done = True
    return done, selectors.task_to_dict(view, with_children=True), state


# Without the channel layer (Redis down) a watch degrades to reading the task this often.
WATCH_FALLBACK_POLL_SECONDS = 1.0


async def handle_task_watch(caller: Caller, data: schemas.TaskWatchInput) -> Answer:
    """Wait on the board's event stream (not a polling loop) until the task is done.

    Each database read is a short ``database_sync_to_async`` call that gives its
    connection back, so a waiting watch holds neither a thread nor a connection.
    If the channel layer fails (Redis down), the watch still answers: it falls
    back to reading the task once a second until the layer is needed no more.
    """
    number = selectors.parse_task_id(data.taskId)
    with _watch_slot(caller):
        return await _watch(caller, number, data)


# Waiting watches per token in this process: each holds a channel and a socket.
_watching: Counter[int | None] = Counter()


@contextlib.contextmanager
def _watch_slot(caller: Caller) -> Iterator[None]:
    limit = settings.KANBAN_WATCHES_PER_TOKEN
    if caller.token_id is not None and _watching[caller.token_id] >= limit:
        raise TooManyRequests(
            f"This token already has {limit} TaskWatch calls waiting; wait on fewer tasks at once",
            code="too_many_watches",
        )
    _watching[caller.token_id] += 1
    try:
        yield
    finally:
        _watching[caller.token_id] -= 1


async def _watch(caller: Caller, number: int, data: schemas.TaskWatchInput) -> Answer:
    timeout = min(float(data.timeoutSeconds), settings.KANBAN_WATCH_MAX_SECONDS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    read = database_sync_to_async(_watch_state)
    async with listening(caller.board.pk, "TaskWatch") as (layer, channel):
        done, task, start_state = await read(caller, number, None)
        while not done:
            remaining = deadline - loop.time()
            if remaining <= 0:
                _, task, _ = await read(caller, number, start_state)
                return Answer({"task": task, "timedOut": True})
            if not channel:
                await asyncio.sleep(min(remaining, WATCH_FALLBACK_POLL_SECONDS))
                done, task, _ = await read(caller, number, start_state)
                continue
            try:
                message = await asyncio.wait_for(layer.receive(channel), remaining)
            except TimeoutError:
                continue
            except Exception:
                logger.warning(
                    "TaskWatch on board %s: channel layer failed, polling", caller.board.pk
                )
                channel = ""
                continue
            if any(
                e.get("taskId") == str(number) or e.get("kind") == "reset"
                for e in message.get("events", ())
            ):
                done, task, _ = await read(caller, number, start_state)
        return Answer(
            {"task": task, "timedOut": False, **({"deleted": True} if task is None else {})}
        )


def handle_task_heartbeat(caller: Caller, data: schemas.TaskHeartbeatInput) -> Answer:
    if data.usage is not None and data.taskId is None:
        raise InvalidInput(
            "usage: needs taskId (the task the usage was spent on)",
            details=[{"field": "usage", "message": "needs taskId"}],
        )
    leases = services.task_heartbeat(
        board=caller.board,
        agent=caller.agent,
        task_id=data.taskId,
        usage=data.usage.model_dump() if data.usage is not None else None,
    )
    return Answer({"leases": leases})


HANDLERS: dict[str, Any] = {
    "TaskCreate": handle_task_create,
    "TaskGet": handle_task_get,
    "TaskUpdate": handle_task_update,
    "TaskList": handle_task_list,
    "TaskClaim": handle_task_claim,
    "TaskReassign": handle_task_reassign,
    "TaskBatch": handle_task_batch,
    "TaskWatch": handle_task_watch,
    "TaskRequestApproval": handle_task_request_approval,
    "InboxRead": handle_inbox_read,
    "TaskHeartbeat": handle_task_heartbeat,
}

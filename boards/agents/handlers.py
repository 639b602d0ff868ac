"""The canonical tools (SPEC §4): each validated input mapped onto one service or selector.

Each tool is declared once, on its handler: ``@tool(name=..., input=..., answer=...,
hints=...)`` (``schemas.tool``), its description the input model's docstring. That one
registry is what the doors (HTTP, MCP), the tool listings, the OpenAPI document and the
Connect page read. A handler takes the authenticated ``Caller`` and its validated input
model and returns an ``Answer``; the model's snake_case fields are the services' keyword
arguments (``**data.model_dump()``). Validation, identity, ``unreadMessages`` and error
mapping are the tool pipeline's (``boards.agents.pipeline``), which every door goes through.
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

from boards.agents.answers import (
    BatchAnswer,
    HeartbeatAnswer,
    InboxAnswer,
    TaskGetAnswer,
    TaskListAnswer,
    WatchAnswer,
    Written,
)
from boards.agents.schemas import (
    BatchCreate,
    BatchDelete,
    BatchUpdate,
    Hints,
    InboxReadInput,
    TaskBatchInput,
    TaskClaimInput,
    TaskCreateInput,
    TaskGetInput,
    TaskHeartbeatInput,
    TaskListInput,
    TaskReassignInput,
    TaskRequestApprovalInput,
    TaskUpdateInput,
    TaskWatchInput,
    tool,
)
from boards.core import fulltext, selectors, services
from boards.core.auth import Caller
from boards.core.errors import InvalidInput, TooManyRequests
from boards.core.events import listening
from boards.core.states import EventKind
from boards.models import TERMINAL_STATUSES, ApprovalState, Board, Event

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
    # The view the write built in its transaction, else the task read again.
    task: dict | None
    if outcome.view is not None:
        task = selectors.task_to_dict(outcome.view, with_children=True)
    else:
        task = _task(caller.board, outcome.task_number)
    return Answer({"task": task, "changes": outcome.changes})


@tool(name="TaskCreate", input=TaskCreateInput, answer=Written, hints=Hints("Create a task"))
def handle_task_create(caller: Caller, data: TaskCreateInput) -> Answer:
    outcome = services.task_create(board=caller.board, actor=caller.agent, **data.model_dump())
    return _written(caller, outcome)


@tool(
    name="TaskGet",
    input=TaskGetInput,
    answer=TaskGetAnswer,
    hints=Hints("Read a task", read_only=True, idempotent=True),
)
def handle_task_get(caller: Caller, data: TaskGetInput) -> Answer:
    number = selectors.parse_task_id(data.task_id)
    view = selectors.task_view(caller.board, number)  # read once: the answer and its extras
    task = selectors.task_to_dict(view, with_children=True)
    task["approval"]["history"] = selectors.approval_history(caller.board, number)
    task["attempts"] = selectors.attempts(view.task)
    task["readiness"] = selectors.readiness(caller.board, view.task)
    return Answer({"task": task})


@tool(
    name="TaskUpdate",
    input=TaskUpdateInput,
    answer=Written,
    hints=Hints("Update or delete a task", destructive=True),
)
def handle_task_update(caller: Caller, data: TaskUpdateInput) -> Answer:
    # Only the fields the agent sent change.
    fields = data.model_dump(exclude_unset=True)
    outcome = services.task_update(board=caller.board, actor=caller.agent, view=True, **fields)
    return _written(caller, outcome)


@tool(
    name="TaskList",
    input=TaskListInput,
    answer=TaskListAnswer,
    hints=Hints("List the board's tasks", read_only=True, idempotent=True),
)
def handle_task_list(caller: Caller, data: TaskListInput) -> Answer:
    filters = data.model_dump(exclude={"format", "detail", "parent_id"})
    parent_id = int(data.parent_id) if data.parent_id else None
    page = selectors.task_page(caller.board, parent_id=parent_id, **filters)
    body: dict[str, Any] = {
        "total": page.total,
        "counts": _counts(caller.board),
        "nextCursor": page.next_cursor,
    }
    if data.format == "text":
        body["text"] = selectors.tasks_as_text(page.views, matches=_matches(page))
    elif data.detail:
        body["tasks"] = [selectors.task_to_dict(v) for v in page.views]
    else:
        body["tasks"] = [selectors.task_summary(v) for v in page.views]
    if data.query is not None and "tasks" in body:
        matches = _matches(page)
        for task in body["tasks"]:
            task["match"] = matches.get(int(task["id"]), "")
    return Answer(body)


def _matches(page: selectors.TaskPage) -> dict[int, str]:
    """A search's snippets with the matched words in **bold**."""
    return {n: fulltext.highlighted(s, "**", "**") for n, s in page.matches.items()}


@tool(
    name="TaskClaim",
    input=TaskClaimInput,
    answer=Written,
    hints=Hints("Claim a task and start it"),
    accepted="Claim recorded as an approval request",
)
def handle_task_claim(caller: Caller, data: TaskClaimInput) -> Answer:
    if data.task_id is None:
        outcome = services.task_claim_next(
            board=caller.board, agent=caller.agent, lease_seconds=data.lease_seconds
        )
        if outcome.task_number is None:
            return Answer({"task": None, "changes": [], "message": "No task is ready to claim."})
    else:
        outcome = services.task_claim(board=caller.board, agent=caller.agent, **data.model_dump())
    answer = _written(caller, outcome)
    if outcome.awaiting_approval:
        answer.body["awaitingApproval"] = True
        answer.status = 202
    return answer


@tool(
    name="TaskReassign",
    input=TaskReassignInput,
    answer=Written,
    hints=Hints("Hand a task to another agent", destructive=True),
)
def handle_task_reassign(caller: Caller, data: TaskReassignInput) -> Answer:
    outcome = services.task_reassign(board=caller.board, actor=caller.agent, **data.model_dump())
    return _written(caller, outcome)


def _batch_op(op: BatchCreate | BatchUpdate | BatchDelete) -> dict[str, Any]:
    # A create takes every field (with its defaults); an update changes only those sent.
    return op.model_dump(exclude_unset=isinstance(op, BatchUpdate))


@tool(
    name="TaskBatch",
    input=TaskBatchInput,
    answer=BatchAnswer,
    hints=Hints("Apply many changes at once", destructive=True),
)
def handle_task_batch(caller: Caller, data: TaskBatchInput) -> Answer:
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
            last in (EventKind.APPROVED, EventKind.DENIED)
            and task.approval_requested_by == caller.agent
        )
    elif start_state == ApprovalState.REQUESTED and state != ApprovalState.REQUESTED:
        done = True
    return done, selectors.task_to_dict(view, with_children=True), state


# Without the channel layer (Redis down) a watch degrades to reading the task this often.
WATCH_FALLBACK_POLL_SECONDS = 1.0


@tool(
    name="TaskWatch",
    input=TaskWatchInput,
    answer=WatchAnswer,
    hints=Hints("Wait for a task", read_only=True, idempotent=True),
)
async def handle_task_watch(caller: Caller, data: TaskWatchInput) -> Answer:
    """Wait on the board's event stream (not a polling loop) until the task is done.

    Each database read is a short ``database_sync_to_async`` call that gives its
    connection back, so a waiting watch holds neither a thread nor a connection.
    If the channel layer fails (Redis down), the watch still answers: it falls
    back to reading the task once a second until the layer is needed no more.
    """
    number = selectors.parse_task_id(data.task_id)
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


async def _watch(caller: Caller, number: int, data: TaskWatchInput) -> Answer:
    timeout = min(float(data.timeout_seconds), settings.KANBAN_WATCH_MAX_SECONDS)
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
                e.get("taskId") == str(number) or e.get("kind") == EventKind.RESET
                for e in message.get("events", ())
            ):
                done, task, _ = await read(caller, number, start_state)
        return Answer(
            {"task": task, "timedOut": False, **({"deleted": True} if task is None else {})}
        )


@tool(
    name="TaskRequestApproval",
    input=TaskRequestApprovalInput,
    answer=Written,
    hints=Hints("Ask a person to approve"),
)
def handle_task_request_approval(caller: Caller, data: TaskRequestApprovalInput) -> Answer:
    outcome = services.approval_request(board=caller.board, agent=caller.agent, **data.model_dump())
    return _written(caller, outcome)


@tool(
    name="InboxRead",
    input=InboxReadInput,
    answer=InboxAnswer,
    # ack: true marks messages read, so the tool as a whole is not read-only.
    hints=Hints("Read messages from people", idempotent=True),
)
def handle_inbox_read(caller: Caller, data: InboxReadInput) -> Answer:
    messages = services.inbox_read(board=caller.board, agent=caller.agent, **data.model_dump())
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


@tool(
    name="TaskHeartbeat",
    input=TaskHeartbeatInput,
    answer=HeartbeatAnswer,
    hints=Hints("Keep my claims alive", idempotent=True),
)
def handle_task_heartbeat(caller: Caller, data: TaskHeartbeatInput) -> Answer:
    if data.usage is not None and data.task_id is None:
        raise InvalidInput(
            "usage: needs taskId (the task the usage was spent on)",
            details=[{"field": "usage", "message": "needs taskId"}],
        )
    leases = services.task_heartbeat(board=caller.board, agent=caller.agent, **data.model_dump())
    return Answer({"leases": leases})

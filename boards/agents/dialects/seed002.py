"""Seed 002's tool set on the tool endpoint (SPEC §4 "Seed dialects"):
``<ns>_tasks_create / _list / _get / _claim / _update / _watch``, in any alphanumeric
namespace ``<ns>``.

- ``title`` ↔ subject, ``assignee`` ↔ owner, ``created_by`` ↔ createdBy; ids are
  shown as ``task-N`` and accepted as ``task-N``, ``N`` or the integer N.
- Create refuses a status other than pending, an assignee, and (from the services)
  unknown or self ``blocked_by`` ids. It answers ``{"id": "task-1"}``.
- Claim and update answer the JSON string ``"ok"``; list answers a bare JSON array
  sorted by number (not the Go string order, where ``task-10`` sorts before
  ``task-2``). These bare answers carry no ``unreadMessages``; object answers do.
- Update's ``blocked_by`` replaces the list (added and removed edges go through the
  services, so unknown ids are refused, unlike the Go store). Its statuses are
  ours: pending, in_progress, completed, failed, cancelled.
- A claim of a task that needs approval records the request (as TaskClaim does) and
  answers 202 with a string saying so, instead of ``"ok"``.
- Watch waits until the task is completed, failed or cancelled and answers the task;
  an approval decision alone does not end it. It gives up after
  ``KANBAN_WATCH_MAX_SECONDS`` with 408 ``watch_timeout`` (the Go store's context
  deadline), after which the agent calls it again. A deleted task answers 404.
- Error messages name ids the seed's way: ``task-3 is owned by bob``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from django.conf import settings
from pydantic import BeforeValidator, Field, StrictBool, WithJsonSchema

from boards.agents import handlers, schemas
from boards.agents.dialects.common import SEED002, BareAnswer
from boards.agents.handlers import Answer
from boards.agents.schemas import Handler, tool
from boards.core import limits, numbers, selectors, services
from boards.core.auth import Caller
from boards.core.errors import InvalidInput, NotFound, ServiceError
from boards.models import TERMINAL_STATUSES, Status


def _seed002_id(value: Any) -> Any:
    """Seed 002 names tasks "task-3"; the rest is the one reading (``numbers.task_text``)."""
    if isinstance(value, str):
        value = value.strip().removeprefix("task-")
    text = numbers.task_text(value)
    number = numbers.spelled(text) if isinstance(text, str) else None
    if number is None:
        raise ValueError('must be a task id like "task-3"')
    return str(number)


Seed002Id = Annotated[
    str,
    BeforeValidator(_seed002_id),
    WithJsonSchema({"type": "string", "description": 'A task id, e.g. "task-3".'}),
]
Seed002Ids = Annotated[list[Seed002Id], Field(max_length=limits.IDS_MAX)]
Assignee = Annotated[str, Field(max_length=limits.NAME_MAX)]


class Seed002Create(schemas.ToolInput):
    """Create a task on the shared board; answers {"id": "task-1"}. New tasks are pending and
    unassigned: a status other than pending, an assignee, or a blocked_by id that does not exist
    (or is the task itself) is refused. blocked_by lists tasks that must complete first."""

    title: schemas.Subject = Field(description='Short imperative title, e.g. "Fix auth bug".')
    description: schemas.Long = Field("", description="What needs to be done, in detail.")
    blocked_by: Seed002Ids = Field(
        [], description='Ids of tasks that must complete before this one, e.g. ["task-1"].'
    )
    metadata: schemas.Metadata | None = None
    status: schemas.Status | None = Field(
        None, description="New tasks are always pending; any other status is refused."
    )
    assignee: Assignee | None = Field(
        None, description="Refused: new tasks are unassigned; claim the task after creating it."
    )


class Seed002List(schemas.ToolInput):
    """List tasks as a JSON array sorted by id, filtered by status, assignee and blocked. To find
    work: {"status": "pending", "blocked": false}."""

    status: schemas.Status | None = None
    assignee: Assignee | None = Field(None, description='Only tasks of this agent ("" = none).')
    blocked: StrictBool | None = Field(
        None, description="true: only blocked tasks; false: only tasks free to start."
    )


class Seed002ById(schemas.ToolInput):
    id: Seed002Id


class Seed002Get(Seed002ById):
    """Read one task in full by id."""


class Seed002Claim(Seed002ById):
    """Atomically assign a task to yourself and start it (in_progress); answers "ok". Exactly one
    of many concurrent claimers wins. Fails when the task is blocked, assigned to another agent,
    or finished; claiming your own task again is a no-op."""


class Seed002Watch(Seed002ById):
    __doc__ = (
        "Wait until a task is completed, failed or cancelled and return it. After "
        f"{settings.KANBAN_WATCH_MAX_SECONDS} seconds it gives up with an error; call it again."
    )


class Seed002Update(schemas.ToolInput):
    """Change a task's status, description, blockers or metadata; answers "ok". Complete your work
    with {"id": ..., "status": "completed"} (or "failed"); completing a task unblocks the tasks
    waiting for it. blocked_by replaces the list; metadata is merged key by key and null removes
    a key."""

    id: Seed002Id
    status: schemas.Status | None = None
    description: schemas.Long | None = None
    blocked_by: Seed002Ids | None = Field(
        None, description="Replaces the task's blockers ([] removes them all)."
    )
    metadata: schemas.Metadata | None = None


def _as_task_n(message: str) -> str:
    """``Task #3 is blocked by #1`` → ``task-3 is blocked by task-1``."""
    return re.sub(r"#([0-9]+)", r"task-\1", re.sub(r"\b[Tt]ask #([0-9]+)", r"task-\1", message))


@contextmanager
def _task_n_errors() -> Iterator[None]:
    try:
        yield
    except ServiceError as exc:
        exc.message = _as_task_n(exc.message)
        raise


def _seed002_task(task: dict[str, Any]) -> dict[str, Any]:
    """A canonical task dict in the Go store's JSON (``omitempty`` fields left out)."""
    data: dict[str, Any] = {"id": f"task-{task['id']}", "title": task["subject"]}
    if task["description"]:
        data["description"] = task["description"]
    data["status"] = task["status"]
    if task["owner"]:
        data["assignee"] = task["owner"]
    if task["blockedBy"]:
        data["blocked_by"] = [f"task-{n}" for n in task["blockedBy"]]
    if task["metadata"]:
        data["metadata"] = task["metadata"]
    if task["createdBy"]:
        data["created_by"] = task["createdBy"]
    return data


def _seed002_view(caller: Caller, number: int) -> dict[str, Any]:
    return selectors.task_to_dict(selectors.task_view(caller.board, number))


ANY_NAMESPACE = (
    " The board_ prefix is a namespace: any alphanumeric one works the same way "
    "(<ns>_tasks_{0}, e.g. myteam_tasks_{0})."
)


def seed002_tool(*, name: str, input: type[schemas.ToolInput]) -> Callable[[Handler], Handler]:
    """Declare seed 002's ``board_tasks_<action>``, which any ``<ns>_tasks_<action>`` calls
    (the handler gets ``ns``)."""
    action = name.removeprefix("board_tasks_")
    return tool(
        name=name,
        input=input,
        dialect=SEED002,
        pattern=rf"^(?P<ns>[A-Za-z0-9]+)_tasks_{action}$",
        description=schemas.one_paragraph(input.__doc__) + ANY_NAMESPACE.format(action),
    )


@seed002_tool(name="board_tasks_create", input=Seed002Create)
def seed002_create(caller: Caller, data: Seed002Create, *, ns: str) -> Answer:
    problems = []
    if data.status not in (None, Status.PENDING):
        problems.append(
            ("status", f"a new task is always pending; create it, then call {ns}_tasks_update")
        )
    if data.assignee:
        problems.append(
            ("assignee", f"a new task is unassigned; create it, then call {ns}_tasks_claim")
        )
    if problems:
        raise InvalidInput(
            "; ".join(f"{name}: {text}" for name, text in problems),
            details=[{"field": name, "message": text} for name, text in problems],
        )
    with _task_n_errors():
        outcome = services.task_create(
            board=caller.board,
            actor=caller.agent,
            subject=data.title,
            description=data.description,
            blocked_by=data.blocked_by,
            metadata=data.metadata,
        )
    return Answer({"id": f"task-{outcome.task_number}"})


@seed002_tool(name="board_tasks_list", input=Seed002List)
def seed002_list(caller: Caller, data: Seed002List, *, ns: str) -> Answer:
    rows = selectors.task_rows(
        caller.board, status=data.status, owner=data.assignee, blocked=data.blocked
    )
    views = selectors.task_selection(caller.board, rows)
    return BareAnswer([_seed002_task(selectors.task_to_dict(v)) for v in views])


@seed002_tool(name="board_tasks_get", input=Seed002Get)
def seed002_get(caller: Caller, data: Seed002Get, *, ns: str) -> Answer:
    with _task_n_errors():
        return Answer(_seed002_task(_seed002_view(caller, int(data.id))))


@seed002_tool(name="board_tasks_claim", input=Seed002Claim)
def seed002_claim(caller: Caller, data: Seed002Claim, *, ns: str) -> Answer:
    with _task_n_errors():
        outcome = services.task_claim(board=caller.board, agent=caller.agent, task_id=data.id)
    if outcome.awaiting_approval:
        return BareAnswer(
            f"awaiting approval: a person must approve task-{data.id} before it starts; "
            f"{ns}_tasks_get shows when it is in_progress and yours",
            status=202,
        )
    return BareAnswer("ok")


@seed002_tool(name="board_tasks_update", input=Seed002Update)
def seed002_update(caller: Caller, data: Seed002Update, *, ns: str) -> Answer:
    added: list[str] = []
    removed: list[str] = []
    with _task_n_errors():
        if data.blocked_by is not None:  # replaces the list: add and remove the difference
            current = _seed002_view(caller, int(data.id))["blockedBy"]
            added = [n for n in data.blocked_by if n not in current]
            removed = [n for n in current if n not in data.blocked_by]
        services.task_update(
            board=caller.board,
            actor=caller.agent,
            task_id=data.id,
            status=data.status,
            description=data.description,
            metadata=data.metadata,
            add_blocked_by=added,
            remove_blocked_by=removed,
        )
    return BareAnswer("ok")


class WatchTimedOut(ServiceError):
    status = 408
    code = "watch_timeout"


@seed002_tool(name="board_tasks_watch", input=Seed002Watch)
async def seed002_watch(caller: Caller, data: Seed002Watch, *, ns: str) -> Answer:
    """Block until the task is finished, on the canonical TaskWatch's event stream."""
    # Seed 002 waits for a finished task, not for approval decisions. Watching as nobody in
    # particular skips TaskWatch's "your own request was just decided" early return, which
    # would otherwise answer again at once on every turn of this loop.
    watcher = Caller(board=caller.board, agent="", token_id=caller.token_id)
    loop = asyncio.get_running_loop()
    limit = float(settings.KANBAN_WATCH_MAX_SECONDS)
    deadline = loop.time() + limit
    with _task_n_errors():
        while True:
            remaining = min(max(deadline - loop.time(), 0.0), 300.0)
            watch = schemas.TaskWatchInput.model_validate(
                {"taskId": data.id, "timeoutSeconds": remaining}
            )
            answer = await handlers.handle_task_watch(watcher, watch)
            task = answer.body["task"]
            if task is None:
                raise NotFound(f"Task #{data.id} was deleted", code="task_deleted")
            if task["status"] in TERMINAL_STATUSES:
                return Answer(_seed002_task(task))
            if answer.body["timedOut"] or loop.time() >= deadline:
                raise WatchTimedOut(
                    f"Task #{data.id} is still {task['status']} after {limit:g} seconds; "
                    f"call {ns}_tasks_watch again to keep waiting"
                )

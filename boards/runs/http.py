"""The runners' doors (SPEC §16), transport only:

- ``POST /api/boards/<slug>/runners/hello``: a runner says who it is (runner token);
- ``POST /api/boards/<slug>/runners/poll``: its answers to the commands it was given, and
  the commands queued for it, held open (holding no thread) until one comes or the poll
  period ends;
- ``GET /api/boards/<slug>/runners``: every runner's presence (agent or runner token, or a
  member);
- ``POST /api/boards/<slug>/runners/<name>/ping`` (agent token) and ``GET
  /api/boards/<slug>/runners/<name>/commands/<id>``: a ping, and any command's state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic.alias_generators import to_camel

from boards.core import auth, permissions, selectors
from boards.core.errors import InvalidInput, MethodNotAllowed, ServiceError
from boards.core.events import listening
from boards.core.replies import error_response, parse_body, refused, validation_details
from boards.core.states import EventKind
from boards.models import Board, Runner, RunnerCommand
from boards.runs import selectors as runs_selectors
from boards.runs import services

logger = logging.getLogger(__name__)

Label = Annotated[str, StringConstraints(max_length=100)]
ClientName = Annotated[str, StringConstraints(min_length=1, max_length=32, pattern=r"^[a-z0-9-]+$")]
RepoName = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class _Input(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", populate_by_name=False)


class ClientInput(_Input):
    client: ClientName
    version: Label = ""
    gate: bool = False
    why: Annotated[str, StringConstraints(max_length=300)] = ""


class RepoInput(_Input):
    name: RepoName
    id: Annotated[str, StringConstraints(max_length=64)] = ""
    branch: Annotated[str, StringConstraints(max_length=200)] = ""


class HelloInput(_Input):
    """What a runner says of itself: never a path (its repositories by name and id)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    host: Label = ""
    version: Label = ""
    clients: Annotated[list[ClientInput], Field(max_length=20)] = []
    repos: Annotated[list[RepoInput], Field(max_length=50)] = []
    max_sessions: Annotated[int, Field(ge=1, le=64)] = 2


class AckInput(_Input):
    id: int
    ok: bool
    report: dict[str, Any] = {}
    why: Annotated[str, StringConstraints(max_length=2000)] = ""


class PollInput(_Input):
    acks: Annotated[list[AckInput], Field(max_length=services.ACKS_MAX)] = []
    running: Annotated[int, Field(ge=0, le=1000)] = 0
    # At most this many seconds held (default and most: the board's poll period).
    wait: Annotated[float, Field(ge=0)] | None = None


def _read(model: type[_Input], request: HttpRequest) -> Any:
    try:
        return model.model_validate(parse_body(request))
    except ValidationError as exc:
        details = validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid input: {summary}", details=details) from exc


def _json(body: dict[str, Any], status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, json_dumps_params={"ensure_ascii": False})


@csrf_exempt
def runner_hello(request: HttpRequest, slug: str) -> JsonResponse:
    if request.method != "POST":
        return error_response(MethodNotAllowed("Say hello with POST"))
    try:
        caller = auth.authenticate_runner(request.headers, slug)
        hello = _read(HelloInput, request)
        runner = services.runner_hello(
            board=caller.board,
            token=caller.token,
            name=hello.name or caller.name,
            host=hello.host,
            version=hello.version,
            clients=[c.model_dump() for c in hello.clients],
            repos=[r.model_dump() for r in hello.repos],
            max_sessions=hello.max_sessions,
        )
    except ServiceError as exc:
        return refused(exc, request)
    return _json(
        {
            "runner": runs_selectors.runner_to_dict(runner),
            "pollSeconds": services.poll_seconds(),
        }
    )


def _poll_receive(request: HttpRequest, slug: str) -> tuple[Runner, float]:
    """Authenticate, record the runner's answers and that it was seen (a worker thread)."""
    caller = auth.authenticate_runner(request.headers, slug)
    poll = _read(PollInput, request)
    runner = services.runner_of(caller.board, caller.token)
    runner.board = caller.board
    if poll.acks:
        services.commands_ack(runner=runner, acks=[a.model_dump() for a in poll.acks])
    services.runner_polled(runner=runner, running=poll.running)
    hold = services.poll_seconds()
    return runner, hold if poll.wait is None else min(poll.wait, hold)


async def _take(runner: Runner, hold: float) -> list[RunnerCommand]:
    """The runner's commands, at once when some are queued, else as soon as one is sent
    (the board's stream says so), or none once ``hold`` seconds have passed."""
    take = sync_to_async(services.commands_take)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + hold
    # Joined before the queue is read, so a command sent in between is not missed.
    async with listening(runner.board_id, "runner poll") as (layer, channel):
        closed = False
        while True:
            taken = await take(runner=runner)
            remaining = deadline - loop.time()
            if taken or remaining <= 0:
                return taken
            if not closed:
                # Held for a while: the request's database connection is given back.
                await sync_to_async(close_old_connections)()
                closed = True
            if not channel:
                await asyncio.sleep(min(remaining, 1.0))
                continue
            try:
                await asyncio.wait_for(_command_sent(layer, channel), remaining)
            except TimeoutError:
                continue
            except Exception:
                logger.warning("runner poll on board %s: channel layer failed", runner.board_id)
                channel = ""


async def _command_sent(layer: Any, channel: str) -> None:
    """Return once the board's stream carries a command for some runner."""
    while True:
        message = await layer.receive(channel)
        if any(e.get("kind") == EventKind.RUNNER_COMMAND for e in message.get("events", ())):
            return


@csrf_exempt
async def runner_poll(request: HttpRequest, slug: str) -> JsonResponse:
    """A runner's poll: answered at once with the commands queued for it, else held up to
    the poll period for one (``KANBAN_RUNNER_POLL_SECONDS``); each command is given once."""
    if request.method != "POST":
        return error_response(MethodNotAllowed("Poll with POST"))
    try:
        runner, hold = await sync_to_async(_poll_receive)(request, slug)
        taken = await _take(runner, hold)
    except ServiceError as exc:
        return refused(exc, request)
    return _json(
        {
            "commands": [
                {"id": c.pk, "kind": c.kind, "args": c.args, "sentAt": selectors.iso(c.sent_at)}
                for c in taken
            ],
            "pollSeconds": services.poll_seconds(),
        }
    )


def _reader(request: HttpRequest, slug: str, *, runner_ok: bool) -> Board:
    """The board a read may read: by token (agent, or a runner's when ``runner_ok``),
    else as a logged-in member."""
    if "Authorization" in request.headers or not request.user.is_authenticated:
        return auth.authenticate_reader(request.headers, slug, runner_ok=runner_ok)
    board = selectors.board_get(slug)
    permissions.check(request.user, board, "view")
    return board


def runner_list(request: HttpRequest, slug: str) -> JsonResponse:
    """``GET /api/boards/<slug>/runners``: each runner's presence (SPEC §16)."""
    if request.method != "GET":
        return error_response(MethodNotAllowed("Read the runners with GET", allow="GET"))
    try:
        board = _reader(request, slug, runner_ok=True)
    except ServiceError as exc:
        return refused(exc, request)
    return _json({"runners": runs_selectors.runner_list(board)})


@csrf_exempt
def runner_ping(request: HttpRequest, slug: str, name: str) -> JsonResponse:
    """``POST …/runners/<name>/ping`` (an agent's token): a ping the runner answers on its
    next poll; 202 with the command, whose state ``…/commands/<id>`` reads."""
    if request.method != "POST":
        return error_response(MethodNotAllowed("Ping with POST"))
    try:
        caller = auth.caller_from_request(request.headers, slug)
        command = services.command_send(
            board=caller.board, runner=name, kind="ping", sent_by=caller.agent
        )
    except ServiceError as exc:
        return refused(exc, request)
    return _json({"command": runs_selectors.command_to_dict(command)}, status=202)


def runner_command(request: HttpRequest, slug: str, name: str, command_id: int) -> JsonResponse:
    """``GET …/runners/<name>/commands/<id>``: a command's state and the runner's answer."""
    if request.method != "GET":
        return error_response(MethodNotAllowed("Read a command with GET", allow="GET"))
    try:
        board = _reader(request, slug, runner_ok=False)
        command = runs_selectors.command_get(board, name, command_id)
    except ServiceError as exc:
        return refused(exc, request)
    return _json({"command": runs_selectors.command_to_dict(command)})

"""The hook door: ``POST /api/boards/<slug>/hooks/<client>`` (SPEC §11, §13).

It reads one hook event (the client's own JSON), authenticates the caller, records the
event (``sessions.session_event``) and answers in the client's shape; a tool call that a
gate rule holds for a person (``calls``) keeps its request open, holding no thread, until
a decision or the rule's deadline.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError

from boards.clients import actions, calls, claude_code, registry, sessions
from boards.core import auth, services
from boards.core.errors import InvalidInput, MethodNotAllowed, NotFound, ServiceError, store_busy
from boards.core.events import listening
from boards.core.replies import error_response, parse_body, refused, validation_details
from boards.models import CallState, ToolCall

logger = logging.getLogger(__name__)


# Hook events whose answer may carry a person's unread messages to the session's model.
MESSAGE_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
# How often a held call re-reads its row while it waits (a decision's push may be lost).
HOLD_RECHECK_SECONDS = 5.0


def _without_nul(value: Any) -> Any:
    """The client's JSON with U+0000 taken out of every string (PostgreSQL cannot store it;
    a tool's output may carry it)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


# What a session says of its machine and client version, when the forwarder tells it.
HOST_HEADER = "X-Kanban-Host"
VERSION_HEADER = "X-Kanban-Client-Version"
LABEL_MAX = 100


def _label(value: Any) -> str:
    """A host name or version as shown: printable, one line, bounded ("" when not text)."""
    if not isinstance(value, str):
        return ""
    return "".join(ch for ch in " ".join(value.split()) if ch.isprintable())[:LABEL_MAX]


# A time-ordered UUID (versions 6 and 7: Codex's thread ids) begins with its clock.
TIME_ORDERED_UUID = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-[67][0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


def _short_id(session: str) -> str:
    """Eight characters that tell a session apart: the head of its id, or the random tail
    of a time-ordered one — sessions started in the same minute share its head, and two
    tokens' sessions named alike would refuse each other (``identity_taken``)."""
    spelled = "".join(ch for ch in session if ch.isascii() and ch.isalnum())
    return spelled[-8:] if TIME_ORDERED_UUID.match(session.lower()) else spelled[:8]


def _hook_receive(
    request: HttpRequest, slug: str, client: registry.Client
) -> tuple[auth.Caller, dict, calls.Verdict]:
    """Authenticate, read the client's event as Claude Code's, and record it (in a worker
    thread)."""
    body: Any = None
    problem: ServiceError | None = None
    try:
        body = parse_body(request, settings.KANBAN_HOOK_MAX_BODY_BYTES)
    except ServiceError as exc:
        problem = exc  # refused after the token is checked: 401 comes first
    session = body.get("session_id") if isinstance(body, dict) else None
    # A team token's session with no X-Agent is named by its client and id ("gemini-6997f4a8").
    prefix = "claude" if client.name == "claude-code" else client.name
    short = _short_id(session) if isinstance(session, str) else ""
    default = f"{prefix}-{short}" if short else ""
    # A suspended token is heard still: its calls are denied in the client's own answer
    # (a 403 would read as "no verdict"), and any call that runs anyway is learnt of.
    caller = auth.caller_from_request(
        request.headers, slug, default_agent=default, suspended_ok=True
    )
    if problem is not None:
        raise problem
    if not isinstance(body, dict):
        raise InvalidInput("Hook input must be a JSON object", field="(body)")
    try:
        event = actions.HookInput.model_validate(
            client.adapter.normalise(_without_nul(body))
        ).model_dump()
    except ValidationError as exc:
        details = validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid hook input: {summary}", details=details) from exc
    version = _label(
        request.headers.get(VERSION_HEADER) or body.get("client_version") or body.get("version")
    )
    verdict = _record(request, caller, event, client, version)
    return caller, event, verdict


def _record(
    request: HttpRequest,
    caller: auth.Caller,
    event: dict,
    client: registry.Client,
    version: str,
) -> calls.Verdict:
    with services.acting_with(services.Grant(caller.token_id, caller.orchestrator)):
        verdict = sessions.session_event(
            board=caller.board,
            agent=caller.agent,
            event=event,
            client=client.name,
            client_version=version,
            host=_label(request.headers.get(HOST_HEADER)),
            longest_hold=client.longest_hold(),
            token_id=caller.token_id,
            suspended=_suspension(caller),
        )
        plan_verdict = _plan(request, caller, client, event)
        if plan_verdict is not None:
            verdict = plan_verdict
        if event["hook_event_name"] in MESSAGE_EVENTS:
            unread = services.inbox_read(board=caller.board, agent=caller.agent, ack=True)
            if unread:
                event["_messages"] = "\n".join(
                    f"Message from {m.sender} on the board: {m.body}" for m in unread
                )
    return verdict


def _suspension(caller: auth.Caller) -> str:
    """Why the caller's token is suspended ("" when it is not)."""
    token = caller.token
    if token is None or token.suspended_at is None:
        return ""
    return token.suspended_reason or "a call ran without the board's verdict"


def _plan(
    request: HttpRequest, caller: auth.Caller, client: registry.Client, event: dict
) -> calls.Verdict | None:
    """The session's own tasks as cards (SPEC §11); a completion the board refuses (its
    card waits for a person's approval) is the verdict, else None."""
    read = getattr(client.adapter, "plan_steps", None)
    steps = read(event) if read is not None else []
    if not steps:
        return None
    listed = _label(request.headers.get(claude_code.TASK_LIST_HEADER))
    # An http hook sends the variable's name itself when it is not set.
    plan = listed if listed and not listed.startswith("$") else event["session_id"]
    place = {"board": caller.board, "agent": caller.agent, "session": event["session_id"]}
    if event["hook_event_name"] != "TaskCompleted":
        services.plan_apply(**place, plan=plan, steps=steps)
        return None
    if _suspension(caller):  # a suspended session finishes nothing until a person clears it
        return calls.Verdict("deny", calls.suspended_reason(_suspension(caller)))
    reason = services.plan_complete(**place, plan=plan, step=steps[0])
    return calls.Verdict("deny", reason) if reason else None


def _respond(
    client: registry.Client, event: dict, decision: str | None = None, reason: str = ""
) -> JsonResponse:
    """The board's answer in the client's shape. Never ``ask``: the board holds a call
    itself rather than hand the question to a client that may not put it."""
    if decision == "ask":
        decision = None
    answer = client.adapter.answer(event, decision, reason, event.get("_messages") or "")
    return JsonResponse(answer, json_dumps_params={"ensure_ascii": False})


def _proved(response: JsonResponse, request: HttpRequest) -> JsonResponse:
    """The answer with ``X-Kanban-Proof``: HMAC-SHA256 of its exact body keyed with the
    caller's bearer token, so ``kanban-hook`` can tell the board's verdict from any other
    server's answer (SPEC §13: the token goes only to the board, and only it can prove)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        key = token.strip().encode()
        response["X-Kanban-Proof"] = hmac.new(key, response.content, hashlib.sha256).hexdigest()
    return response


def _call_state(call_id: int) -> ToolCall:
    return ToolCall.objects.get(pk=call_id)


async def _hold(caller: auth.Caller, call_id: int) -> tuple[str, str]:
    """Wait, holding no thread and no connection, until a person decides the held call or
    its deadline passes (then its rule's fallback); the (decision, reason) to answer."""
    read = database_sync_to_async(_call_state)
    async with listening(caller.board.pk, "held call") as (layer, channel):
        await sync_to_async(close_old_connections)()
        while True:
            call = await read(call_id)
            if call.state != CallState.REQUESTED:
                return calls.verdict_of(call)
            remaining = (call.deadline - timezone.now()).total_seconds()
            if remaining <= 0:
                await database_sync_to_async(calls.tool_call_expire)(
                    board=caller.board, call_id=call_id
                )
                continue
            pause = min(remaining, HOLD_RECHECK_SECONDS)
            if not channel:
                await asyncio.sleep(min(pause, 1.0))
                continue
            try:
                await asyncio.wait_for(_decision_pushed(layer, channel), pause)
            except TimeoutError:
                continue
            except Exception:
                logger.warning(
                    "held call on board %s: channel layer failed, polling", caller.board.pk
                )
                channel = ""


async def _decision_pushed(layer: Any, channel: str) -> None:
    """Return once the board's stream carries a decision on some held call."""
    while True:
        message = await layer.receive(channel)
        if any(str(e.get("kind", "")).startswith("tool_call_") for e in message.get("events", ())):
            return


@csrf_exempt
async def client_hook(request: HttpRequest, slug: str, client: str) -> JsonResponse:
    """``POST /api/boards/<slug>/hooks/<client>``: one hook event of a coding client.

    Answers in that client's shape at once, except for a tool call that a gate rule
    holds for a person: that request stays open until the decision or the rule's
    deadline (for a client that gives up on a hook sooner, before it does: SPEC §13).
    """
    row = registry.client(client)
    if row is None:
        return error_response(
            NotFound(
                f"No hook door for a client called {client[:40]!r}; the doors are: "
                + ", ".join(registry.NAMES),
                code="unknown_client",
            )
        )
    if request.method != "POST":
        return error_response(MethodNotAllowed("Send hook events with POST"))
    try:
        caller, event, verdict = await sync_to_async(_hook_receive)(request, slug, row)
    except ServiceError as exc:
        return refused(exc, request)
    except Exception as exc:
        busy = store_busy(exc)
        if busy is None:
            raise
        return refused(busy, request)
    decision, reason = verdict.decision, verdict.reason
    if verdict.held is not None:
        decision, reason = await _hold(caller, verdict.held)
    return _proved(_respond(row, event, decision, reason), request)

"""The agent API: ``POST /api/boards/<slug>/tools/<ToolName>`` and the hooks of coding
clients, ``POST /api/boards/<slug>/hooks/claude-code`` (transport only).

This module reads the request (method, size, JSON), authenticates the caller
(``boards.auth``) and hands the tool call to the pipeline (``boards.tools``), or the
hook event to ``services.session_event``, then writes its answer or the §4 error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import close_old_connections
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from pydantic import ValidationError

from . import (
    auth,
    dialects,
    edge,
    metrics,
    numbers,
    permissions,
    schemas,
    selectors,
    services,
    tools,
)
from .errors import (
    BODY,
    InvalidInput,
    PayloadTooLarge,
    ServiceError,
    StoreBusy,
    Unauthorized,
    error_body,
    store_busy,
)
from .events import listening
from .models import Board, CallState, ToolCall

logger = logging.getLogger(__name__)


def error_response(exc: ServiceError) -> JsonResponse:
    response = JsonResponse(error_body(exc), status=exc.status)
    if isinstance(exc, StoreBusy):
        response["Retry-After"] = str(exc.retry_after)
    return response


def refused(exc: ServiceError, request: HttpRequest) -> JsonResponse:
    """The §4 error answer, with ``WWW-Authenticate`` when a token was missing or wrong."""
    response = error_response(exc)
    for name, value in (auth.challenge(exc, request.headers) or {}).items():
        response[name] = value
    return response


def _reader(request: HttpRequest, slug: str, action: str, *, admin_token: bool) -> Board:
    """The board a read-only API call may read: by token (an admin-scoped one when
    ``admin_token``), else as the logged-in person whose role allows ``action``."""
    if "Authorization" in request.headers or not request.user.is_authenticated:
        if admin_token:
            return auth.authenticate_admin(request.headers, slug)
        return auth.authenticate_reader(request.headers, slug)
    board = selectors.board_get(slug)
    permissions.check(request.user, board, action)
    return board


def parse_body(request: HttpRequest) -> Any:
    """The JSON body; an empty body means ``{}`` (seed 000: LLMs call TaskList with nothing)."""
    limit = settings.KANBAN_MAX_BODY_BYTES
    too_large = PayloadTooLarge(f"Body is larger than {limit} bytes")
    declared = numbers.spelled(request.META.get("CONTENT_LENGTH") or "", numbers.SEQ_DIGITS)
    if declared is not None and declared > limit:
        raise too_large
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise too_large from exc
    if len(raw) > limit:
        raise too_large
    if not raw.strip():
        return {}
    problem = edge.json_problem(raw)
    if problem:
        raise InvalidInput(f"Body is not valid JSON: {problem}", field=BODY, code="invalid_json")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(
            f"Body is not valid JSON: {str(exc)[:200]}", field=BODY, code="invalid_json"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidInput("Body must be a JSON object with the tool's input", field=BODY)
    return data


@csrf_exempt
async def tool_call(request: HttpRequest, slug: str, tool: str) -> JsonResponse:
    if request.method != "POST":
        return JsonResponse(
            {"error": {"code": "method_not_allowed", "message": "Call a tool with POST"}},
            status=405,
        )
    try:
        # Authenticated first (401 before anything), then an unknown tool is a 404 whatever
        # its body; both in the tool's own worker thread.
        answer = await tools.call_from_request(
            request.headers, slug, tool, partial(parse_body, request)
        )
    except ServiceError as exc:
        return refused(exc, request)
    return JsonResponse(
        answer.body, status=answer.status, safe=False, json_dumps_params={"ensure_ascii": False}
    )


@require_GET
def tool_list(request: HttpRequest, slug: str) -> JsonResponse:
    try:
        selectors.board_get(slug)
        fmt = request.GET.get("format", "anthropic")
        if fmt not in ("anthropic", "openai"):
            raise InvalidInput("format: 'anthropic' or 'openai'", field="format")
        dialect = request.GET.get("dialect")
        if dialect is not None and dialect not in dialects.DIALECTS:
            raise InvalidInput("dialect: 'seed002' or 'seed003'", field="dialect")
        return JsonResponse({"tools": schemas.tool_definitions(tools.listed(dialect), fmt)})
    except ServiceError as exc:
        return error_response(exc)


@require_GET
def oauth_protected_resource(request: HttpRequest, resource: str = "") -> JsonResponse:
    """RFC 9728 metadata for OAuth-aware MCP clients: this server takes static bearer
    tokens issued on a board's Tokens page and names no authorization server."""
    base = request.build_absolute_uri("/").rstrip("/")
    return JsonResponse(
        {
            "resource": f"{base}/{resource}" if resource else base,
            "bearer_methods_supported": ["header"],
            "authorization_servers": [],
            "resource_documentation": f"{base}/",
            "description": NO_OAUTH,
        }
    )


NO_OAUTH = (
    "Agent Kanban uses static bearer tokens, issued per board by its admins on the board's "
    "Agent tokens page; send one as 'Authorization: Bearer <token>'. There is no OAuth "
    "authorization server and no client registration."
)


def no_oauth(request: HttpRequest, rest: str = "") -> JsonResponse:
    """The OAuth paths clients probe (authorization server metadata, /register): JSON, never HTML."""
    return JsonResponse({"error": {"code": "no_oauth", "message": NO_OAUTH}}, status=404)


@require_GET
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schemas.openapi_document(tools.listed()))


async def healthz(request: HttpRequest) -> JsonResponse:
    """A JSON answer that touches nothing: liveness probes, and the benchmark's baseline."""
    return JsonResponse({"ok": True})


def _whole(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    return numbers.whole(raw, field=name, low=low, high=high)


@require_GET
def event_list(request: HttpRequest, slug: str) -> JsonResponse:
    """``GET /api/boards/<slug>/events?after=<seq>&limit=``: the event log, oldest first
    after ``seq``, for the board's admins (logged in) and admin-scoped tokens."""
    try:
        board = _reader(request, slug, "events", admin_token=True)
        after = _whole(request, "after", 0, 0, 2**62)
        limit = _whole(request, "limit", 100, 1, selectors.ACTIVITY_MAX)
        task = request.GET.get("taskId")
        events = selectors.activity_page(
            board,
            actor=request.GET.get("actor", "")[:150],
            kind=request.GET.get("kind", "")[:32],
            task=_whole(request, "taskId", 0, 1, 2**31 - 1) if task else None,
            after=after,
            limit=limit,
        )
    except ServiceError as exc:
        return refused(exc, request)
    board.refresh_from_db(fields=["last_seq"])
    return JsonResponse(
        {
            "events": [selectors.event_json(e) for e in events],
            "nextAfter": events[-1].seq if events else after,
            "lastSeq": board.last_seq,
        },
        json_dumps_params={"ensure_ascii": False},
    )


@require_GET
def board_metrics(request: HttpRequest, slug: str) -> JsonResponse:
    """``GET /api/boards/<slug>/metrics?range=1h|today|7d|30d``: flow metrics and cost
    (boards.metrics), for the board's members (logged in) and any token of the board. The
    query is read by the page's own form; a wrong one is a 400 naming the parameter."""
    try:
        board = _reader(request, slug, "view", admin_token=False)
        range_key, today = metrics.metrics_query(request.GET)
        answer = metrics.metrics(board, range_key=range_key, today=today)
    except ServiceError as exc:
        return refused(exc, request)
    return JsonResponse(answer, json_dumps_params={"ensure_ascii": False})


@require_GET
def inbox(request: HttpRequest) -> JsonResponse:
    """``GET /api/inbox`` (a logged-in person): everything that waits for them on every
    board they may act on, oldest first (SPEC §12)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return refused(Unauthorized("Log in to read your inbox"), request)
    items = permissions.inbox(user)
    body = {"count": len(items), "items": [item.as_json() for item in items]}
    return JsonResponse(body, json_dumps_params={"ensure_ascii": False})


@require_GET
def agent_list(request: HttpRequest, slug: str) -> JsonResponse:
    """``GET /api/boards/<slug>/agents``: every agent on the roster, alive or gone (SPEC §12),
    for the board's members (logged in) and any token of the board."""
    try:
        board = _reader(request, slug, "view", admin_token=False)
    except ServiceError as exc:
        return refused(exc, request)
    holding: dict[str, list[str]] = {}
    for owner, number in (
        board.tasks.filter(status="in_progress").order_by("number").values_list("owner", "number")
    ):
        holding.setdefault(owner, []).append(str(number))
    agents = [
        {
            "name": row["name"],
            "state": row["state"],
            "lastCallAt": selectors.iso(row["last_seen"]),
            "holding": holding.get(row["name"], []),
            "session": _session_json(row["session"]),
        }
        for row in selectors.roster(board)
    ]
    return JsonResponse({"agents": agents}, json_dumps_params={"ensure_ascii": False})


def _session_json(session: Any) -> dict[str, Any] | None:
    if session is None:
        return None
    return {
        "id": session.session_id,
        "client": session.client,
        "state": session.state,
        "cwd": session.cwd,
        "doing": session.doing,
        "model": session.model or None,
        "calls": session.calls,
        "lastEventAt": selectors.iso(session.last_event_at),
    }


# -- coding clients' hooks (SPEC §11) -----------------------------------------------------------

# Hook events whose answer may carry a person's unread messages to the session's model.
MESSAGE_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
# How often a held call re-reads its row while it waits (a decision's push may be lost).
HOLD_RECHECK_SECONDS = 5.0
# Held calls per token in this process: each holds a request open.
_holding: Counter[int | None] = Counter()


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


def _hook_receive(request: HttpRequest, slug: str) -> tuple[auth.Caller, dict, services.Verdict]:
    """Authenticate, validate and record one hook event (in a worker thread)."""
    body: Any = None
    problem: ServiceError | None = None
    try:
        body = parse_body(request)
    except ServiceError as exc:
        problem = exc  # refused after the token is checked: 401 comes first
    session = body.get("session_id") if isinstance(body, dict) else None
    default = f"claude-{session[:8]}" if isinstance(session, str) and session.isalnum() else ""
    caller = auth.caller_from_request(request.headers, slug, default_agent=default)
    if problem is not None:
        raise problem
    try:
        event = schemas.HookInput.model_validate(_without_nul(body)).model_dump()
    except ValidationError as exc:
        details = schemas.validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid hook input: {summary}", details=details) from exc
    with services.acting_with(services.Grant(caller.token_id, caller.orchestrator)):
        verdict = services.session_event(board=caller.board, agent=caller.agent, event=event)
        if event["hook_event_name"] in MESSAGE_EVENTS:
            unread = services.inbox_read(board=caller.board, agent=caller.agent, ack=True)
            if unread:
                event["_messages"] = "\n".join(
                    f"Message from {m.sender} on the board: {m.body}" for m in unread
                )
    return caller, event, verdict


def _hook_answer(event: dict, decision: str | None = None, reason: str = "") -> dict:
    """Claude Code's hook output: a PreToolUse decision, or context for the model."""
    name = event["hook_event_name"]
    if decision is not None:
        return {
            "hookSpecificOutput": {
                "hookEventName": name,
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }
    if event.get("_messages"):
        return {
            "hookSpecificOutput": {"hookEventName": name, "additionalContext": event["_messages"]}
        }
    return {}


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
                return services.verdict_of(call)
            remaining = (call.deadline - timezone.now()).total_seconds()
            if remaining <= 0:
                await database_sync_to_async(services.tool_call_expire)(
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
async def claude_code_hook(request: HttpRequest, slug: str) -> JsonResponse:
    """``POST /api/boards/<slug>/hooks/claude-code``: one Claude Code hook event.

    Answers Claude Code's hook output at once, except for a tool call that a gate rule
    holds for a person: that request stays open until the decision or the rule's
    deadline (SPEC §11).
    """
    if request.method != "POST":
        return error_response(
            InvalidInput("Send hook events with POST", field="(method)", code="method_not_allowed")
        )
    try:
        caller, event, verdict = await sync_to_async(_hook_receive)(request, slug)
    except ServiceError as exc:
        return refused(exc, request)
    except Exception as exc:
        busy = store_busy(exc)
        if busy is None:
            raise
        return refused(busy, request)
    decision, reason = verdict.decision, verdict.reason
    if verdict.held is not None:
        if _holding[caller.token_id] >= settings.KANBAN_WATCHES_PER_TOKEN:
            decision, reason = "deny", "Too many of this token's calls are waiting for a person"
        else:
            _holding[caller.token_id] += 1
            try:
                decision, reason = await _hold(caller, verdict.held)
            finally:
                _holding[caller.token_id] -= 1
    return JsonResponse(
        _hook_answer(event, decision, reason), json_dumps_params={"ensure_ascii": False}
    )

"""The agent API: ``POST /api/boards/<slug>/tools/<ToolName>`` and the reads beside it
(tool list, OpenAPI, events, metrics, agents, the inbox) — transport only.

This module reads the request (method, size, JSON; ``boards.core.replies``), authenticates
the caller (``boards.core.auth``) and hands the tool call to the pipeline
(``boards.agents.pipeline``), then writes its answer or the §4 error shape.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from boards.agents import dialects, pipeline, schemas
from boards.core import auth, metrics, numbers, permissions, selectors
from boards.core.errors import (
    InvalidInput,
    MethodNotAllowed,
    ServiceError,
    Unauthorized,
)
from boards.core.replies import error_response, parse_body, refused
from boards.models import Board
from boards.needs.inbox import inbox_count, inbox_items

logger = logging.getLogger(__name__)


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


@csrf_exempt
async def tool_call(request: HttpRequest, slug: str, tool: str) -> JsonResponse:
    if request.method != "POST":
        return error_response(MethodNotAllowed("Call a tool with POST"))
    try:
        # Authenticated first (401 before anything), then an unknown tool is a 404 whatever
        # its body; both in the tool's own worker thread.
        answer = await pipeline.call_from_request(
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
        return JsonResponse({"tools": schemas.tool_definitions(pipeline.listed(dialect), fmt)})
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
    return JsonResponse(schemas.openapi_document(pipeline.listed()))


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
    (boards.core.metrics), for the board's members (logged in) and any token of the board. The
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
    items = inbox_items(user)
    body = {"count": inbox_count(user), "items": [item.as_json() for item in items]}
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
            "session": _session_json(row["session"], board.silent_after_seconds),
        }
        for row in selectors.roster(board)
    ]
    return JsonResponse({"agents": agents}, json_dumps_params={"ensure_ascii": False})


def _session_json(session: Any, silent_after: int) -> dict[str, Any] | None:
    if session is None:
        return None
    calls = [
        {
            "tool": c.get("tool"),
            "summary": c.get("doing", ""),
            "outcome": c.get("outcome"),
            "ms": c.get("ms"),
            "subagent": c.get("subagent"),
        }
        for c in session.calls
    ]
    return {
        "id": session.session_id,
        "client": session.client,
        "clientVersion": session.client_version or None,
        "host": session.host or None,
        "state": session.shown_state(silent_after, timezone.now()),
        "cwd": session.cwd,
        "doing": session.doing,
        "model": session.model or None,
        "calls": calls,
        "subagents": [a.get("type") or None for a in session.running_subagents],
        "lastEventAt": selectors.iso(session.last_event_at),
    }

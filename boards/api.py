"""The agent tool endpoint: ``POST /api/boards/<slug>/tools/<ToolName>`` (transport only).

This module reads the request (method, size, JSON), authenticates the caller
(``boards.auth``) and hands the tool call to the pipeline (``boards.tools``),
then writes its answer or the §4 error shape.
"""

from __future__ import annotations

import json
from datetime import date
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from . import auth, dialects, metrics, permissions, schemas, selectors, tools
from .errors import InvalidInput, PayloadTooLarge, ServiceError, StoreBusy, error_body
from .models import Board


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
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise too_large
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise too_large from exc
    if len(raw) > limit:
        raise too_large
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise InvalidInput("Body is nested too deeply", code="invalid_json") from exc
    except ValueError as exc:
        raise InvalidInput(
            f"Body is not valid JSON: {str(exc)[:200]}", code="invalid_json"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidInput("Body must be a JSON object with the tool's input")
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
        answer = await tools.call(
            partial(auth.authenticate, request.headers, slug), tool, partial(parse_body, request)
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
            raise InvalidInput("format: 'anthropic' or 'openai'")
        dialect = request.GET.get("dialect")
        if dialect is None:
            return JsonResponse({"tools": schemas.tool_definitions(fmt)})
        if dialect not in dialects.DIALECTS:
            raise InvalidInput("dialect: 'seed002' or 'seed003'")
        return JsonResponse({"tools": dialects.dialect_definitions(dialect, fmt)})
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
    return JsonResponse(schemas.openapi_document())


async def healthz(request: HttpRequest) -> JsonResponse:
    """A JSON answer that touches nothing: liveness probes, and the benchmark's baseline."""
    return JsonResponse({"ok": True})


def _whole(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise InvalidInput(
            f"{name}: a whole number from {low} to {high}",
            details=[{"field": name, "message": f"a whole number from {low} to {high}"}],
        )
    return value


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
    """``GET /api/boards/<slug>/metrics?days=30``: flow metrics and cost (boards.metrics),
    for the board's members (logged in) and any token of the board."""
    try:
        board = _reader(request, slug, "view", admin_token=False)
        days = _whole(request, "days", metrics.DAYS_DEFAULT, 1, metrics.DAYS_MAX)
        today = _day(request)
        answer = metrics.metrics(board, days=days, today=today)
    except ServiceError as exc:
        return refused(exc, request)
    return JsonResponse(answer, json_dumps_params={"ensure_ascii": False})


def _day(request: HttpRequest) -> date | None:
    raw = request.GET.get("today")
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidInput("today: a date like 2026-11-20", details=[{"field": "today"}]) from None

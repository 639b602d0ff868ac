"""The agent tool endpoint: ``POST /api/boards/<slug>/tools/<ToolName>``.

One place parses the body, authenticates the token, sets the caller's identity,
validates the input against its pydantic model, runs the tool and maps every
domain error onto the error shape of SPEC §4.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import close_old_connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from pydantic import ValidationError

from . import dialects, schemas, selectors, services, tools
from .errors import InvalidInput, NotFound, ServiceError
from .models import AgentToken, hash_token

logger = logging.getLogger(__name__)

AGENT_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,100}$")


class ApiError(ServiceError):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message, code=code, details=details)
        self.status = status


def error_response(status: int, code: str, message: str, details: Any = None) -> JsonResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return JsonResponse({"error": error}, status=status)


def authenticate(request: HttpRequest, board_slug: str) -> tools.Caller:
    return authenticate_headers(request.headers, board_slug)


def authenticate_headers(headers: Mapping[str, str], board_slug: str) -> tools.Caller:
    """The caller named by a request's headers (case-insensitive mapping); also used by MCP."""
    board = selectors.board_get(board_slug)
    header = headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(
            401, "unauthorized", "Send the board's token as 'Authorization: Bearer <token>'"
        )
    token = AgentToken.objects.filter(token_hash=hash_token(raw.strip())).first()
    if token is None:
        raise ApiError(401, "unauthorized", "Unknown token")
    if token.board_id != board.pk:
        raise ApiError(403, "forbidden", "This token belongs to another board")
    if token.revoked_at is not None:
        raise ApiError(403, "token_revoked", "This token has been revoked")
    if token.is_team:
        agent = headers.get("X-Agent", "").strip()
        if not agent:
            raise ApiError(
                400,
                "invalid_input",
                "A team token needs the agent's name in the X-Agent header",
                [{"field": "X-Agent", "message": "required"}],
            )
    else:
        agent = token.agent
    if not AGENT_NAME.match(agent):
        raise ApiError(
            400,
            "invalid_input",
            "X-Agent: 1 to 100 printable characters",
            [{"field": "X-Agent", "message": "invalid"}],
        )
    return tools.Caller(board=board, agent=agent)


def parse_body(request: HttpRequest) -> dict[str, Any]:
    limit = settings.KANBAN_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise ApiError(413, "payload_too_large", f"Body is larger than {limit} bytes")
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise ApiError(413, "payload_too_large", f"Body is larger than {limit} bytes") from exc
    if len(raw) > limit:
        raise ApiError(413, "payload_too_large", f"Body is larger than {limit} bytes")
    if not raw.strip():
        return {}  # An empty body means {} (seed 000: LLMs call TaskList with nothing).
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        message = (
            "Body is not valid JSON"
            if not isinstance(exc, RecursionError)
            else "Body is nested too deeply"
        )
        raise ApiError(400, "invalid_json", f"{message}: {str(exc)[:200]}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_input", "Body must be a JSON object with the tool's input")
    if has_nul(data):
        # PostgreSQL cannot store U+0000 in text; refuse it the same on every backend.
        raise ApiError(400, "invalid_input", "Strings must not contain the NUL character (\\u0000)")
    return data


def has_nul(value: Any) -> bool:
    """Whether a parsed JSON value holds U+0000 in any string or key."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _prepare(request: HttpRequest, slug: str, tool: str) -> tuple[tools.Caller, Any]:
    caller = authenticate(request, slug)
    model = schemas.TOOL_INPUTS.get(tool)
    dialect = dialects.dialect_for(tool) if model is None else None
    if dialect is not None:  # a seed's tool name (SPEC §4 "Seed dialects")
        model = dialect.model
    if model is None:
        raise NotFound(
            f"Unknown tool {tool[:64]!r}; GET /api/boards/{slug}/tools lists them",
            code="unknown_tool",
        )
    data = parse_body(request)
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        details = schemas.validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid input for {tool}: {summary}", details=details) from exc
    except RecursionError as exc:
        raise InvalidInput("Input is nested too deeply") from exc
    services.agent_seen(board=caller.board, agent=caller.agent)
    return caller, validated


def _run_sync(
    request: HttpRequest, slug: str, tool: str
) -> tuple[tools.Caller, Any, tools.Answer | None]:
    caller, data = _prepare(request, slug, tool)
    dialect = dialects.dialect_for(tool) if tool not in schemas.TOOL_INPUTS else None
    if tool == "TaskWatch" or (dialect is not None and dialect.is_async):
        # The watch may wait minutes: give the request's connection back before it does.
        close_old_connections()
        return caller, data, None
    handler: Any = dialect.handler if dialect is not None else tools.SYNC_HANDLERS[tool]
    answer: tools.Answer = handler(caller, data)
    if isinstance(answer.body, dict):  # a seed's bare "ok" or array stays as the seed has it
        answer.body["unreadMessages"] = selectors.unread_count(caller.board, caller.agent)
    return caller, data, answer


@csrf_exempt
async def tool_call(request: HttpRequest, slug: str, tool: str) -> JsonResponse:
    if request.method != "POST":
        return error_response(405, "method_not_allowed", "Call a tool with POST")
    try:
        caller, data, answer = await sync_to_async(_run_sync)(request, slug, tool)
        if answer is None:
            dialect = dialects.dialect_for(tool)
            watch: Any = dialect.handler if dialect is not None else tools.task_watch
            answer = await watch(caller, data)
            answer.body["unreadMessages"] = await sync_to_async(selectors.unread_count)(
                caller.board, caller.agent
            )
    except ServiceError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.details)
    except Exception:
        logger.exception("tool %s on board %s failed", tool, slug)
        return error_response(
            500, "internal_error", "The server failed; the change was not applied"
        )
    return JsonResponse(
        answer.body, status=answer.status, safe=False, json_dumps_params={"ensure_ascii": False}
    )


@require_GET
def tool_list(request: HttpRequest, slug: str) -> JsonResponse:
    try:
        selectors.board_get(slug)
    except ServiceError as exc:
        return error_response(exc.status, exc.code, exc.message)
    fmt = request.GET.get("format", "anthropic")
    if fmt not in ("anthropic", "openai"):
        return error_response(400, "invalid_input", "format: 'anthropic' or 'openai'")
    dialect = request.GET.get("dialect")
    if dialect is not None:
        if dialect not in dialects.DIALECTS:
            return error_response(400, "invalid_input", "dialect: 'seed002' or 'seed003'")
        return JsonResponse({"tools": dialects.dialect_definitions(dialect, fmt)})
    return JsonResponse({"tools": schemas.tool_definitions(fmt)})


@require_GET
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schemas.openapi_document())


async def healthz(request: HttpRequest) -> JsonResponse:
    """A JSON answer that touches nothing: liveness probes, and the benchmark's baseline."""
    return JsonResponse({"ok": True})

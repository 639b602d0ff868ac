"""The tool pipeline: every agent door (HTTP tool endpoint, MCP) calls ``tools.call``.

``call(caller, name, arguments)`` looks the tool up (canonical, or a seed
dialect's), validates the arguments with its pydantic model, runs it (in a
worker thread, or on the event loop for the waiting tools), adds
``unreadMessages`` to an object answer, and turns any failure into a
``ServiceError``. The doors only carry transport: reading the request,
authenticating (``boards.auth``) and writing ``Answer`` or ``errors.error_body``.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import ValidationError

from . import canonical, dialects, schemas, selectors, services
from .auth import Caller
from .canonical import Answer
from .errors import InternalError, InvalidInput, NotFound, ServiceError, store_busy

logger = logging.getLogger(__name__)

__all__ = ["Answer", "Caller", "Tool", "call", "lookup"]


@dataclass(frozen=True)
class Tool:
    name: str
    model: type[schemas.ToolInput]
    handler: Callable[..., Any]
    # A waiting tool (TaskWatch) runs on the event loop, holding no thread or connection.
    waits: bool = False


def lookup(name: str, *, seed_dialects: bool = True) -> Tool:
    """The tool called ``name``: a canonical one, or (``seed_dialects``) a seed's; else 404."""
    if name in canonical.HANDLERS:
        handler = canonical.HANDLERS[name]
        return Tool(name, schemas.TOOL_INPUTS[name], handler, inspect.iscoroutinefunction(handler))
    dialect = dialects.dialect_for(name) if seed_dialects else None
    if dialect is None:
        raise NotFound(
            f"Unknown tool {name[:64]!r}; list the tools to see them", code="unknown_tool"
        )
    return Tool(name, dialect.model, dialect.handler, dialect.is_async)


def unstorable(value: Any) -> str | None:
    """Why a parsed JSON value cannot be stored as it is, or None.

    PostgreSQL cannot store U+0000 in text, and NaN or Infinity is not JSON (Python's
    parser accepts them, a JSON column refuses them): refused the same on every backend.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "Strings must not contain the NUL character (\\u0000)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "Numbers must be finite: NaN and Infinity are not JSON"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def validate(tool: Tool, arguments: Any) -> schemas.ToolInput:
    """The tool's input model from JSON arguments; every wrong field is named."""
    if not isinstance(arguments, dict):
        raise InvalidInput("The tool's input must be a JSON object")
    problem = unstorable(arguments)
    if problem is not None:
        raise InvalidInput(problem)
    try:
        return tool.model.model_validate(arguments)
    except ValidationError as exc:
        details = schemas.validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid input for {tool.name}: {summary}", details=details) from exc
    except RecursionError as exc:
        raise InvalidInput("Input is nested too deeply") from exc


def _with_unread(caller: Caller, answer: Answer) -> Answer:
    if isinstance(answer.body, dict):  # a seed's bare "ok" or array stays as the seed has it
        answer.body["unreadMessages"] = selectors.unread_count(caller.board, caller.agent)
    return answer


def _run(caller: Caller, tool: Tool, arguments: Any) -> Answer:
    with services.acting_with(services.Grant(caller.token_id, caller.orchestrator)):
        return _with_unread(caller, tool.handler(caller, validate(tool, arguments)))


def _failed(exc: Exception, name: str, caller: Caller) -> ServiceError:
    busy = store_busy(exc)
    if busy is not None:
        logger.warning("tool %s on board %s: the database is busy", name, caller.board.slug)
        return busy
    logger.exception("tool %s on board %s failed", name, caller.board.slug)
    return InternalError("The server failed; the change was not applied")


def _authenticate_and_run(
    authenticate: Callable[[], Caller], name: str, arguments: Any, seed_dialects: bool
) -> tuple[Caller, Answer | None]:
    """The caller, and the answer unless the tool waits (it then runs on the event loop)."""
    try:
        caller = authenticate()  # it writes too (the roster's seen mark, lease renewals)
    except Exception as exc:
        busy = store_busy(exc)
        if busy is None:
            raise
        raise busy from exc
    tool = lookup(name, seed_dialects=seed_dialects)
    if tool.waits:
        return caller, None
    if callable(arguments):
        arguments = arguments()  # the body is read once the caller and the tool are known
    try:
        return caller, _run(caller, tool, arguments)
    except ServiceError:
        raise
    except Exception as exc:
        raise _failed(exc, name, caller) from exc


async def call(
    caller: Caller | Callable[[], Caller],
    name: str,
    arguments: Any,
    *,
    seed_dialects: bool = True,
) -> Answer:
    """Run one tool for a caller; every refusal is a ``ServiceError``.

    ``caller`` may be the authentication still to do (a function returning the caller,
    raising the refusal): it then runs in the same worker thread as the tool, one hop
    off the event loop instead of two, a good part of a quick call's cost. So may
    ``arguments`` (reading the body): it runs after the caller and the tool are known,
    so a request without a valid token is refused as such whatever its body.
    """
    if callable(caller):
        caller, answer = await sync_to_async(_authenticate_and_run)(
            caller, name, arguments, seed_dialects
        )
        if answer is not None:
            return answer
    if callable(arguments):
        arguments = arguments()
    tool = lookup(name, seed_dialects=seed_dialects)
    try:
        if not tool.waits:
            return await sync_to_async(_run)(caller, tool, arguments)
        data = validate(tool, arguments)
        # The wait may last minutes: give the request's connection back before it starts.
        await sync_to_async(close_old_connections)()
        answer = await tool.handler(caller, data)
        return await sync_to_async(_with_unread)(caller, answer)
    except ServiceError:
        raise
    except Exception as exc:
        raise _failed(exc, name, caller) from exc

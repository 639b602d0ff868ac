"""The tool pipeline, which every agent door runs a tool call through.

Two entries: ``call(caller, name, arguments)`` for a caller already authenticated (MCP
authenticates once per request), and ``call_from_request(headers, slug, name, body)``
for the tool endpoint, which authenticates the request (``auth.authenticate``), notes
that the agent called (``auth.agent_called``: seen on the roster, leases renewed) and
reads the body in the same worker thread as the tool. Both look the tool up in the one
registry the handlers' ``@tool`` declarations fill (``schemas.TOOLS``: the canonical
tools of ``boards.agents.handlers`` and the seeds' of ``boards.agents.dialects``, both imported
here), validate the arguments with its pydantic model, run it (in a worker thread, or
on the event loop for the waiting tools), add ``unreadMessages`` to an object answer,
and turn any failure into a ``ServiceError``. The doors only carry transport: reading
the request and writing ``Answer`` or ``errors.error_body``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import ValidationError

from boards.agents import dialects, handlers, schemas  # noqa: F401
from boards.agents.handlers import Answer
from boards.agents.schemas import Tool

# Importing the handlers' modules declares their tools (``@tool``): canonical, then seeds'.
from boards.core import auth, selectors, services
from boards.core.auth import Caller
from boards.core.errors import BODY, InternalError, InvalidInput, NotFound, ServiceError, store_busy
from boards.core.replies import validation_details

logger = logging.getLogger(__name__)

__all__ = ["Answer", "Caller", "Tool", "call", "call_from_request", "listed", "lookup"]


def find(name: str, *, seed_dialects: bool = True) -> Tool | None:
    """The tool called ``name``: a canonical one, or (``seed_dialects``) a seed's; else None."""
    found = schemas.TOOLS.get(name)
    if found is None or found.pattern is not None:
        found = next(
            (c for t in schemas.TOOLS.values() if t.pattern and (c := t.called(name))), None
        )
    if found is None or (found.dialect is not None and not seed_dialects):
        return None
    return found


def lookup(name: str, *, seed_dialects: bool = True) -> Tool:
    """``find``, or 404 naming the unknown tool."""
    found = find(name, seed_dialects=seed_dialects)
    if found is None:
        raise NotFound(
            f"Unknown tool {name[:64]!r}; list the tools to see them", code="unknown_tool"
        )
    return found


def listed(dialect: str | None = None) -> list[Tool]:
    """The canonical tools in the order declared, or (``dialect``) a seed's."""
    if dialect is not None and dialect not in dialects.DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; one of {', '.join(dialects.DIALECTS)}")
    return [t for t in schemas.TOOLS.values() if t.dialect == dialect]


def unstorable(value: Any, path: str = "") -> tuple[str, str] | None:
    """Where (a field path, ``BODY`` for the whole) and why a parsed JSON value cannot be
    stored as it is, or None.

    PostgreSQL cannot store U+0000 in text, and NaN or Infinity is not JSON (Python's
    parser accepts them, a JSON column refuses them): refused the same on every backend.
    """
    stack = [(path, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return at or BODY, "Strings must not contain the NUL character (\\u0000)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return at or BODY, "Numbers must be finite: NaN and Infinity are not JSON"
        elif isinstance(item, dict):
            for key, inner in item.items():
                stack.append((at, key))  # a wrong key: named by where it is
                stack.append((f"{at}.{key:.64}" if at else f"{key:.64}", inner))
        elif isinstance(item, list):
            stack.extend((f"{at}.{i}" if at else str(i), inner) for i, inner in enumerate(item))
    return None


def validate(tool: Tool, arguments: Any) -> schemas.ToolInput:
    """The tool's input model from JSON arguments; every wrong field is named."""
    if not isinstance(arguments, dict):
        raise InvalidInput("The tool's input must be a JSON object", field=BODY)
    problem = unstorable(arguments)
    if problem is not None:
        at, message = problem
        raise InvalidInput(message, field=at)
    try:
        return tool.input.model_validate(arguments)
    except ValidationError as exc:
        details = validation_details(exc)
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:10])
        raise InvalidInput(f"Invalid input for {tool.name}: {summary}", details=details) from exc
    except RecursionError as exc:
        raise InvalidInput("Input is nested too deeply", field=BODY) from exc


def _with_unread(caller: Caller, answer: Answer) -> Answer:
    if isinstance(answer.body, dict):  # a seed's bare "ok" or array stays as the seed has it
        answer.body["unreadMessages"] = selectors.unread_count(caller.board, caller.agent)
    return answer


def _as_sent(tool: Tool, exc: InvalidInput) -> None:
    """A service names a wrong field as Python does (``blocked_by``): name it as the agent
    of a canonical tool sent it (``blockedBy``)."""
    if tool.dialect is None:
        exc.details = [{**d, "field": schemas.wire_path(d["field"])} for d in exc.details]


@contextmanager
def _refusals(caller: Caller, tool: Tool) -> Iterator[None]:
    """A running tool's failure as the agent sees it: a ``ServiceError`` (a wrong field
    named as the agent sent it), anything else ``_failed``."""
    try:
        yield
    except InvalidInput as exc:
        _as_sent(tool, exc)
        raise
    except ServiceError:
        raise
    except Exception as exc:
        raise _failed(exc, tool.name, caller) from exc


def _run(caller: Caller, tool: Tool, arguments: Any) -> Answer:
    """Validate and run a tool that answers at once (in a worker thread)."""
    data = validate(tool, arguments)
    grant = services.Grant(caller.token_id, caller.orchestrator)
    with _refusals(caller, tool), services.acting_with(grant):
        return _with_unread(caller, tool.handler(caller, data))


async def _wait(caller: Caller, tool: Tool, arguments: Any) -> Answer:
    """Validate and run a tool that waits (on the event loop, holding no thread)."""
    data = validate(tool, arguments)
    with _refusals(caller, tool):
        # The wait may last minutes: give the request's connection back before it starts.
        await sync_to_async(close_old_connections)()
        answer = await tool.handler(caller, data)
        return await sync_to_async(_with_unread)(caller, answer)


def _failed(exc: Exception, name: str, caller: Caller) -> ServiceError:
    busy = store_busy(exc)
    if busy is not None:
        logger.warning("tool %s on board %s: the database is busy", name, caller.board.slug)
        return busy
    logger.exception("tool %s on board %s failed", name, caller.board.slug)
    return InternalError("The server failed; the change was not applied")


async def call(caller: Caller, name: str, arguments: Any, *, seed_dialects: bool = True) -> Answer:
    """Run one tool for a caller already authenticated (MCP: once per request); every
    refusal is a ``ServiceError``."""
    tool = lookup(name, seed_dialects=seed_dialects)
    if tool.waits:
        return await _wait(caller, tool, arguments)
    return await sync_to_async(_run)(caller, tool, arguments)


def _receive(
    headers: Mapping[str, str], slug: str, name: str, body: Callable[[], Any], default_agent: str
) -> tuple[Caller, Tool, Any, Answer | None]:
    """The caller, the tool, its arguments, and the answer unless the tool waits."""
    try:
        caller = auth.caller_from_request(headers, slug, default_agent=default_agent)
    except Exception as exc:
        busy = store_busy(exc)
        if busy is None:
            raise
        raise busy from exc
    tool = lookup(name)
    # The body is read once the caller and the tool are known: a request without a valid
    # token is refused as such, and an unknown tool is a 404, whatever its body.
    arguments = body()
    return caller, tool, arguments, None if tool.waits else _run(caller, tool, arguments)


async def call_from_request(
    headers: Mapping[str, str],
    slug: str,
    name: str,
    body: Callable[[], Any],
    *,
    default_agent: str = "",
) -> Answer:
    """Authenticate a request's caller, note that the agent called (``auth.agent_called``),
    read its arguments (``body``) and run the tool; every refusal is a ``ServiceError``.

    All of it runs in one worker thread, the tool's own: one hop off the event loop
    instead of two, a good part of a quick call's cost. A waiting tool then waits on the
    event loop.
    """
    caller, tool, arguments, answer = await sync_to_async(_receive)(
        headers, slug, name, body, default_agent
    )
    if answer is not None:
        return answer
    return await _wait(caller, tool, arguments)

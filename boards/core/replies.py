"""What every agent door shares: reading a JSON body once, and one refusal path (the §4
error shape, with ``WWW-Authenticate`` when a token was missing or wrong)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from pydantic import ValidationError

from boards.core import auth, limits, numbers
from boards.core.errors import (
    BODY,
    InvalidInput,
    MethodNotAllowed,
    PayloadTooLarge,
    ServiceError,
    StoreBusy,
    error_body,
)


def error_response(exc: ServiceError) -> JsonResponse:
    response = JsonResponse(error_body(exc), status=exc.status)
    if isinstance(exc, StoreBusy):
        response["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, MethodNotAllowed):
        response["Allow"] = exc.allow
    return response


def refused(exc: ServiceError, request: HttpRequest) -> JsonResponse:
    """The §4 error answer, with ``WWW-Authenticate`` when a token was missing or wrong."""
    response = error_response(exc)
    for name, value in (auth.challenge(exc, request.headers) or {}).items():
        response[name] = value
    return response


def parse_body(request: HttpRequest, limit: int | None = None) -> Any:
    """The JSON body; an empty body means ``{}`` (seed 000: LLMs call TaskList with nothing).
    At most ``limit`` bytes (the tool API's ``KANBAN_MAX_BODY_BYTES`` unless a door says)."""
    limit = settings.KANBAN_MAX_BODY_BYTES if limit is None else limit
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
    problem = limits.json_problem(raw)
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
    field = unpaired_surrogate(data) if _may_hold_surrogate(raw) else None
    if field is not None:
        raise InvalidInput(
            f"{field}: holds half of a UTF-16 surrogate pair (an escape from \\ud800 to "
            "\\udfff without its other half), which is no text; send the whole character",
            field=field,
        )
    return data


# JSON spells a character outside the BMP as two escapes (a surrogate pair), which the
# parser joins; an escape left alone parses into a string no database or UTF-8 encoder
# takes (a 500 deep in a write). Only bodies that can hold one are walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _may_hold_surrogate(raw: bytes) -> bool:
    """An escape of one, or bytes that are not plain UTF-8 (``json.loads`` decodes bytes
    with ``surrogatepass``, so an encoded surrogate or a UTF-16 body parses too)."""
    if _SURROGATE_ESCAPE.search(raw):
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def unpaired_surrogate(data: Any) -> str | None:
    """The path (``tool_input.command``, ``ops.0.subject``) of a string, or a key, that
    holds a lone surrogate, or None. Iterative: the body's depth is already bounded, but
    a walk needs no stack of its own."""
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path or BODY
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                name = f"{path}.{_shown_key(key)}" if path else _shown_key(key)
                if _SURROGATE.search(key):
                    return name
                pending.append((name, item))
        elif isinstance(value, list):
            pending.extend(
                (f"{path}.{i}" if path else str(i), item)
                for i, item in reversed(list(enumerate(value)))
            )
    return None


def _shown_key(key: str) -> str:
    """A key as an error names it: a lone surrogate written as its escape."""
    return key.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")


def validation_details(exc: ValidationError) -> list[dict[str, str]]:
    """Every wrong field, named by its path (``ops.1.subject``; ``(body)`` for the whole)."""
    details = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in error["loc"]]
        # Drop the discriminator tag pydantic inserts for union members (ops.0.create.subject).
        if len(loc) >= 3 and loc[0] == "ops" and loc[2] in {"create", "update", "delete"}:
            del loc[2]
        details.append({"field": ".".join(loc) or BODY, "message": error["msg"]})
    return details

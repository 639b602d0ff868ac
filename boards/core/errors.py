"""Domain errors: every refusal a door can give, with its HTTP status, and their one JSON shape.

``{"error": {"code", "message", "details?"}}``, where ``details`` is typed by the status:

- 400: always a list of ``FieldError`` (``{field, message, ...}``), every wrong field by
  its path (``ops.1.subject``); ``BODY`` names the input as a whole;
- 409: the model of its code in ``CONFLICT_DETAILS`` (or none);
- 503: ``RetryAfter``.

``ErrorBody`` is the JSON Schema of it all (the OpenAPI document and the tool listings
publish it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The field of a problem with the input as a whole (not a JSON object, not JSON at all).
BODY = "(body)"


class FieldError(BaseModel):
    """One wrong field of a refused input: a 400's details are a list of these."""

    model_config = ConfigDict(extra="allow")

    field: str = Field(
        description='The wrong field, by its path in the input ("ops.1.subject"), a header '
        f'("X-Agent"), or "{BODY}" for the input as a whole.'
    )
    message: str = Field(description="What is wrong with it.")


class _Details(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BlockedConflict(_Details):
    """409 ``blocked``: the unfinished tasks this one waits for."""

    blockedBy: list[str]


class ApprovalDeniedConflict(_Details):
    """409 ``approval_denied``: who denied it."""

    decidedBy: str


class AwaitingApprovalConflict(_Details):
    """409 ``awaiting_approval``: whose request waits for a person."""

    requestedBy: str


class ApprovalRequiredConflict(_Details):
    """409 ``approval_required``: the task whose approval is missing (the task itself, or a
    blocker that holds it back) and its approval state."""

    blocker: str
    approval: str


class StaleVersionConflict(_Details):
    """409 ``stale_version``: the task's version now, and the task as it is now (an agent's
    write)."""

    task: dict[str, Any] | None = None
    version: int | None = None


class LeaseLostConflict(_Details):
    """409 ``lease_lost``: who owns the task now (null: nobody)."""

    owner: str | None


class HeldConflict(_Details):
    """409 ``held_by_another``: the agent whose live work it is."""

    owner: str


class WipLimitConflict(_Details):
    """409 ``wip_limit``: the limit reached, per agent (with the tasks held) or the board's."""

    limit: int
    scope: Literal["agent", "board"]
    held: list[str] | None = None
    inProgress: int | None = None


class UsageLimitConflict(_Details):
    """409 ``usage_limit``: the sums the report would have pushed past their caps."""

    taskCostUsd: float
    boardSpentUsd: float


class BudgetExhaustedConflict(_Details):
    """409 ``budget_exhausted``: what the board spent, of its budget."""

    spentUsd: float
    budgetUsd: float


# The one place a 409's details are declared: by its code. A code not listed has none.
CONFLICT_DETAILS: dict[str, type[_Details]] = {
    "blocked": BlockedConflict,
    "approval_denied": ApprovalDeniedConflict,
    "awaiting_approval": AwaitingApprovalConflict,
    "approval_required": ApprovalRequiredConflict,
    "stale_version": StaleVersionConflict,
    "lease_lost": LeaseLostConflict,
    "held_by_another": HeldConflict,
    "wip_limit": WipLimitConflict,
    "usage_limit": UsageLimitConflict,
    "budget_exhausted": BudgetExhaustedConflict,
}


class RetryAfter(_Details):
    """503 ``store_busy``: when to try again."""

    retryAfterSeconds: int


class ServiceError(Exception):
    status = 400
    code = "invalid_input"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details


class InvalidInput(ServiceError):
    """A 400: the input is wrong. ``field`` names what is wrong (with ``extra`` keys for
    its entry), or ``details`` lists several; an entry without a message gets the error's
    own, less the ``<field>: `` it starts with. Without either, details are empty."""

    status = 400
    code = "invalid_input"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        details: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> None:
        if details is None:
            details = [{"field": field, **extra}] if field is not None else []
        elif field is not None or extra:
            raise TypeError("InvalidInput: give field (and its extra keys) or details, not both")
        super().__init__(message, code=code, details=[_entry(message, d) for d in details])


def _entry(message: str, detail: Mapping[str, Any]) -> dict[str, Any]:
    if "message" not in detail:
        prefix = f"{detail['field']}: "
        detail = {**detail, "message": message.removeprefix(prefix)}
    return FieldError.model_validate(detail).model_dump()


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    """A 409: the board's state refuses the change. Its ``details`` (if any) are checked
    against its code's model in ``CONFLICT_DETAILS``."""

    status = 409
    code = "conflict"

    def __init__(
        self, message: str, *, code: str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message, code=code)
        if details is not None:
            model = CONFLICT_DETAILS.get(self.code)
            if model is None:
                raise TypeError(f"409 {self.code}: declare its details in CONFLICT_DETAILS")
            self.details = model.model_validate(details).model_dump(exclude_unset=True)


class PermissionDenied(ServiceError):
    status = 403
    code = "forbidden"


class Gone(ServiceError):
    """A 410: what the request names existed and is used up for good (an invite used,
    expired or revoked)."""

    status = 410
    code = "gone"


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class PayloadTooLarge(ServiceError):
    status = 413
    code = "payload_too_large"


class UriTooLong(ServiceError):
    status = 414
    code = "uri_too_long"


class HeadersTooLarge(ServiceError):
    status = 431
    code = "headers_too_large"


class MethodNotAllowed(ServiceError):
    """A door called with a method it does not take; ``allow`` lists the ones it does
    (the answer's ``Allow`` header)."""

    status = 405
    code = "method_not_allowed"

    def __init__(self, message: str, *, allow: str = "POST") -> None:
        super().__init__(message)
        self.allow = allow


class TooManyRequests(ServiceError):
    status = 429
    code = "too_many_requests"


class StoreBusy(ServiceError):
    """The database stayed locked past its busy timeout (SQLite under a burst of big
    writes): nothing was changed, and the same call a moment later will go through."""

    status = 503
    code = "store_busy"
    retry_after = 2


def store_busy(exc: BaseException) -> StoreBusy | None:
    """The refusal for a database error that means "busy, try again", or None."""
    text = str(exc).lower()
    if "database is locked" in text or "database table is locked" in text:
        return StoreBusy(
            "The board's database is busy with other writes; nothing was changed. "
            f"Retry in {StoreBusy.retry_after} seconds",
            details=RetryAfter(retryAfterSeconds=StoreBusy.retry_after).model_dump(),
        )
    return None


class InternalError(ServiceError):
    status = 500
    code = "internal_error"


# One sentence per refusal code: every site that refuses with a code listed here builds the
# refusal with ``refuse(code, **facts)``, so an agent (or a person) meets one wording for
# one rule, whichever door or path refused it (tests/core/test_refusals.py walks the source).
REFUSALS: dict[str, tuple[type[ServiceError], str]] = {
    "task_not_found": (NotFound, "Task #{number} not found"),
    "board_not_found": (NotFound, "Board {slug!r} not found"),
    "terminal": (Conflict, "Task #{number} is {status}"),
    "owned": (Conflict, "Task #{number} is owned by {owner}"),
    "blocked": (Conflict, "Task #{number} is blocked by {blockedBy}"),
    "awaiting_approval": (Conflict, "Task #{number} awaits approval requested by {requestedBy}"),
    "approval_required": (
        Conflict,
        "Task #{number} waits for a person to approve #{blocker}: agents ask for it with "
        "TaskClaim, and only a person with the approver role decides",
    ),
    "approval_denied": (
        Conflict,
        "Task #{number} was denied by {decidedBy}{note}; only a person can reopen it",
    ),
    "held_by_another": (
        Conflict,
        "Task #{number} is in progress under {owner}, whose lease is live; only {owner}, a "
        "person or an orchestrator's token can change its status or delete it",
    ),
    "chain_changed": (
        Conflict,
        "What waits on #{number} changed since it was shown ({shown} to cancel then, {count} "
        "now): nothing was cancelled; look at it again before cancelling",
    ),
    "not_awaiting_approval": (Conflict, "Task #{number} is not awaiting approval"),
    "stale_version": (
        Conflict,
        "Task #{number} is at version {version}, not {seen}: it changed since it was read; "
        "read it again and retry",
    ),
}


def refuse(code: str, **facts: Any) -> ServiceError:
    """The refusal ``code``, its sentence filled with ``facts``: a list of task numbers
    reads "#1, #2". The facts its ``CONFLICT_DETAILS`` model declares are a 409's details."""
    kind, template = REFUSALS[code]
    message = template.format(**{name: _shown(value) for name, value in facts.items()})
    if kind is not Conflict:
        return kind(message, code=code)
    model = CONFLICT_DETAILS.get(code)
    details = {k: v for k, v in facts.items() if model is not None and k in model.model_fields}
    return Conflict(message, code=code, details=details or None)


def _shown(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return ", ".join(f"#{item}" for item in value)
    return value


def error_body(exc: ServiceError) -> dict[str, Any]:
    """SPEC §4's error shape: ``{"error": {"code", "message", "details?"}}``."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.details is not None:
        error["details"] = exc.details
    return {"error": error}


ConflictDetails = (
    BlockedConflict
    | ApprovalDeniedConflict
    | AwaitingApprovalConflict
    | ApprovalRequiredConflict
    | StaleVersionConflict
    | LeaseLostConflict
    | HeldConflict
    | WipLimitConflict
    | UsageLimitConflict
    | BudgetExhaustedConflict
)


class ErrorInfo(BaseModel):
    code: str = Field(description='What went wrong, for code to act on ("blocked", "cycle"…).')
    message: str = Field(description="What went wrong, for the agent to read.")
    details: list[FieldError] | ConflictDetails | RetryAfter | None = Field(
        None,
        description="400: every wrong field ([{field, message, ...}]); 409: the conflict's "
        "facts, by code; 503: when to retry. Absent when there is nothing more to say.",
    )


class ErrorBody(BaseModel):
    """Every refusal: a 4xx or 5xx answer, or an MCP tool result with isError: true (as text)."""

    error: ErrorInfo

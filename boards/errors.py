"""Domain errors: every refusal a door can give, with its HTTP status, and their one JSON shape."""

from typing import Any


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
    status = 400
    code = "invalid_input"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class PermissionDenied(ServiceError):
    status = 403
    code = "forbidden"


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class PayloadTooLarge(ServiceError):
    status = 413
    code = "payload_too_large"


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
            details={"retryAfterSeconds": StoreBusy.retry_after},
        )
    return None


class InternalError(ServiceError):
    status = 500
    code = "internal_error"


def error_body(exc: ServiceError) -> dict[str, Any]:
    """SPEC §4's error shape: ``{"error": {"code", "message", "details?"}}``."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.details is not None:
        error["details"] = exc.details
    return {"error": error}

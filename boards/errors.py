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


class InternalError(ServiceError):
    status = 500
    code = "internal_error"


def error_body(exc: ServiceError) -> dict[str, Any]:
    """SPEC §4's error shape: ``{"error": {"code", "message", "details?"}}``."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.details is not None:
        error["details"] = exc.details
    return {"error": error}

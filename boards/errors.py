"""Domain errors: every refusal a service can give, with the HTTP status the API maps it to."""

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

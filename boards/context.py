"""What every page's template may read: the count of what waits for the person."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from . import permissions


def inbox_count(request: HttpRequest) -> dict[str, Any]:
    """``inbox_count``: how many items wait for the logged-in person (read only when a
    page shows it)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_count": SimpleLazyObject(lambda: len(permissions.inbox(user)))}

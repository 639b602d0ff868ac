"""What every page's template may read: the count of what waits for the person, and
whether they have a passkey."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from boards.models import Passkey
from boards.needs import inbox


def inbox_count(request: HttpRequest) -> dict[str, Any]:
    """``inbox_count``: how many items wait for the logged-in person (read only when a
    page shows it)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"inbox_count": SimpleLazyObject(lambda: inbox.inbox_count(user))}


def has_passkey(request: HttpRequest) -> dict[str, Any]:
    """``has_passkey``: the logged-in person has one, so the page asks for it before a
    step-up approval (read only when a page shows it). The page says so, not the
    fragments pushed to every viewer of a board."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"has_passkey": SimpleLazyObject(lambda: Passkey.objects.filter(user=user).exists())}

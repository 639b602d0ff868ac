"""What every people's page shares: the request type, who is acting, the refusal as a page shows it, and the board access check."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.html import escape
from django_htmx.middleware import HtmxDetails

from .. import permissions
from ..errors import NotFound, ServiceError
from ..models import (
    Board,
    Role,
)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _person(request: HtmxHttpRequest) -> str:
    return request.user.get_username()


BoardView = Callable[..., HttpResponse]


# A person's action on one task (``TASK_ACTIONS``): what it returns is not used.
TaskAction = Callable[[HtmxHttpRequest, Board, Role, int], object]


def _refusal(request: HtmxHttpRequest, exc: ServiceError) -> HttpResponse:
    """A refused action as the page shows it: an alert for htmx, else a plain page."""
    body = f'<p class="error" role="alert">{escape(exc.message)}</p>'
    return HttpResponse(body, status=exc.status)


def board_access(action: str) -> Callable[[BoardView], BoardView]:
    """Log in, find the board, and check the person's role for ``action`` (``permissions``).

    The view receives the board and the person's role instead of the slug. A
    board the person is not a member of is a 404, as if it did not exist.
    """

    def decorate(view: BoardView) -> BoardView:
        @login_required
        @wraps(view)
        def wrapper(request: HtmxHttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponse:
            board = get_object_or_404(Board, slug=slug)
            try:
                role = permissions.check(request.user, board, action)
            except NotFound as exc:
                raise Http404(exc.message) from exc
            except ServiceError as exc:
                return _refusal(request, exc)
            return view(request, board, role, *args, **kwargs)

        return wrapper

    return decorate

"""What every people's page shares: the request type, who is acting, the board access
check with the one refusal path, and the secrets shown once."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django_htmx.http import trigger_client_event
from django_htmx.middleware import HtmxDetails

from boards.core import permissions
from boards.core.errors import NotFound, PermissionDenied, ServiceError, StoreBusy, error_body
from boards.models import Board, Role


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _person(request: HtmxHttpRequest) -> str:
    return request.user.get_username()


BoardView = Callable[..., HttpResponse]


# A person's action on one task (``TASK_ACTIONS``): what it returns is not used.
TaskAction = Callable[[HtmxHttpRequest, Board, Role, int], object]

# An htmx answer to a refusal richer than the bare alert (the task's panel showing it), or
# None for the alert; it gets the refusal and the view's own arguments.
RefusedFragment = Callable[..., HttpResponse | None]

REFUSED_PAGE = "boards/refused.html"

# The task panel as htmx names it in a request's HX-Target and HX-Source ("tag#id").
DETAIL = "section#detail"
MOVE_MENU = "div#move-menu"


def tell_asked(request: HtmxHttpRequest, response: HttpResponse) -> HttpResponse:
    """Tell the page (``kanban:asked`` on ``#detail``) that a person asked for what this
    answer shows in the task panel — a click, a form, a key, or a refused move — so it opens
    the panel as a sheet on a narrow screen and gives it the focus. The page's own requests
    stay quiet: a refresh after a push (sent from the panel) and a move that was done (sent
    from the Move menu: the board shows it)."""
    if not request.htmx or request.headers.get("HX-Target") != DETAIL:
        return response
    source = request.headers.get("HX-Source")
    if source == DETAIL or (source == MOVE_MENU and response.status_code < 400):
        return response
    trigger_client_event(response, "kanban:asked", {"target": "#detail"})
    return response


def refusal(
    request: HtmxHttpRequest,
    exc: ServiceError,
    *,
    back: str = "",
    page: str = REFUSED_PAGE,
    as_json: bool = False,
    board: Board | None = None,
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """The one answer to a refused request (a ``ServiceError`` a people's view raised).

    - a JSON door (``as_json``): SPEC §4's error body, with the refusal's status;
    - htmx: the alert fragment with the refusal's status (htmx 4 swaps a 4xx into the
      request's target like any answer, so the alert shows where the result would have);
    - a plain post with a page to go ``back`` to: the message, flashed, and a redirect
      there (post/redirect/get), unless the person's role refused it (403): the page
      would offer the same button again, so that is a page saying why;
    - anything else: ``page`` saying why (``refused`` in its context, beside what
      ``context`` gives the page), with the status.
    """
    if as_json:
        response: HttpResponse = JsonResponse(error_body(exc), status=exc.status)
    elif request.htmx:
        said = {"message": exc.message}
        response = render(request, "boards/notice.html#alert", said, status=exc.status)
        tell_asked(request, response)
    elif back and request.method == "POST" and not isinstance(exc, PermissionDenied):
        messages.error(request, exc.message)
        return redirect(back)
    else:
        shown: dict[str, Any] = {**(context or {}), "refused": exc.message, "board": board}
        response = render(request, page, shown, status=exc.status)
    if isinstance(exc, StoreBusy):
        response["Retry-After"] = str(exc.retry_after)
    patch_vary_headers(response, ["HX-Request"])
    return response


def board_access(
    action: str,
    *,
    back: str = "",
    as_json: bool = False,
    fragment: RefusedFragment | None = None,
    page: str = REFUSED_PAGE,
    page_context: Callable[[Board], dict[str, Any]] | None = None,
) -> Callable[[BoardView], BoardView]:
    """Log in, find the board, check the person's role for ``action`` (``permissions``),
    and answer whatever the view refuses through ``refusal``.

    The view receives the board and the person's role instead of the slug. A board the
    person is not a member of is a 404, as if it did not exist. ``back`` names the page
    (a URL name taking the board's slug) a refused plain post returns to; ``fragment``
    may answer a refused htmx request in place of the bare alert; ``page`` (with what
    ``page_context`` gives it) says why a refused plain request was refused.
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
                return refusal(request, exc, as_json=as_json, board=board)
            try:
                return view(request, board, role, *args, **kwargs)
            except ServiceError as exc:
                if fragment is not None and request.htmx:
                    answer = fragment(request, exc, board, role, *args, **kwargs)
                    if answer is not None:
                        return answer
                address = reverse(back, args=[board.slug]) if back else ""
                more = page_context(board) if page_context is not None else None
                return refusal(
                    request,
                    exc,
                    back=address,
                    as_json=as_json,
                    board=board,
                    page=page,
                    context=more,
                )

        return wrapper

    return decorate


def refusals(
    page: str = REFUSED_PAGE,
    *,
    back: str = "",
    as_json: bool = False,
    page_context: Callable[[HttpRequest], dict[str, Any]] | None = None,
) -> Callable[[BoardView], BoardView]:
    """``refusal`` for a view outside any board (an invite link, the person's own page
    and JSON doors, a push's link): what the view raises is answered by ``page`` (with
    ``refused`` and what ``page_context`` gives it), by a flash and a redirect to
    ``back`` (a URL name) for a plain post, or as JSON (``as_json``)."""

    def decorate(view: BoardView) -> BoardView:
        @wraps(view)
        def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except ServiceError as exc:
                more = page_context(request) if page_context is not None else None
                address = reverse(back) if back else ""
                return refusal(request, exc, page=page, back=address, as_json=as_json, context=more)

        return wrapper

    return decorate


# -- secrets shown once ---------------------------------------------------------------------

SHOWN_ONCE = "kanban:shown-once:"


def show_once(request: HttpRequest, key: str, board: Board, **shown: Any) -> None:
    """Keep a new secret (a token, an invite link, a webhook secret) and what the page
    says of it for the next page of ``board``, and only that one: the post that made it
    redirects, so a reload never makes another, and the page after shows it no more.
    The pages that show one are never cached (``never_cache``)."""
    request.session[SHOWN_ONCE + key] = {"board": board.pk, **shown}


def take_shown(request: HttpRequest, key: str, board: Board) -> dict[str, Any] | None:
    """The secret ``show_once`` kept under ``key`` for this board, now forgotten; None
    when there is none (or it was made on another board, in another tab)."""
    shown = request.session.pop(SHOWN_ONCE + key, None)
    if not isinstance(shown, dict) or shown.pop("board", None) != board.pk:
        return None
    return shown

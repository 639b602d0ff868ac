"""The board pages: the list of boards, the inbox, a board, its columns, reset and messages."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied as Forbidden
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.timesince import timesince
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url

from boards.core import permissions, selectors, services
from boards.core.activity import SIGNALS
from boards.core.errors import InvalidInput
from boards.models import Board, Role
from boards.needs.inbox import inbox_count, inbox_counts, inbox_items
from boards.web.filters import board_filter
from boards.web.forms import BoardCreateForm, bound, submit
from boards.web.rendering import board_context, inbox_context, stale_agents
from boards.web.views.common import HtmxHttpRequest, _person, board_access


@login_required
@require_http_methods(["GET", "POST"])
def board_list(request: HtmxHttpRequest) -> HttpResponse:
    """The boards this person may see; a site admin also creates one here."""
    may_create = bool(request.user.is_superuser)
    if request.method == "POST" and not may_create:
        raise Forbidden("Only a site admin creates boards")
    form = bound(request, BoardCreateForm)
    created: list[Board] = []

    def create(data: dict[str, str]) -> None:
        created.append(
            services.board_create(slug=data["slug"], name=data["name"], actor=_person(request))
        )

    if form.is_bound and submit(form, create):
        messages.success(request, f"Board {created[0].name} created.")
        return redirect("board", slug=created[0].slug)
    boards = permissions.visible_boards(request.user)
    stats = selectors.board_progress(boards)
    waiting = inbox_counts(request.user)
    rows = [
        {
            "board": b,
            "total": stats.get(b.pk, {}).get("total", 0),
            "done": stats.get(b.pk, {}).get("done", 0),
            "failed": b.failed_count,
            "stuck": stats.get(b.pk, {}).get("stuck", 0),
            "waiting": waiting.get(b.pk, 0),
        }
        for b in boards
    ]
    context = {"rows": rows, "form": form, "may_create": may_create}
    status = 400 if form.is_bound else 200
    return render(request, "boards/board_list.html", context, status=status)


@require_GET
@login_required
def inbox_page(request: HtmxHttpRequest) -> HttpResponse:
    """Everything that waits for this person, on every board they may act on, grouped by
    board and live over one socket (SPEC §12)."""
    return render(
        request,
        "boards/inbox.html",
        inbox_context(inbox_items(request.user), inbox_count(request.user)),
    )


@require_GET
@board_access("view")
def board_detail(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board, its columns kept to the search and filters in the query string; to the
    search box (htmx) only the columns, their counts and the page's sequence, which its
    socket continues from. A search that cannot be made answers 400 and says why."""
    chosen = board_filter(request.GET)
    status = 400 if chosen.error else 200
    if request.htmx and not request.htmx.history_restore_request:
        if chosen.error:
            response = render(
                request,
                "boards/board.html#filter-error",
                {"filter": chosen, "oob": True},
                status=400,
            )
            return push_url(response, False)
        context = board_context(board, chosen)
        response = render(request, "boards/board.html#filtered", context)
        # The address to share: the filters in use, none left empty.
        address = reverse("board", args=[board.slug])
        push_url(response, f"{address}?{chosen.query}" if chosen.query else address)
    else:
        context = board_context(board, chosen)
        context["can"] = permissions.capabilities(role)
        context["notify_kinds"] = selectors.notify_kinds(board, request.user)
        context["signals"] = SIGNALS
        response = render(request, "boards/board.html", context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
@board_access("reset", back="board")
def board_reset_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    if request.POST.get("confirm") != board.slug:
        raise InvalidInput(
            f"Type the board's slug ({board.slug}) to confirm the reset.", field="confirm"
        )
    services.board_reset(board=board, actor=_person(request))
    messages.success(request, "Board reset: every task was deleted and numbering restarts at 1.")
    return redirect("board", slug=board.slug)


def _queued(board: Board, recipient: str) -> str:
    """What a person reads once a message is queued: whether its agent will read it soon."""
    row = next((r for r in selectors.roster(board) if r["name"] == recipient), None)
    if row is None or row["state"] not in ("silent", "gone"):
        return "Message queued."
    return (
        f"Message queued; {recipient} is {row['state']} (last call "
        f"{timesince(row['last_seen'])} ago): it reads it when it calls again."
    )


@require_POST
@board_access("message", back="board")
def message_send_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    message = services.message_send(
        board=board,
        sender=_person(request),
        recipient=request.POST.get("recipient", ""),
        # "note": the "Needs you" item's note box, sent with its Message action
        body=request.POST.get("body") or request.POST.get("note", ""),
        task_id=request.POST.get("task") or None,
    )
    sent = _queued(board, message.recipient)
    if request.htmx:
        return render(request, "boards/notice.html#status", {"message": sent})
    messages.success(request, sent)
    return redirect("board", slug=board.slug)


@require_GET
@board_access("view")
def board_column(request: HtmxHttpRequest, board: Board, role: Role, key: str) -> HttpResponse:
    """The next cards of a column ("show more"), appended in place by htmx (kept to the
    board's search and filters, which the button's URL carries)."""
    chosen = board_filter(request.GET)
    views, more = selectors.column_page(
        board, key, request.GET.get("cursor") or None, filters=chosen.filter
    )
    context = {
        "board": board,
        "col": {"key": key, "views": views, "more": more},
        "stale": stale_agents(selectors.roster(board)),
        "filter": chosen,
    }
    return render(request, "boards/board.html#column-page", context)

"""The board for people: pages, htmx fragments and actions, all writes through services.

The same partials (``boards/board.html#card`` …) render the full page, the htmx
answers and the fragments pushed over the WebSocket.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from . import selectors, services
from .errors import InvalidInput, ServiceError
from .models import Agent, AgentToken, Board, Status, Task


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


COLUMN_TITLES = {
    "pending": "Pending",
    "in_progress": "In progress",
    "blocked": "Blocked",
    "completed": "Completed",
}
# Where a card dropped on a column goes (Blocked is derived, so it is no drop target).
DROP_STATUS = {
    "pending": Status.PENDING,
    "in_progress": Status.IN_PROGRESS,
    "completed": Status.COMPLETED,
}


def _person(request: HtmxHttpRequest) -> str:
    return request.user.get_username()


def _roster(board: Board) -> list[dict[str, Any]]:
    """Every agent seen on the board, with what it owns and whether it went quiet (one query)."""
    from django.db.models import Count, OuterRef, Subquery
    from django.db.models.functions import Coalesce

    idle = timezone.now() - timedelta(seconds=settings.KANBAN_AGENT_IDLE_SECONDS)

    def owned(*statuses: str) -> Coalesce:
        counted = (
            Task.objects.filter(board=board, owner=OuterRef("name"), status__in=statuses)
            .order_by()
            .values("owner")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(counted), 0)

    agents = (
        Agent.objects.filter(board=board)
        .order_by("name")
        .annotate(
            open_count=owned(Status.PENDING, Status.IN_PROGRESS),
            in_progress_count=owned(Status.IN_PROGRESS),
        )
    )
    return [
        {
            "name": agent.name,
            "last_seen": agent.last_seen,
            "owned": agent.open_count,
            "in_progress": agent.in_progress_count,
            "stale": bool(agent.in_progress_count) and agent.last_seen < idle,
        }
        for agent in agents
    ]


def _stale_agents(roster: list[dict[str, Any]]) -> set[str]:
    return {row["name"] for row in roster if row["stale"]}


def board_context(board: Board) -> dict[str, Any]:
    # The sequence is read before the tasks, so the page is at least as new as it says.
    seq = Board.objects.filter(pk=board.pk).values_list("last_seq", flat=True).get()
    snapshot = selectors.board_snapshot(board)
    counts = snapshot.counts()
    columns: dict[str, list[selectors.TaskView]] = {key: [] for key in COLUMN_TITLES}
    for view in snapshot.ordered():
        columns[view.column].append(view)
    roster = _roster(board)
    owners = sorted(
        {v.task.owner for v in snapshot.views.values() if v.task.owner}
        | {r["name"] for r in roster}
    )
    return {
        "board": board,
        "seq": seq,
        "counts": counts,
        "total": len(snapshot.views),
        "done": counts["completed"],
        "columns": [
            {"key": key, "title": title, "views": columns[key], "count": len(columns[key])}
            for key, title in COLUMN_TITLES.items()
        ],
        # The same order as the pushed strip: oldest request first.
        "approvals": selectors.approval_requests(board),
        "roster": roster,
        "stale": _stale_agents(roster),
        "owners": owners,
        "idle_seconds": settings.KANBAN_AGENT_IDLE_SECONDS,
    }


def header_context(board: Board) -> dict[str, Any]:
    counts = selectors.board_counts(board)
    total = sum(
        counts[k] for k in ("pending", "blocked", "in_progress", "completed", "failed", "cancelled")
    )
    column_counts = {
        "pending": counts["pending"],
        "in_progress": counts["in_progress"],
        "blocked": counts["blocked"],
        "completed": counts["completed"] + counts["failed"] + counts["cancelled"],
    }
    return {
        "board": board,
        "counts": counts,
        "total": total,
        "done": counts["completed"],
        "columns": [
            {"key": key, "title": title, "count": column_counts[key]}
            for key, title in COLUMN_TITLES.items()
        ],
        "approvals": selectors.approval_requests(board),
        "roster": _roster(board),
        "oob": True,
    }


def render_board_fragments(
    board_id: int, numbers: Iterable[int], *, full: bool = False, header: bool = True
) -> dict[str, Any]:
    """Fragments that bring an open board up to date for the given task numbers.

    Each card fragment deletes the card wherever it is and appends the new
    rendering to the column it belongs in now (the page keeps each column in
    number order), so applying it twice or out of place is harmless.
    """
    board = Board.objects.get(pk=board_id)
    if full:
        page = board_context(board)
        page["oob"] = True
        body = render_to_string("boards/board.html#board-body", page)
        return {"seq": page["seq"], "full": body, "cards": {}, "header": {}}
    seq = board.last_seq
    numbers = sorted(set(numbers))
    views = selectors.task_views(board, numbers, with_children=False)
    # Without a header re-render, cards carry no stale mark: the page sets it from the roster.
    context = header_context(board) if header else None
    stale = _stale_agents(context["roster"]) if context else set()
    cards: dict[str, str] = {}
    for number in numbers:
        html = f'<div id="task-{number}" hx-swap-oob="delete"></div>'
        view = views.get(number)
        if view is not None:
            card = render_to_string(
                "boards/board.html#card", {"board": board, "view": view, "stale": stale}
            )
            html += f'<template hx-swap-oob="beforeend:#cards-{view.column}">{card}</template>'
        cards[str(number)] = html
    return {
        "seq": seq,
        "cards": cards,
        "header": render_header_parts(context) if context else {},
        "full": None,
    }


def render_header_parts(context: dict[str, Any]) -> dict[str, str]:
    """The board's header pieces by element id, each pushed only when it changed."""
    parts: dict[str, str] = {
        "board-summary": render_to_string("boards/board.html#summary", context),
        "approvals": render_to_string("boards/board.html#approvals", context),
        "roster": render_to_string("boards/roster.html", context),
    }
    for col in context["columns"]:
        parts[f"count-{col['key']}"] = render_to_string(
            "boards/board.html#count", {**context, "col": col}
        )
    return parts


@login_required
@require_GET
def board_list(request: HtmxHttpRequest) -> HttpResponse:
    boards = list(Board.objects.all())
    from django.db.models import Count, Q

    stats = {
        row["board"]: row
        for row in Task.objects.values("board")
        .annotate(total=Count("id"), done=Count("id", filter=Q(status=Status.COMPLETED)))
        .order_by()
    }
    rows = [
        {
            "board": b,
            "total": stats.get(b.pk, {}).get("total", 0),
            "done": stats.get(b.pk, {}).get("done", 0),
        }
        for b in boards
    ]
    return render(request, "boards/board_list.html", {"rows": rows})


def _board_or_404(slug: str) -> Board:
    return get_object_or_404(Board, slug=slug)


@login_required
@require_GET
def board_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    board = _board_or_404(slug)
    return render(request, "boards/board.html", board_context(board))


def _detail_context(board: Board, number: int) -> dict[str, Any]:
    try:
        view = selectors.task_view(board, number)
    except ServiceError as exc:
        raise Http404(exc.message) from exc
    return {
        "board": board,
        "view": view,
        "task": view.task,
        "history": selectors.task_history(board, number),
        "agents": list(Agent.objects.filter(board=board).values_list("name", flat=True)),
        "statuses": [s for s in Status if s != view.task.status],
    }


def _detail_response(
    request: HtmxHttpRequest, board: Board, number: int, *, status: int = 200, error: str = ""
) -> HttpResponse:
    context = _detail_context(board, number)
    context["error"] = error
    if request.htmx:
        response = render(request, "boards/task_detail.html#panel", context, status=status)
    else:
        response = render(request, "boards/task_detail.html", context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
@require_GET
def task_detail(request: HtmxHttpRequest, slug: str, number: int) -> HttpResponse:
    return _detail_response(request, _board_or_404(slug), number)


def _run_action(request: HtmxHttpRequest, board: Board, number: int, action: str) -> None:
    person = _person(request)
    post = request.POST
    if action == "status":
        status = post.get("status", "")
        if status in DROP_STATUS:
            status = DROP_STATUS[status]
        if status not in Status.values:
            # Deleting has its own confirmed action; a status post never deletes.
            raise InvalidInput(f"status: unknown status {status[:40]!r}")
        services.task_update(board=board, actor=person, task_id=number, status=status)
    elif action == "reassign":
        services.task_reassign(
            board=board, actor=person, task_id=number, owner=post.get("owner", "")
        )
    elif action == "delete":
        services.task_delete(board=board, actor=person, task_id=number)
    elif action in ("approve", "deny"):
        services.approval_decide(
            board=board,
            person=person,
            task_id=number,
            approve=action == "approve",
            note=post.get("note", ""),
        )
    elif action == "require-approval":
        services.approval_require(
            board=board,
            person=person,
            task_id=number,
            required=post.get("required", "") in ("1", "true", "on"),
        )
    elif action == "message":
        task = Task.objects.filter(board=board, number=number).first()
        recipient = post.get("recipient", "") or (task.owner if task else "")
        services.message_send(
            board=board,
            sender=person,
            recipient=recipient,
            body=post.get("body", ""),
            task_id=number,
        )
    else:
        raise Http404("Unknown action")


@login_required
@require_POST
def task_action(request: HtmxHttpRequest, slug: str, number: int, action: str) -> HttpResponse:
    board = _board_or_404(slug)
    try:
        _run_action(request, board, number, action)
    except ServiceError as exc:
        if (
            request.htmx
            and action != "delete"
            and Task.objects.filter(board=board, number=number).exists()
        ):
            return _detail_response(request, board, number, status=exc.status, error=exc.message)
        if request.htmx:
            return HttpResponse(
                f'<p class="error" role="alert">{_escape(exc.message)}</p>', status=exc.status
            )
        messages.error(request, exc.message)
        return redirect("board", slug=slug)
    if action == "delete" or not Task.objects.filter(board=board, number=number).exists():
        if request.htmx:
            return HttpResponse('<p class="muted">Task deleted.</p>')
        return redirect("board", slug=slug)
    if request.htmx:
        return _detail_response(request, board, number)
    return redirect(reverse("task", args=[slug, number]))


def _escape(text: str) -> str:
    from django.utils.html import escape

    return escape(text)


@login_required
@require_POST
def board_reset(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    board = _board_or_404(slug)
    if request.POST.get("confirm") != board.slug:
        messages.error(request, f"Type the board's slug ({board.slug}) to confirm the reset.")
        return redirect("board", slug=slug)
    services.board_reset(board=board, actor=_person(request))
    messages.success(request, "Board reset: every task was deleted and numbering restarts at 1.")
    return redirect("board", slug=slug)


@login_required
def token_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    board = _board_or_404(slug)
    new_token = ""
    error = ""
    if request.method == "POST":
        try:
            new_token = services.token_issue(
                board=board,
                agent=request.POST.get("agent", ""),
                team=request.POST.get("team") in ("1", "on", "true"),
                created_by=_person(request),
            )
        except ServiceError as exc:
            error = exc.message
    context = {
        "board": board,
        "tokens": AgentToken.objects.filter(board=board).order_by("-created_at"),
        "new_token": new_token,
        "error": error,
        "api_base": request.build_absolute_uri(f"/api/boards/{board.slug}/tools/"),
    }
    return render(request, "boards/tokens.html", context, status=400 if error else 200)


@login_required
@require_POST
def token_revoke(request: HtmxHttpRequest, slug: str, token_id: int) -> HttpResponse:
    board = _board_or_404(slug)
    try:
        services.token_revoke(board=board, token_id=token_id)
    except ServiceError as exc:
        raise Http404(exc.message) from exc
    return redirect("tokens", slug=slug)


@login_required
@require_POST
def message_send(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    board = _board_or_404(slug)
    try:
        services.message_send(
            board=board,
            sender=_person(request),
            recipient=request.POST.get("recipient", ""),
            body=request.POST.get("body", ""),
            task_id=request.POST.get("task") or None,
        )
    except ServiceError as exc:
        if request.htmx:
            return HttpResponse(
                f'<p class="error" role="alert">{_escape(exc.message)}</p>', status=exc.status
            )
        messages.error(request, exc.message)
        return redirect("board", slug=slug)
    if request.htmx:
        return HttpResponse('<p class="ok" role="status">Message queued.</p>')
    messages.success(request, "Message queued.")
    return redirect("board", slug=slug)

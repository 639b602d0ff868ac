"""The board for people: pages, htmx fragments and actions, all writes through services.

What a board looks like lives in ``boards.rendering``; the views choose what to
render and call one service per action.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, password_validation
from django.contrib.auth.decorators import login_required
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.html import escape
from django.utils.timesince import timesince
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url
from django_htmx.middleware import HtmxDetails

from . import charts, clients, gates, metrics, numbers, permissions, selectors, services, tools
from .activity import SIGNALS
from .errors import InvalidInput, NotFound, ServiceError, error_body
from .filters import board_filter
from .models import (
    TERMINAL_STATUSES,
    Agent,
    AgentToken,
    ApprovalState,
    Board,
    GateRule,
    Invite,
    Membership,
    Priority,
    Reason,
    Role,
    Status,
    Task,
)
from .rendering import (
    DROP_STATUS,
    board_context,
    header_context,
    inbox_context,
    stale_agents,
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


@login_required
@require_GET
def board_list(request: HtmxHttpRequest) -> HttpResponse:
    boards = permissions.visible_boards(request.user)
    stats = selectors.board_progress(boards)
    waiting = Counter(item.board.pk for item in permissions.inbox(request.user))
    rows = [
        {
            "board": b,
            "total": stats.get(b.pk, {}).get("total", 0),
            "done": stats.get(b.pk, {}).get("done", 0),
            "failed": b.failed_count,
            "stuck": stats.get(b.pk, {}).get("stuck", 0),
            "waiting": waiting[b.pk],
        }
        for b in boards
    ]
    return render(request, "boards/board_list.html", {"rows": rows})


@require_GET
@login_required
def inbox_page(request: HtmxHttpRequest) -> HttpResponse:
    """Everything that waits for this person, on every board they may act on, grouped by
    board and live over one socket (SPEC §12)."""
    return render(request, "boards/inbox.html", inbox_context(permissions.inbox(request.user)))


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


def _first_actions(view: selectors.TaskView, role: Role) -> list[dict[str, Any]]:
    """What the task's state asks of a person, most likely first: the panel's first
    controls (an approval asked has its own form, with the note and version)."""
    task = view.task
    actions: list[dict[str, Any]] = []

    def add(action: str, label: str, *, blocker: int | None = None, danger: bool = False) -> None:
        if permissions.may(role, action):
            actions.append({"action": action, "label": label, "blocker": blocker, "danger": danger})

    waited_on = (
        task.status in (Status.FAILED, Status.CANCELLED)
        and Task.objects.filter(blocker_links__blocker=task).unfinished().exists()
    )
    if task.status == Status.FAILED or task.needs == Reason.FAILED:
        add("retry", "Retry")
    if waited_on:
        add("skip", "Go on without it")
    if task.status == Status.CANCELLED:
        add("reopen", "Reopen")
    if waited_on:
        add("cancel-chain", "Cancel it and what waits on it", danger=True)
    if view.stuck:
        for n in view.stuck_on:
            add("unblock", f"Go on without #{n}", blocker=n)
    if task.needs == Reason.NOT_STARTED:
        add("release", "Release to anyone")
    return actions


def _moves(task: Task) -> list[dict[str, str]]:
    """The status moves the panel offers; finishing failed or gated work is confirmed."""
    gated = task.approval_required and task.approval_state != ApprovalState.APPROVED
    moves = []
    for status in Status:
        if status == task.status:
            continue
        confirm = ""
        if status in TERMINAL_STATUSES and task.status == Status.FAILED:
            confirm = (
                f"#{task.number} failed. Mark it {status.label.lower()} anyway? "
                "What waits on it goes on as if it had."
                if status == Status.COMPLETED
                else f"#{task.number} failed. Mark it {status.label.lower()}?"
            )
        elif status in TERMINAL_STATUSES and gated:
            confirm = (
                f"#{task.number} waits for a person's approval. Mark it "
                f"{status.label.lower()} without deciding it?"
                if task.approval_state == ApprovalState.REQUESTED
                else f"#{task.number} needs a person's approval and has none. Mark it "
                f"{status.label.lower()} anyway?"
            )
        moves.append({"value": status.value, "label": status.label, "confirm": confirm})
    return moves


def _detail_context(board: Board, number: int, role: Role) -> dict[str, Any]:
    try:
        view = selectors.task_view(board, number)
    except ServiceError as exc:
        raise Http404(exc.message) from exc
    asked = view.task.approval_state == ApprovalState.REQUESTED and not view.task.is_terminal
    return {
        "board": board,
        "view": view,
        "task": view.task,
        "asked": asked,
        "first_actions": _first_actions(view, role),
        "moves": _moves(view.task),
        # Pairs, not the dict: a key like "items" would shadow the dict's own method.
        "metadata": sorted(view.task.metadata.items()),
        "history": selectors.task_history(board, number),
        "agents": list(Agent.objects.filter(board=board).values_list("name", flat=True)),
        "attempts": selectors.attempts(view.task),
        "readiness": selectors.readiness(board, view.task),
        "priorities": Priority.choices,
        "can": permissions.capabilities(role),
    }


def _detail_response(
    request: HtmxHttpRequest,
    board: Board,
    role: Role,
    number: int,
    *,
    status: int = 200,
    error: str = "",
) -> HttpResponse:
    context = _detail_context(board, number, role)
    context["error"] = error
    if request.htmx:
        response = render(request, "boards/task_detail.html#panel", context, status=status)
    else:
        response = render(request, "boards/task_detail.html", context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_GET
@board_access("view")
def task_detail(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> HttpResponse:
    return _detail_response(request, board, role, number)


def _posted_version(value: str | None) -> int | None:
    """The task version a decision was made on (None: the form did not say)."""
    if value is None or value == "":
        return None
    version = numbers.digits(value, field="version")
    if version is None:
        raise InvalidInput("version: the task's version as a whole number", field="version")
    return version


def _act_status(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
    status = request.POST.get("status", "")
    status = DROP_STATUS.get(status, status)
    if status not in Status.values:
        # Deleting has its own confirmed action; a status post never deletes.
        raise InvalidInput(f"status: unknown status {status[:40]!r}", field="status")
    services.task_update(
        board=board,
        actor=_person(request),
        person=True,
        approver=permissions.may(role, "approve"),
        task_id=number,
        status=status,
    )


def _decide(approve: bool) -> TaskAction:
    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> object:
        return services.approval_decide(
            board=board,
            person=_person(request),
            task_id=number,
            approve=approve,
            note=request.POST.get("note", ""),
            version=_posted_version(request.POST.get("version")),
        )

    return act


def _act_message(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
    task = Task.objects.filter(board=board, number=number).first()
    recipient = request.POST.get("recipient", "") or (task.owner if task else "")
    services.message_send(
        board=board,
        sender=_person(request),
        recipient=recipient,
        body=request.POST.get("body", "") or request.POST.get("note", ""),
        task_id=number,
    )


def _decision(service: Callable[..., Any]) -> TaskAction:
    """A decision on what needs a person: the service, with the posted note for the agent
    concerned (SPEC §12) and whether this person may decide approvals."""

    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
        service(
            board=board,
            person=_person(request),
            task_id=number,
            note=request.POST.get("note", ""),
            approver=permissions.may(role, "approve"),
        )

    return act


def _plain(**fields: Callable[[HtmxHttpRequest], Any]) -> TaskAction:
    """A task_update by a person, each field read from the request."""

    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
        values = {name: read(request) for name, read in fields.items()}
        services.task_update(
            board=board,
            actor=_person(request),
            person=True,
            approver=permissions.may(role, "approve"),
            task_id=number,
            **values,
        )

    return act


# Each task action (``permissions.ACTIONS`` says who may take it) and what it does.
TASK_ACTIONS: dict[str, TaskAction] = {
    "status": _act_status,
    "reassign": lambda request, board, role, number: services.task_reassign(
        board=board,
        actor=_person(request),
        person=True,
        task_id=number,
        owner=request.POST.get("owner", ""),
    ),
    "delete": lambda request, board, role, number: services.task_delete(
        board=board, actor=_person(request), person=True, task_id=number
    ),
    "approve": _decide(True),
    "deny": _decide(False),
    "require-approval": lambda request, board, role, number: services.approval_require(
        board=board,
        person=_person(request),
        task_id=number,
        required=request.POST.get("required", "") in ("1", "true", "on"),
    ),
    # A person's retry or reopen: back to pending with its attempts counted afresh.
    "retry": _decision(services.reopen),
    "reopen": _decision(services.reopen),
    "skip": _decision(services.go_on_without),
    "cancel-chain": _decision(services.cancel_chain),
    "release": lambda request, board, role, number: services.release(
        board=board, person=_person(request), task_id=number, note=request.POST.get("note", "")
    ),
    "priority": _plain(priority=lambda request: request.POST.get("priority")),
    # Going on without a blocker (e.g. one that failed) is a person's decision.
    "unblock": _plain(remove_blocked_by=lambda request: [request.POST.get("blocker", "")]),
    "message": _act_message,
}


@require_POST
@board_access("view")
def task_action(
    request: HtmxHttpRequest, board: Board, role: Role, number: int, action: str
) -> HttpResponse:
    if action not in TASK_ACTIONS:
        raise Http404("Unknown action")
    if not permissions.may(role, action):
        return _refusal(request, permissions.refusal(role, action))
    try:
        TASK_ACTIONS[action](request, board, role, number)
    except ServiceError as exc:
        if (
            request.htmx
            and action != "delete"
            and Task.objects.filter(board=board, number=number).exists()
        ):
            return _detail_response(
                request, board, role, number, status=exc.status, error=exc.message
            )
        if request.htmx:
            return _refusal(request, exc)
        messages.error(request, exc.message)
        return redirect("board", slug=board.slug)
    if action == "delete" or not Task.objects.filter(board=board, number=number).exists():
        if request.htmx:
            return HttpResponse('<p class="muted">Task deleted.</p>')
        return redirect("board", slug=board.slug)
    if request.htmx:
        return _detail_response(request, board, role, number)
    return redirect(reverse("task", args=[board.slug, number]))


@require_POST
@board_access("approve")
def call_decide(
    request: HtmxHttpRequest, board: Board, role: Role, call_id: int, action: str
) -> HttpResponse:
    """Approve or deny a coding client's held tool call; the waiting client hears it at
    once (``services.tool_call_decide``), with the note as the reason its model reads."""
    if action not in ("approve", "deny"):
        raise Http404("Unknown action")
    try:
        services.tool_call_decide(
            board=board,
            person=_person(request),
            call_id=call_id,
            approve=action == "approve",
            note=request.POST.get("note", ""),
        )
    except ServiceError as exc:
        if request.htmx:
            return _refusal(request, exc)
        messages.error(request, exc.message)
        return redirect("board", slug=board.slug)
    if request.htmx:
        context = {**header_context(board), "oob": False}
        return render(request, "boards/board.html#needs", context)
    return redirect("board", slug=board.slug)


@require_POST
@board_access("reset")
def board_reset_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    if request.POST.get("confirm") != board.slug:
        messages.error(request, f"Type the board's slug ({board.slug}) to confirm the reset.")
        return redirect("board", slug=board.slug)
    services.board_reset(board=board, actor=_person(request))
    messages.success(request, "Board reset: every task was deleted and numbering restarts at 1.")
    return redirect("board", slug=board.slug)


def _checked(request: HtmxHttpRequest, name: str) -> bool:
    return request.POST.get(name) in ("1", "on", "true")


def _issue_token(request: HtmxHttpRequest, board: Board, *, admin: bool | None = None) -> str:
    """A token from the posted form (agent name, team, admin scope), issued by this person."""
    return services.token_issue(
        board=board,
        agent=request.POST.get("agent", ""),
        team=_checked(request, "team"),
        admin=_checked(request, "admin") if admin is None else admin,
        created_by=_person(request),
    )


NEW_TOKEN_KEY = "kanban:new-token"  # noqa: S105 - a session key, not a secret


@board_access("tokens")
def token_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Issue (POST) and list tokens. A new token is shown once, after a redirect, so a
    refresh never issues another, and that page is never cached."""
    error = ""
    if request.method == "POST":
        try:
            raw = _issue_token(request, board)
        except ServiceError as exc:
            error = exc.message
        else:
            request.session[NEW_TOKEN_KEY] = {"board": board.pk, "token": raw}
            return redirect("tokens", slug=board.slug)
    shown = request.session.pop(NEW_TOKEN_KEY, None)
    new_token = shown["token"] if shown and shown.get("board") == board.pk else ""
    context = {
        "board": board,
        "tokens": AgentToken.objects.filter(board=board).order_by("-created_at"),
        "new_token": new_token,
        "error": error,
        "api_base": request.build_absolute_uri(f"/api/boards/{board.slug}/tools/"),
    }
    response = render(request, "boards/tokens.html", context, status=400 if error else 200)
    add_never_cache_headers(response)
    return response


@require_POST
@board_access("tokens")
def token_revoke_post(
    request: HtmxHttpRequest, board: Board, role: Role, token_id: int
) -> HttpResponse:
    try:
        services.token_revoke(board=board, token_id=token_id)
    except ServiceError as exc:
        raise Http404(exc.message) from exc
    return redirect("tokens", slug=board.slug)


NEW_INVITE_KEY = "kanban:new-invite"


@board_access("members")
def member_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's people and their roles, its open invites, and its agents' roster
    (admins). A new invite's link is shown once, after a redirect, never cached."""
    error = ""
    if request.method == "POST":
        try:
            if request.POST.get("action") == "invite":
                invite, raw = services.invite_create(
                    board=board, role=request.POST.get("role", ""), actor=_person(request)
                )
                request.session[NEW_INVITE_KEY] = {
                    "board": board.pk,
                    "link": request.build_absolute_uri(reverse("invite", args=[raw])),
                    "role": invite.get_role_display(),
                    "expires": invite.expires_at.isoformat(),
                }
            elif request.POST.get("revoke_invite"):
                services.invite_revoke(
                    board=board, invite_id=request.POST["revoke_invite"], actor=_person(request)
                )
            elif request.POST.get("remove"):
                services.member_remove(
                    board=board, username=request.POST["remove"], actor=_person(request)
                )
            elif request.POST.get("remove_agent"):
                services.agent_remove(
                    board=board, name=request.POST["remove_agent"], actor=_person(request)
                )
            else:
                services.member_set(
                    board=board,
                    username=request.POST.get("username", ""),
                    role=request.POST.get("role", ""),
                    actor=_person(request),
                )
        except ServiceError as exc:
            error = exc.message
        else:
            return redirect("members", slug=board.slug)
    shown = request.session.pop(NEW_INVITE_KEY, None)
    context = {
        "board": board,
        "members": Membership.objects.filter(board=board).select_related("user"),
        "roles": Role.choices,
        "agents": selectors.roster(board),
        "invites": Invite.objects.filter(
            board=board, used_at=None, revoked_at=None, expires_at__gt=timezone.now()
        ).order_by("-created_at"),
        "new_invite": shown if shown and shown.get("board") == board.pk else None,
        "error": error,
        "username": request.POST.get("username", "") if error else "",
    }
    response = render(request, "boards/members.html", context, status=400 if error else 200)
    add_never_cache_headers(response)
    return response


class SignUpForm(forms.Form):
    """A person's new account, from an invite: Django's username rules and the
    project's password validators (``AUTH_PASSWORD_VALIDATORS``)."""

    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        help_text="Letters, digits and @ . + - _ only; up to 150 characters.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}),
    )
    password1 = forms.CharField(
        label="Password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=password_validation.password_validators_help_text_html(),
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise forms.ValidationError(f"The username {username!r} is taken; choose another.")
        return username

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        first, second = data.get("password1"), data.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ.")
        elif first:
            person = get_user_model()(username=data.get("username", ""))
            try:
                password_validation.validate_password(first, person)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


@require_http_methods(["GET", "POST"])
def invite_accept(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """An invite link: choose a username and password, and join its board with the role
    the admin chose, logged in. A used, revoked or expired link is refused (410) with a
    page that says so. The link's token is never sent to another site as a referrer
    (``same-origin``: ``no-referrer`` would make the form's POST fail the CSRF origin check)."""
    form = SignUpForm(request.POST if request.method == "POST" else None)
    status = 200
    try:
        invite = services.invite_find(token)
        services.invite_check(invite, timezone.now())
        if request.method == "POST" and form.is_valid():
            user = services.invite_accept(
                token=token,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
            )
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(
                request,
                f"Welcome, {user.get_username()}: you are {invite.get_role_display().lower()} "
                f"on {invite.board.name}.",
            )
            return redirect("board", slug=invite.board.slug)
        if form.is_bound:
            status = 400
    except ServiceError as exc:
        if exc.code == "username_taken":
            form.add_error("username", exc.message)
            status = 400
        else:
            response = render(
                request, "boards/invite.html", {"refused": exc.message}, status=exc.status
            )
            response["Referrer-Policy"] = "same-origin"
            add_never_cache_headers(response)
            return response
    context = {"invite": invite, "form": form}
    response = render(request, "boards/invite.html", context, status=status)
    response["Referrer-Policy"] = "same-origin"
    add_never_cache_headers(response)
    return response


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
@board_access("message")
def message_send_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    try:
        message = services.message_send(
            board=board,
            sender=_person(request),
            recipient=request.POST.get("recipient", ""),
            body=request.POST.get("body", ""),
            task_id=request.POST.get("task") or None,
        )
    except ServiceError as exc:
        if request.htmx:
            return _refusal(request, exc)
        messages.error(request, exc.message)
        return redirect("board", slug=board.slug)
    sent = _queued(board, message.recipient)
    if request.htmx:
        return HttpResponse(f'<p class="ok" role="status">{escape(sent)}</p>')
    messages.success(request, sent)
    return redirect("board", slug=board.slug)


@board_access("settings")
def board_settings(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's work settings: lease length, attempts before a person looks, WIP limits."""
    error = ""
    if request.method == "POST":
        values: dict[str, Any] = {}
        budget = request.POST.get("budgetUsd", "").strip().lstrip("$")
        values["budgetUsd"] = budget or None  # the service checks it (dollars, or empty)
        for public in services.BOARD_SETTINGS:
            if public not in request.POST:
                continue  # a form without the field leaves the setting as it is
            raw = request.POST.get(public, "").strip()
            number = numbers.spelled(raw)
            if not raw:
                values[public] = None
            elif number is not None:
                values[public] = number
            else:
                error = (
                    f"{SETTING_LABELS.get(public, public)}: a whole number (digits 0-9), or empty"
                )
                break
        if not error:
            try:
                services.board_settings(board=board, actor=_person(request), **values)
            except ServiceError as exc:
                error = _setting_error(exc)
            else:
                messages.success(request, "Settings saved.")
                return redirect("board-settings", slug=board.slug)
    context = {
        "board": board,
        "error": error,
        "default_lease": settings.KANBAN_LEASE_SECONDS,
        "budget": f"{board.budget_usd:.2f}" if board.budget_usd is not None else "",
        "spent": metrics.money(board.spent_usd),
    }
    return render(request, "boards/settings.html", context, status=400 if error else 200)


# The settings form's fields in people's words: a refusal names the label, not the API field.
SETTING_LABELS = {
    "leaseSeconds": "Lease",
    "maxAttempts": "Attempts before a person looks",
    "maxInProgressPerAgent": "In progress per agent",
    "maxInProgress": "In progress on the board",
    "silentAfterSeconds": "An agent is silent after",
    "failureGraceSeconds": "A failed task may be retried for",
    "budgetUsd": "Budget",
}


def _setting_error(exc: ServiceError) -> str:
    """A refused setting as the form says it: "Budget: dollars from 0 to …"."""
    message = exc.message
    for field, label in SETTING_LABELS.items():
        if message.startswith(f"{field}: "):
            return f"{label}: {message.removeprefix(f'{field}: ')}"
    return message


class GateRuleForm(forms.Form):
    """A new gate rule, in people's words (the service checks it again: one rule, one place)."""

    tool = forms.CharField(
        max_length=gates.TOOL_GLOB_MAX, label="Tools (e.g. Bash, Write|Edit, mcp__*)"
    )
    pattern = forms.CharField(
        max_length=gates.PATTERN_MAX, required=False, label="Pattern over the command, path or URL"
    )
    outside_cwd = forms.BooleanField(
        required=False, label="Only paths outside the session's folder"
    )
    decision = forms.ChoiceField(choices=[(d, d) for d in gates.DECISIONS], initial=gates.ASK)
    wait_seconds = forms.IntegerField(
        min_value=gates.WAIT_MIN,
        max_value=gates.WAIT_MAX,
        initial=gates.WAIT_DEFAULT,
        label="Wait for a person (seconds)",
    )
    fallback = forms.ChoiceField(
        choices=[(d, d) for d in gates.FALLBACKS], initial=gates.DENY, label="If nobody answers"
    )
    note = forms.CharField(max_length=gates.NOTE_MAX, required=False, label="What it guards")


@require_http_methods(["GET", "POST"])
@board_access("settings")
def gate_rules(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's gate rules: which of its agents' own tool calls wait for a person."""
    form = GateRuleForm()
    status = 200
    if request.method == "POST":
        try:
            if "remove" in request.POST:
                rule_id = numbers.digits(request.POST.get("remove", ""), field="remove")
                if rule_id is None:
                    raise InvalidInput("remove: the rule to remove", field="remove")
                services.gate_rule_remove(board=board, actor=_person(request), rule_id=rule_id)
                messages.success(request, "Rule removed.")
                return redirect("gate-rules", slug=board.slug)
            form = GateRuleForm(request.POST)
            if form.is_valid():
                services.gate_rule_add(board=board, actor=_person(request), **form.cleaned_data)
                messages.success(request, "Rule added.")
                return redirect("gate-rules", slug=board.slug)
            status = 400
        except ServiceError as exc:
            if form.is_bound:
                form.add_error(None, exc.message)
            else:  # a refused removal: an unbound form takes no errors (it raises)
                messages.error(request, exc.message)
            status = exc.status
    rules = list(GateRule.objects.filter(board=board).order_by("position", "id"))
    context = {"board": board, "rules": rules, "form": form}
    return render(request, "boards/gates.html", context, status=status)


@require_GET
@board_access("view")
def board_column(request: HtmxHttpRequest, board: Board, role: Role, key: str) -> HttpResponse:
    """The next cards of a column ("show more"), appended in place by htmx (kept to the
    board's search and filters, which the button's URL carries)."""
    chosen = board_filter(request.GET)
    try:
        views, more = selectors.column_page(
            board, key, request.GET.get("cursor") or None, filters=chosen.filter
        )
    except ServiceError as exc:
        raise Http404(exc.message) from exc
    context = {
        "board": board,
        "col": {"key": key, "views": views, "more": more},
        "stale": stale_agents(selectors.roster(board)),
        "filter": chosen,
    }
    return render(request, "boards/board.html#column-page", context)


NEW_SECRET_KEY = "new_webhook_secret"  # noqa: S105 (a session key)


@board_access("webhooks")
def webhook_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's outbound webhooks: add, pause, test, redeliver, remove (admins)."""
    error = ""
    if request.method == "POST":
        actor = _person(request)
        post = request.POST
        try:
            if post.get("action") == "add":
                hook, secret = services.webhook_add(
                    board=board,
                    actor=actor,
                    url=post.get("url", ""),
                    kinds=[] if "all" in post.getlist("kinds") else post.getlist("kinds"),
                    slack=post.get("format") == "slack",
                )
                request.session[NEW_SECRET_KEY] = {
                    "board": board.pk,
                    "hook": hook.pk,
                    "secret": secret,
                }
            elif post.get("action") in ("pause", "resume"):
                services.webhook_change(
                    board=board,
                    actor=actor,
                    webhook_id=post.get("webhook"),
                    active=post["action"] == "resume",
                )
            elif post.get("action") == "rotate":
                rotated = services.webhook_change(
                    board=board, actor=actor, webhook_id=post.get("webhook"), rotate_secret=True
                )
                request.session[NEW_SECRET_KEY] = {
                    "board": board.pk,
                    "hook": numbers.id_number(post.get("webhook"), field="webhook"),
                    "secret": rotated,
                }
            elif post.get("action") == "remove":
                services.webhook_remove(board=board, actor=actor, webhook_id=post.get("webhook"))
            elif post.get("action") == "test":
                services.webhook_test(board=board, actor=actor, webhook_id=post.get("webhook"))
                messages.success(request, "Test event queued.")
            elif post.get("action") == "redeliver":
                services.delivery_redeliver(
                    board=board, actor=actor, delivery_id=post.get("delivery")
                )
                messages.success(request, "Queued again.")
            else:
                raise InvalidInput(
                    "action: add, pause, resume, rotate, remove, test or redeliver", field="action"
                )
        except ServiceError as exc:
            error = exc.message
        else:
            return redirect("webhooks", slug=board.slug)
    shown = request.session.pop(NEW_SECRET_KEY, None)
    new_secret = shown if shown and shown.get("board") == board.pk else None
    context = {
        "board": board,
        "hooks": selectors.webhooks_with_deliveries(board),
        "signals": SIGNALS,
        "new_secret": new_secret,
        "error": error,
        "form": request.POST if error else {},
    }
    response = render(request, "boards/webhooks.html", context, status=400 if error else 200)
    add_never_cache_headers(response)
    return response


ACTIVITY_SHOW = ("matters", "all")


def _activity_filters(request: HtmxHttpRequest) -> dict[str, Any]:
    """The feed's filters; ``show`` is "matters" (failures, approvals, reassignments,
    reclaims, needs attention: the default when nothing else is asked) or "all"."""
    task = request.GET.get("task", "").strip().lstrip("#")
    filters = {
        "actor": request.GET.get("actor", "").strip()[:150],
        "kind": request.GET.get("kind", "").strip()[:32],
        "task": numbers.digits(task, field="task"),
    }
    show = request.GET.get("show", "")
    if show and show not in ACTIVITY_SHOW:
        raise InvalidInput("show: matters or all", field="show")
    asked = filters["actor"] or filters["kind"] or filters["task"] is not None
    filters["matters"] = show == "matters" or (not show and not asked)
    return filters


@require_GET
@board_access("activity")
def activity(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's event log, newest first, filtered and paged; live on the page.

    ``?after=<seq>`` (htmx) answers only the rows newer than that, for the page to prepend.
    """
    try:
        filters = _activity_filters(request)
        after, before = (
            numbers.digits(request.GET.get(name, ""), field=name, max_digits=numbers.SEQ_DIGITS)
            for name in ("after", "before")
        )
    except ServiceError as exc:
        return _refusal(request, exc)
    if after is not None:
        rows = selectors.activity_page(board, after=after, **filters)
        rows.reverse()
        return render(request, "boards/activity.html#rows", {"board": board, "events": rows})
    rows = selectors.activity_page(board, before=before, **filters)
    context = {
        "board": board,
        "events": rows,
        "filters": filters,
        "query": request.GET.urlencode(),
        "more": rows[-1].seq if len(rows) == selectors.ACTIVITY_PAGE else None,
        "top": rows[0].seq if rows and before is None else board.last_seq,
        "seq": board.last_seq,
        "actors": selectors.activity_actors(board),
        "kinds": selectors.ACTIVITY_KINDS,
    }
    if request.htmx and before is not None:
        return render(request, "boards/activity.html#page", context)
    return render(request, "boards/activity.html", context)


@require_POST
@board_access("notify")
def notify_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Which kinds of change notify this person on this board (stored for them)."""
    try:
        kinds = services.subscription_set(
            board=board, user=request.user, kinds=request.POST.getlist("kinds")
        )
    except ServiceError as exc:
        return _refusal(request, exc)
    if request.htmx:
        response = HttpResponse(
            '<span role="status">Saved.</span>', headers={"X-Notify-Kinds": ",".join(kinds)}
        )
        return response
    return redirect("board", slug=board.slug)


def _graph_scope(request: HtmxHttpRequest) -> tuple[str, int | None]:
    task = request.GET.get("task", "").strip().lstrip("#")
    if task:
        number = numbers.digits(task, field="task")
        if number is None:
            raise InvalidInput("task: a task number", field="task")
        return "task", number
    return request.GET.get("scope", "open"), None


@require_GET
@board_access("view")
def graph_page(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The dependency graph, laid out in the browser (static/graph.js) from graph.json."""
    try:
        scope, around = _graph_scope(request)
    except ServiceError as exc:
        return _refusal(request, exc)
    context = {
        "board": board,
        "scope": scope,
        "around": around,
        "seq": board.last_seq,
        "can": permissions.capabilities(role),
    }
    return render(request, "boards/graph.html", context)


@require_GET
@board_access("view")
def graph_json(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """``?scope=open|all`` or ``?task=<n>``: nodes, edges and the critical path as JSON."""
    try:
        scope, around = _graph_scope(request)
        data = selectors.graph(board, scope, around)
    except ServiceError as exc:
        return JsonResponse(error_body(exc), status=exc.status)
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False})
    add_never_cache_headers(response)
    return response


@require_GET
@board_access("view")
def metrics_page(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Flow metrics and cost over a range, as charts with their numbers in tables
    (boards.metrics); the query is read by the same form as the JSON API's."""
    context: dict[str, Any] = {"board": board, "ranges": metrics.RANGES}
    try:
        range_key, today = metrics.metrics_query(request.GET)
    except ServiceError as exc:
        context["error"] = exc.message
        return render(request, "boards/metrics.html", context, status=exc.status)
    data = metrics.metrics(board, range_key=range_key, today=today)
    win = metrics.window_of(data)
    labels = [win.label(at) for at in win.buckets]
    flow = data["cumulativeFlow"]
    context |= {
        "m": data,
        "range": data["range"],
        "range_name": metrics.RANGES[data["range"]],
        "bucket_label": {"minute": "minute", "hour": "hour", "day": "day"}[data["bucket"]],
        "period": f"{win.label(win.start)} to {win.label(win.end - win.step if win.daily else win.end)}"
        + ("" if win.daily else f" on {win.start.date().isoformat()}"),
        "rows": [
            {
                "label": label,
                "completed": t["completed"],
                "cost": metrics.money(c["costUsd"]),
                **f,
            }
            for label, t, c, f in zip(
                labels, data["throughput"], data["cost"]["perBucket"], flow, strict=True
            )
        ],
        "lead": _times(data["leadTimeSeconds"]),
        "cycle": _times(data["cycleTimeSeconds"]),
        "agents": [
            {
                **a,
                "median": metrics.duration(a["medianCycleSeconds"]),
                "cost": metrics.money(a["costUsd"]),
            }
            for a in data["agents"]
        ],
        "total": metrics.money(data["cost"]["totalUsd"]),
        "budget": metrics.money(data["cost"]["budgetUsd"])
        if data["cost"]["budgetUsd"] is not None
        else None,
        "parents": [
            {"taskId": p["taskId"], "cost": metrics.money(p["costUsd"])}
            for p in data["cost"]["perParent"]
        ],
        "throughput_chart": charts.bars(labels, [t["completed"] for t in data["throughput"]]),
        "cost_chart": charts.bars(
            labels, [c["costUsd"] for c in data["cost"]["perBucket"]], metrics.money
        ),
        "lead_chart": _histogram_chart(data["leadTimeSeconds"]),
        "cycle_chart": _histogram_chart(data["cycleTimeSeconds"]),
        "flow_chart": charts.bands(
            labels,
            {
                "waiting": [f["created"] for f in flow],
                "in-progress": [f["started"] for f in flow],
                "completed": [f["completed"] for f in flow],
            },
        ),
    }
    return render(request, "boards/metrics.html", context)


def _times(dist: dict[str, Any]) -> dict[str, Any]:
    """A duration distribution's percentiles in words."""
    return {"count": dist["count"], **{p: metrics.duration(dist[p]) for p in ("p50", "p85", "p95")}}


def _histogram_chart(dist: dict[str, Any]) -> dict[str, Any]:
    bins = dist["histogram"]
    return charts.bars([b["label"] for b in bins], [b["count"] for b in bins])


CONNECT_TOKEN_KEY = "kanban:connect-token"  # noqa: S105 - a session key, not a secret


@board_access("tokens")
def connect_agent(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """ "Connect an agent": issue a token and copy-ready setup for the common clients,
    with this board's addresses filled in, the tools agents get, and the instructions
    they follow."""
    error = ""
    if request.method == "POST":
        try:
            raw = _issue_token(request, board, admin=False)
        except ServiceError as exc:
            error = exc.message
        else:
            request.session[CONNECT_TOKEN_KEY] = {
                "board": board.pk,
                "token": raw,
                "team": _checked(request, "team"),
            }
            return redirect("connect", slug=board.slug)
    shown = request.session.pop(CONNECT_TOKEN_KEY, None)
    issued = shown if shown and shown.get("board") == board.pk else None
    hook_url = request.build_absolute_uri(f"/api/boards/{board.slug}/hooks/claude-code")
    longest_wait = max(
        [r.wait_seconds for r in GateRule.objects.filter(board=board, decision="ask")] or [0]
    )
    context = {
        "board": board,
        "error": error,
        "token": issued["token"] if issued else "",
        "team": bool(issued and issued["team"]),
        "mcp_url": request.build_absolute_uri(f"/mcp/{board.slug}/"),
        "api_url": request.build_absolute_uri(f"/api/boards/{board.slug}/tools/"),
        "tools_url": request.build_absolute_uri(f"/api/boards/{board.slug}/tools"),
        "tools": tools.listed(),
        "hook_url": hook_url,
        "claude_settings": json.dumps(
            clients.claude_settings(hook_url, longest_wait), indent=2, ensure_ascii=False
        ),
        "longest_wait": longest_wait,
    }
    response = render(request, "boards/connect.html", context, status=400 if error else 200)
    add_never_cache_headers(response)
    return response

"""A board's administration: agent tokens, members and invites, settings, gate rules, webhooks, connecting an agent."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login, password_validation
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from .. import clients, gates, metrics, numbers, selectors, services, tools
from ..activity import SIGNALS
from ..errors import InvalidInput, ServiceError
from ..models import (
    AgentToken,
    Board,
    GateRule,
    Invite,
    Membership,
    Role,
)
from .common import HtmxHttpRequest, _person, board_access


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

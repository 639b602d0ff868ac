"""A board's administration: agent tokens, settings, gate rules, webhooks, connecting an agent.

Each page reads its posts through a form (``forms``) and calls one service; a refusal
shows on the form again, beside the field it names (``forms.submit``). A new secret is
shown once (``common.show_once``) on a page that is never cached.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from .. import clients, metrics, selectors, services, tools
from ..activity import SIGNALS
from ..models import AgentToken, Board, GateRule, Role
from .common import HtmxHttpRequest, _person, board_access, show_once, take_shown
from .forms import (
    GateRuleForm,
    GateRuleRemoveForm,
    SettingsForm,
    TokenForm,
    WebhookActionForm,
    WebhookForm,
    bound,
    submit,
)


def _status(*posted: Any) -> int:
    """A page shown again with a refused form is a 400."""
    return 400 if any(form is not None and form.errors for form in posted) else 200


# -- tokens ---------------------------------------------------------------------------------


def _issue_token(request: HtmxHttpRequest, board: Board, data: dict[str, Any], key: str) -> None:
    """A token from the posted form (agent name, team, admin scope), issued by this person
    and kept to show once under ``key``."""
    raw = services.token_issue(
        board=board,
        agent=data["agent"],
        team=data["team"],
        admin=data["admin"],
        created_by=_person(request),
    )
    show_once(request, key, board, token=raw, team=data["team"])


@never_cache
@board_access("tokens")
def token_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Issue (POST) and list tokens."""
    form = bound(request, TokenForm)
    if form.is_bound and submit(form, lambda data: _issue_token(request, board, data, "token")):
        return redirect("tokens", slug=board.slug)
    api_base = request.build_absolute_uri(f"/api/boards/{board.slug}/tools/")
    shown = take_shown(request, "token", board)
    context = {
        "board": board,
        "tokens": AgentToken.objects.filter(board=board).order_by("-created_at"),
        "form": form,
        "new_token": shown["token"] if shown else "",
        "example": f'curl -s -X POST {api_base}TaskList -H "Authorization: Bearer {shown["token"]}"'
        if shown
        else "",
    }
    return render(request, "boards/tokens.html", context, status=_status(form))


@require_POST
@board_access("tokens")
def token_revoke_post(
    request: HtmxHttpRequest, board: Board, role: Role, token_id: int
) -> HttpResponse:
    services.token_revoke(board=board, token_id=token_id)
    return redirect("tokens", slug=board.slug)


@never_cache
@board_access("tokens")
def connect_agent(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """ "Connect an agent": issue a token and copy-ready setup for the common clients,
    with this board's addresses filled in, the tools agents get, and the instructions
    they follow."""
    form = bound(request, TokenForm)
    if form.is_bound and submit(
        form, lambda data: _issue_token(request, board, {**data, "admin": False}, "connect")
    ):
        return redirect("connect", slug=board.slug)
    issued = take_shown(request, "connect", board)
    hook_url = request.build_absolute_uri(f"/api/boards/{board.slug}/hooks/claude-code")
    longest_wait = max(
        [r.wait_seconds for r in GateRule.objects.filter(board=board, decision="ask")] or [0]
    )
    context = {
        "board": board,
        "form": form,
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
    return render(request, "boards/connect.html", context, status=_status(form))


# -- settings and gate rules ----------------------------------------------------------------


@board_access("settings")
def board_settings(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's work settings: lease length, attempts before a person looks, WIP
    limits, when an agent is silent, the failure grace, the budget."""
    form = bound(request, SettingsForm, board=board, spent=metrics.money(board.spent_usd))
    if form.is_bound and submit(
        form,
        lambda data: services.board_settings(board=board, actor=_person(request), **form.changes()),
    ):
        messages.success(request, "Settings saved.")
        return redirect("board-settings", slug=board.slug)
    context = {"board": board, "form": form}
    return render(request, "boards/settings.html", context, status=_status(form))


@require_http_methods(["GET", "POST"])
@board_access("settings")
def gate_rules(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's gate rules: which of its agents' own tool calls wait for a person."""
    form, removal = GateRuleForm(), None
    actor = _person(request)
    if "remove" in request.POST:
        removal = GateRuleRemoveForm(request.POST)
        if submit(
            removal,
            lambda data: services.gate_rule_remove(
                board=board, actor=actor, rule_id=data["remove"]
            ),
        ):
            messages.success(request, "Rule removed.")
            return redirect("gate-rules", slug=board.slug)
    elif request.method == "POST":
        form = GateRuleForm(request.POST)
        if submit(form, lambda data: services.gate_rule_add(board=board, actor=actor, **data)):
            messages.success(request, "Rule added.")
            return redirect("gate-rules", slug=board.slug)
    rules = list(GateRule.objects.filter(board=board).order_by("position", "id"))
    context = {"board": board, "rules": rules, "form": form, "removal": removal}
    return render(request, "boards/gates.html", context, status=_status(form, removal))


# -- webhooks -------------------------------------------------------------------------------


def _webhook_add(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    hook, secret = services.webhook_add(
        board=board,
        actor=_person(request),
        url=data["url"],
        kinds=data["kinds"],
        slack=data["format"] == "slack",
    )
    show_once(request, "webhook", board, hook=hook.pk, secret=secret)


def _webhook_rotate(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    secret = services.webhook_change(
        board=board, actor=_person(request), webhook_id=data["webhook"], rotate_secret=True
    )
    show_once(request, "webhook", board, hook=data["webhook"], secret=secret)


def _webhook_test(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    services.webhook_test(board=board, actor=_person(request), webhook_id=data["webhook"])
    messages.success(request, "Test event queued.")


def _redeliver(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    services.delivery_redeliver(board=board, actor=_person(request), delivery_id=data["delivery"])
    messages.success(request, "Queued again.")


def _webhook_active(active: bool) -> Callable[[HtmxHttpRequest, Board, dict[str, Any]], None]:
    def act(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
        services.webhook_change(
            board=board, actor=_person(request), webhook_id=data["webhook"], active=active
        )

    return act


# The buttons on an endpoint and its deliveries (``forms.WEBHOOK_ACTIONS``) and what they do.
WEBHOOK_BUTTONS: dict[str, Callable[[HtmxHttpRequest, Board, dict[str, Any]], None]] = {
    "pause": _webhook_active(False),
    "resume": _webhook_active(True),
    "rotate": _webhook_rotate,
    "remove": lambda request, board, data: services.webhook_remove(
        board=board, actor=_person(request), webhook_id=data["webhook"]
    ),
    "test": _webhook_test,
    "redeliver": _redeliver,
}


@never_cache
@board_access("webhooks")
def webhook_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's outbound webhooks: add, pause, test, redeliver, remove (admins)."""
    added = button = None
    if request.POST.get("action") == "add":
        added = WebhookForm(request.POST)
        if submit(added, lambda data: _webhook_add(request, board, data)):
            return redirect("webhooks", slug=board.slug)
    elif request.method == "POST":
        button = WebhookActionForm(request.POST)
        act = lambda data: WEBHOOK_BUTTONS[data["action"]](request, board, data)  # noqa: E731
        if submit(button, act):
            return redirect("webhooks", slug=board.slug)
    context = {
        "board": board,
        "hooks": selectors.webhooks_with_deliveries(board),
        "signals": SIGNALS,
        "new_secret": take_shown(request, "webhook", board),
        "form": added or WebhookForm(),
        "refused": added or button,
    }
    return render(request, "boards/webhooks.html", context, status=_status(added, button))

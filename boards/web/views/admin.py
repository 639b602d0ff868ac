"""A board's administration: agent tokens, settings, gate rules, webhooks, connecting an agent.

Each page reads its posts through a form (``forms``) and calls one service; a refusal
shows on the form again, beside the field it names (``forms.submit``). A new secret is
shown once (``common.show_once``) on a page that is never cached.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from boards.agents import pipeline
from boards.clients import registry, setup
from boards.core import metrics, numbers, selectors, services
from boards.core.activity import SIGNALS
from boards.gates import rules as gaterules
from boards.models import AgentToken, Board, GateRule, Role
from boards.web.forms import (
    GateRuleChangeForm,
    GateRuleForm,
    GateRuleMoveForm,
    GateRuleRemoveForm,
    GateRuleTestForm,
    SettingsForm,
    TokenForm,
    WebhookActionForm,
    WebhookForm,
    bound,
    submit,
)
from boards.web.views.common import HtmxHttpRequest, _person, board_access, show_once, take_shown
from boards.webhooks import subscriptions


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
        "tools": pipeline.listed(),
        # What connect writes, by hand: user scope, no token (the forwarder reads boards.json).
        "claude_settings": json.dumps(
            {
                "env": {"CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"},
                **setup.by_hand_settings("claude-code"),
            },
            indent=2,
            ensure_ascii=False,
        ),
        "longest_wait": longest_wait,
        "refusals": selectors.recent_refusals(board),
        "kept": selectors.REFUSALS_KEPT,
        "board_url": request.build_absolute_uri(f"/boards/{board.slug}/"),
        "clients": [{"row": row, "writes": CONNECT_WRITES[row.name]} for row in registry.CLIENTS],
    }
    return render(request, "boards/connect.html", context, status=_status(form))


# -- settings and gate rules ----------------------------------------------------------------


# Where ``connect`` puts each client's hooks (``boards.clients.setup``), as people read it.
CONNECT_WRITES = {row.name: row.settings.writes() for row in registry.CLIENTS}


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


# The page holds three rule forms with the same field names: their inputs' ids differ.
CHANGE_IDS, TEST_IDS = "change_%s", "test_%s"


def _rule_form(request: HtmxHttpRequest, board: Board) -> GateRuleChangeForm | None:
    """The form that changes the rule ``?edit=`` names, filled with it (None: no such rule)."""
    rule_id = numbers.spelled(request.GET.get("edit", ""), numbers.ID_DIGITS)
    rule = GateRule.objects.filter(board=board, pk=rule_id).first() if rule_id else None
    if rule is None:
        return None
    fields = {name: getattr(rule, name) for name in gaterules.CHANGEABLE}
    return GateRuleChangeForm(initial={**fields, "change": rule.pk}, auto_id=CHANGE_IDS)


def _rule_test(request: HtmxHttpRequest, board: Board) -> tuple[GateRuleTestForm, Any]:
    """The test form (``?text=``: a call tried against the rules, nothing saved) and what
    it found (None: nothing tried, or the form refused it)."""
    if "text" not in request.GET:
        return GateRuleTestForm(initial={"cwd": gaterules.TEST_CWD}, auto_id=TEST_IDS), None
    form = GateRuleTestForm(request.GET, auto_id=TEST_IDS)
    found: list[Any] = []
    submit(
        form,
        lambda data: found.append(
            gaterules.gate_rule_test(
                board=board, tool=data["tool"], text=data["text"], cwd=data["cwd"]
            )
        ),
    )
    return form, (found[0] if found else None)


@require_http_methods(["GET", "POST"])
@board_access("settings")
def gate_rules(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's gate rules, numbered in the order they are matched: add (last or
    before a number), move, change, remove, and try a call against them."""
    actor = _person(request)
    form: GateRuleForm = GateRuleForm()
    posted: forms.Form | None = None
    done = ""
    if "remove" in request.POST:
        posted = GateRuleRemoveForm(request.POST)
        act: Callable[[dict[str, Any]], object] = lambda data: gaterules.gate_rule_remove(  # noqa: E731
            board=board, actor=actor, rule_id=data["remove"]
        )
        done = "Rule removed."
    elif "move" in request.POST:
        posted = GateRuleMoveForm(request.POST)
        act = lambda data: gaterules.gate_rule_move(  # noqa: E731
            board=board, actor=actor, rule_id=data["move"], to=data["to"]
        )
        done = "Rule moved."
    elif "change" in request.POST:
        posted = GateRuleChangeForm(request.POST, auto_id=CHANGE_IDS)
        act = lambda data: gaterules.gate_rule_change(  # noqa: E731
            board=board,
            actor=actor,
            rule_id=data["change"],
            **{name: data[name] for name in gaterules.CHANGEABLE},
        )
        done = "Rule changed."
    elif request.method == "POST":
        posted = form = GateRuleForm(request.POST)
        act = lambda data: gaterules.gate_rule_add(board=board, actor=actor, **data)  # noqa: E731
        done = "Rule added."
    if posted is not None and submit(posted, act):
        messages.success(request, done)
        return redirect("gate-rules", slug=board.slug)
    change = posted if isinstance(posted, GateRuleChangeForm) else _rule_form(request, board)
    tested, found = _rule_test(request, board)
    context = {
        "board": board,
        "rules": list(GateRule.objects.filter(board=board).order_by("position", "id")),
        "form": form,
        "change": change,
        "refused": posted if isinstance(posted, GateRuleRemoveForm | GateRuleMoveForm) else None,
        "tested": tested,
        "found": found,
    }
    return render(request, "boards/gates.html", context, status=_status(posted, tested))


# -- webhooks -------------------------------------------------------------------------------


def _webhook_add(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    hook, secret = subscriptions.webhook_add(
        board=board,
        actor=_person(request),
        url=data["url"],
        kinds=data["kinds"],
        slack=data["format"] == "slack",
    )
    show_once(request, "webhook", board, hook=hook.pk, secret=secret)


def _webhook_rotate(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    secret = subscriptions.webhook_change(
        board=board, actor=_person(request), webhook_id=data["webhook"], rotate_secret=True
    )
    show_once(request, "webhook", board, hook=data["webhook"], secret=secret)


def _webhook_test(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    subscriptions.webhook_test(board=board, actor=_person(request), webhook_id=data["webhook"])
    messages.success(request, "Test event queued.")


def _redeliver(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
    subscriptions.delivery_redeliver(
        board=board, actor=_person(request), delivery_id=data["delivery"]
    )
    messages.success(request, "Queued again.")


def _webhook_active(active: bool) -> Callable[[HtmxHttpRequest, Board, dict[str, Any]], None]:
    def act(request: HtmxHttpRequest, board: Board, data: dict[str, Any]) -> None:
        subscriptions.webhook_change(
            board=board, actor=_person(request), webhook_id=data["webhook"], active=active
        )

    return act


# The buttons on an endpoint and its deliveries (``forms.WEBHOOK_ACTIONS``) and what they do.
WEBHOOK_BUTTONS: dict[str, Callable[[HtmxHttpRequest, Board, dict[str, Any]], None]] = {
    "pause": _webhook_active(False),
    "resume": _webhook_active(True),
    "rotate": _webhook_rotate,
    "remove": lambda request, board, data: subscriptions.webhook_remove(
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

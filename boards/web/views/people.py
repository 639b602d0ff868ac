"""A board's people: its members and their roles, invites, and the agents on its roster;
and the invite link a person with no account joins by."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import login
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from boards.core import selectors, services
from boards.models import Board, Invite, Membership, Role
from boards.web.forms import (
    AgentRemoveForm,
    InviteForm,
    InviteRevokeForm,
    MemberForm,
    MemberRemoveForm,
    SignUpForm,
    submit,
)
from boards.web.views.common import (
    HtmxHttpRequest,
    _person,
    board_access,
    refusals,
    show_once,
    take_shown,
)

Act = Callable[[dict[str, Any]], object]


def _invite(request: HtmxHttpRequest, board: Board, role: str) -> None:
    invite, raw = services.invite_create(board=board, role=role, actor=_person(request))
    show_once(
        request,
        "invite",
        board,
        link=request.build_absolute_uri(reverse("invite", args=[raw])),
        role=invite.get_role_display().lower(),
    )


def _member_post(request: HtmxHttpRequest, board: Board) -> tuple[forms.Form, Act]:
    """The form a post on the Members page is (by the field that marks it), and what it does."""
    post, actor = request.POST, _person(request)
    if post.get("action") == "invite":
        return InviteForm(post), lambda data: _invite(request, board, data["role"])
    if "revoke_invite" in post:
        return InviteRevokeForm(post), lambda data: services.invite_revoke(
            board=board, invite_id=data["revoke_invite"], actor=actor
        )
    if "remove" in post:
        return MemberRemoveForm(post), lambda data: services.member_remove(
            board=board, username=data["remove"], actor=actor
        )
    if "remove_agent" in post:
        return AgentRemoveForm(post), lambda data: services.agent_remove(
            board=board, name=data["remove_agent"], actor=actor
        )
    return MemberForm(post), lambda data: services.member_set(
        board=board, username=data["username"], role=data["role"], actor=actor
    )


@never_cache
@board_access("members")
def member_list(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's people and their roles, its open invites, and its agents' roster
    (admins). A new invite's link is shown once."""
    posted = None
    if request.method == "POST":
        posted, act = _member_post(request, board)
        if submit(posted, act):
            return redirect("members", slug=board.slug)
    context = {
        "board": board,
        "members": Membership.objects.filter(board=board).select_related("user"),
        "roles": Role.choices,
        "agents": selectors.roster(board),
        "invites": Invite.objects.filter(
            board=board, used_at=None, revoked_at=None, expires_at__gt=timezone.now()
        ).order_by("-created_at"),
        "new_invite": take_shown(request, "invite", board),
        "form": posted,
        "adding": posted if isinstance(posted, MemberForm) else MemberForm(),
    }
    status = 400 if posted is not None and posted.errors else 200
    return render(request, "boards/members.html", context, status=status)


def _private(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A page whose address is a secret (an invite link): never cached, and its address
    never sent to another site as a referrer (``same-origin``: ``no-referrer`` would make
    the form's POST fail the CSRF origin check)."""

    @wraps(view)
    def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Referrer-Policy"] = "same-origin"
        return response

    return never_cache(wrapper)


@require_http_methods(["GET", "POST"])
@_private
@refusals("boards/invite.html")
def invite_accept(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """An invite link: choose a username and password, and join its board with the role
    the admin chose, logged in. A used, revoked or expired link is refused (410) with a
    page that says so."""
    invite = services.invite_find(token)
    services.invite_check(invite, timezone.now())
    form = SignUpForm(request.POST if request.method == "POST" else None)
    if form.is_bound and submit(form, lambda data: _join(request, token, invite, data)):
        return redirect("board", slug=invite.board.slug)
    context = {"invite": invite, "form": form}
    return render(request, "boards/invite.html", context, status=400 if form.is_bound else 200)


def _join(request: HtmxHttpRequest, token: str, invite: Invite, data: dict[str, Any]) -> None:
    """The new account joins the invite's board, logged in, and is welcomed there."""
    user = services.invite_accept(
        token=token, username=data["username"], password=data["password1"]
    )
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(
        request,
        f"Welcome, {user.get_username()}: you are {invite.get_role_display().lower()} "
        f"on {invite.board.name}.",
    )

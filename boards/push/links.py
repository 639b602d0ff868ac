"""The one-time links a push's Approve and Deny post to (SPEC §14).

A link is a secret bound to its person, the item's exact state (the held call, or the
task and its version) and a deadline: it is used once — refused or not — answers 409
once the item was decided or changed elsewhere, 410 after KANBAN_PUSH_LINK_SECONDS. Only
its hash is kept. Its URL is ``/push/act/<action>/#t=<secret>``: the secret rides in the
fragment, which browsers never send, and the service worker posts it in the body, so no
access log or proxy log holds it (``link_url``). The decision itself goes through the
same services as the board's buttons, as the person, step-up included.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from boards.clients import calls
from boards.core import permissions, services
from boards.core.errors import Conflict, Gone, NotFound, PermissionDenied
from boards.models import ApprovalState, Board, CallState, PushLink, Reason, Task
from boards.needs import reads

TOKEN_BYTES = 32
ACTIONS = ("approve", "deny")


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def link_make(
    *, user: Any, board: Board, item: reads.Item, action: str, expires_at: datetime
) -> str:
    """A new link for ``action`` on ``item`` as it is now; returns its secret (kept only
    hashed)."""
    raw = secrets.token_urlsafe(TOKEN_BYTES)
    PushLink.objects.create(
        token_hash=_hash(raw),
        user=user,
        board=board,
        action=action,
        call=item.call,
        task_number=item.task.number if item.task is not None else None,
        task_version=item.task.version if item.task is not None else None,
        expires_at=expires_at,
    )
    return raw


def link_url(action: str, raw: str) -> str:
    """The path of a link (the board's public origin goes before it): the action in the
    path, the secret in the fragment."""
    return f"{reverse('push-act', args=[action])}#t={raw}"


def _changed(message: str) -> Conflict:
    return Conflict(message, code="push_link_stale")


def _link_spent(raw: Any, action: str | None) -> PushLink:
    """Find the link and mark it used, in a transaction of its own: from here on it is
    spent, whatever the decision answers (a refused link is no second chance for
    whoever else holds it)."""
    with transaction.atomic():
        link = None
        if isinstance(raw, str) and 20 <= len(raw) <= 100:
            link = (
                PushLink.objects.select_for_update(of=("self",))
                .select_related("user", "board", "call")
                .filter(token_hash=_hash(raw))
                .first()
            )
        if link is None or (action is not None and action != link.action):
            raise NotFound("No such link", code="push_link_not_found")
        if link.used_at is not None:
            raise Conflict("This link was used already", code="push_link_used")
        if link.expires_at <= timezone.now():
            raise Gone("This link expired: open the board to decide", code="push_link_expired")
        PushLink.objects.filter(pk=link.pk).update(used_at=timezone.now())
    return link


def link_act(raw: Any, *, action: str | None = None) -> str:
    """Decide through a link, once, as its person; returns what was decided. ``action``,
    when given, is the one the link's URL names (another one is no such link).

    404 for no such link; 410 once expired; 409 once used, or when its item was decided
    or changed since the push; 403 when the person may no longer decide it, or it needs
    their passkey first. Any use spends the link, refused ones too.
    """
    link = _link_spent(raw, action)
    board, user = link.board, link.user
    role = permissions.role_of(user, board)
    if not permissions.may(role, link.action):
        raise PermissionDenied("You may no longer decide this", code="push_link_role")
    approve = link.action == "approve"
    person = user.get_username()
    with transaction.atomic():
        if link.call is not None:
            if link.call.state != CallState.REQUESTED:
                raise _changed("It was decided already (on the board or another device)")
            calls.tool_call_decide(
                board=board, person=person, call_id=link.call.pk, approve=approve
            )
        else:
            number = link.task_number or 0
            task = Task.objects.filter(board=board, number=number).first()
            if (
                task is None
                or task.needs != Reason.APPROVAL
                or task.approval_state != ApprovalState.REQUESTED
                or task.version != link.task_version
            ):
                raise _changed("It was decided or changed since this push: open the board")
            services.approval_decide(
                board=board,
                person=person,
                task_id=task.number,
                approve=approve,
                version=link.task_version,
            )
        services.push_acted_record(
            board=board, person=person, key=link_item_key(link), action=link.action
        )
    return link.action


def link_item_key(link: PushLink) -> str:
    """The item a link was made for, as ``stepup`` names it."""
    if link.call_id is not None:
        return f"call-{link.call_id}"
    return f"task-{link.task_number}@{link.task_version}"

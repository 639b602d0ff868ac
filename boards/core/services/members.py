"""Board membership: who among people may see and act on a board, and as what; and
invites, the one-time links that sign a person with no account up as a member."""

from __future__ import annotations

import secrets
import unicodedata
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from boards.core import events, limits
from boards.core.errors import Conflict, Gone, InvalidInput, NotFound
from boards.core.services.work import text, unit_of_work
from boards.core.states import EventKind
from boards.models import Board, Invite, Membership, Role, hash_token

# Django's username column; text() also refuses NUL, which PostgreSQL cannot even compare.
USERNAME_MAX = limits.PERSON_NAME_MAX
INVITE_DAYS_DEFAULT = 7
INVITE_DAYS_MAX = 30
INVITE_PREFIX = "inv_"


# Letters of other scripts drawn like Latin ones (common entries of Unicode's
# confusables.txt, lower case; Cyrillic, Greek, then Latin ones NFKC keeps apart), each
# above the letter it passes for: a name spelled with them passes for another person's.
CONFUSABLES = str.maketrans(
    "авгеёкмнопрстухѕіїјԁԛԝһӏɡ" "αβγεηικνορτυχω" "ıȷłø",
    "abreekmhonpctyxsiijdqwhlg" "abyenikvoptuxw" "ijlo",
)  # fmt: skip


def username_key(name: str) -> str:
    """What usernames are told apart by: NFKC (``ａｄｍｉｎ``, ``ᴬdmin`` are ``admin``,
    ``Admin``), case-folded, and letters of other scripts that look Latin read as the Latin
    ones; two names with one key would pass for each other."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    # "İ" folds to "i" and a combining dot above, which shows as a plain "i".
    return folded.replace("\u0307", "").translate(CONFUSABLES)


def username_taken(name: str) -> str | None:
    """The existing username ``name`` would pass for (``username_key``), or None. People
    are few: their names are read and compared one by one."""
    key = username_key(name)
    names = get_user_model().objects.values_list("username", flat=True)
    return next((taken for taken in names.iterator() if username_key(taken) == key), None)


def _taken(username: str) -> Conflict:
    return Conflict(
        f"The username {username!r} is taken, or looks like one that is; choose another",
        code="username_taken",
    )


def member_set(*, board: Board, username: str, role: str, actor: str) -> Membership:
    """Give a person a role on the board (adding them, or changing their role)."""
    username = text("username", username, USERNAME_MAX, required=True)
    if role not in Role.values:
        raise InvalidInput(f"role: one of {', '.join(Role.values)}", field="role")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(
            f"No person called {username[:150]!r}; invite them with a link instead",
            code="user_not_found",
        )
    current = Membership.objects.filter(board=board, user=user).first()
    if current is not None and current.role == role:
        return current  # nothing changes: no event
    with unit_of_work(board, actor, person=True) as work:
        membership, _ = Membership.objects.update_or_create(
            board=work.board, user=user, defaults={"role": role}
        )
        work.record(EventKind.MEMBER, None, person=user.get_username(), role=role)
        events.access_changed(user_id=user.pk)  # their inbox now listens here, or not
    return membership


def member_remove(*, board: Board, username: str, actor: str) -> None:
    """Take a person off the board: they no longer see it, and once this commits their
    open sockets on it close (unless they still see it as a superuser)."""
    username = text("username", username, USERNAME_MAX, required=True)
    with unit_of_work(board, actor, person=True) as work:
        membership = Membership.objects.filter(board=work.board, user__username=username).first()
        if membership is None:
            raise NotFound(f"{username[:150]!r} is not a member", code="member_not_found")
        membership.delete()
        work.record(EventKind.MEMBER, None, person=username, role=None)
        events.access_changed(user_id=membership.user_id, board_id=work.board.pk)


def _role(role: str) -> str:
    if role not in Role.values:
        raise InvalidInput(f"role: one of {', '.join(Role.values)}", field="role")
    return role


def invite_create(
    *, board: Board, role: str, actor: str, days: int = INVITE_DAYS_DEFAULT
) -> tuple[Invite, str]:
    """A one-time link for a person with no account to join the board as ``role``,
    valid for ``days``. Returns the invite and its raw token, which is never stored
    (only its hash): the caller shows it once."""
    role = _role(role)
    if not isinstance(days, int) or not 1 <= days <= INVITE_DAYS_MAX:
        raise InvalidInput(f"days: a whole number from 1 to {INVITE_DAYS_MAX}", field="days")
    raw = INVITE_PREFIX + secrets.token_urlsafe(32)
    with unit_of_work(board, actor, person=True) as work:
        invite = Invite.objects.create(
            board=work.board,
            role=role,
            token_hash=hash_token(raw),
            prefix=raw[:10],
            created_by=actor,
            created_at=work.now,
            expires_at=work.now + timedelta(days=days),
        )
        work.record(EventKind.INVITE, None, action="created", role=role, prefix=invite.prefix)
    return invite, raw


def invite_revoke(*, board: Board, invite_id: Any, actor: str) -> Invite:
    """Revoke an unused invite: its link is refused from now on."""
    with unit_of_work(board, actor, person=True) as work:
        invite = (
            Invite.objects.select_for_update()
            .filter(board=work.board, pk=_invite_pk(invite_id))
            .first()
        )
        if invite is None:
            raise NotFound("No such invite on this board", code="invite_not_found")
        if invite.used_at is not None:
            raise Conflict(f"That invite was already used by {invite.used_by}", code="invite_used")
        if invite.revoked_at is None:
            invite.revoked_at = work.now
            invite.save(update_fields=["revoked_at"])
            work.record(
                EventKind.INVITE, None, action="revoked", role=invite.role, prefix=invite.prefix
            )
    return invite


def _invite_pk(value: Any) -> int:
    if isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()):
        number = int(value)
        if 0 < number < 2**31:
            return number
    raise NotFound("No such invite on this board", code="invite_not_found")


def invite_find(token: str) -> Invite:
    """The invite a link's token names (404 when none; ``invite_check`` says whether it
    can still be used)."""
    invite = (
        Invite.objects.select_related("board").filter(token_hash=hash_token(token or "")).first()
        if isinstance(token, str) and token.startswith(INVITE_PREFIX)
        else None
    )
    if invite is None:
        raise NotFound("This invite link is not valid. Ask for a new one.", code="invite_not_found")
    return invite


def invite_check(invite: Invite, now: Any) -> None:
    """Refuse (410) an invite that was used, revoked, or has expired at ``now``."""
    if invite.used_at is not None:
        raise Gone(
            "This invite link was already used; each link signs up one person once. "
            "Log in, or ask the board's admin for a new link.",
            code="invite_used",
        )
    if invite.revoked_at is not None:
        raise Gone("This invite link was revoked. Ask for a new one.", code="invite_revoked")
    if invite.expires_at <= now:
        raise Gone("This invite link has expired. Ask for a new one.", code="invite_expired")


def invite_accept(*, token: str, username: str, password: str) -> Any:
    """Sign a person up through an invite: a new account with ``username`` and
    ``password`` (checked by the sign-up form: Django's username rules and password
    validators), a member of the invite's board with its role, the invite used.

    The invite is read again locked, so of two people opening one link at once only the
    first signs up; the other is refused (410) as for a used link. Returns the user.
    """
    username = text("username", username, USERNAME_MAX, required=True)
    invite = invite_find(token)
    with unit_of_work(invite.board, username, person=True) as work:
        invite = Invite.objects.select_for_update().get(pk=invite.pk)
        invite_check(invite, work.now)
        if username_taken(username):
            raise _taken(username)
        try:
            with transaction.atomic():  # a savepoint: a name taken meanwhile is a refusal
                user = get_user_model().objects.create_user(username=username, password=password)
        except IntegrityError:
            raise _taken(username) from None
        Membership.objects.create(board=work.board, user=user, role=invite.role)
        invite.used_at = work.now
        invite.used_by = username
        invite.save(update_fields=["used_at", "used_by"])
        work.record(
            EventKind.INVITE, None, action="accepted", role=invite.role, prefix=invite.prefix
        )
        work.record(EventKind.MEMBER, None, person=username, role=invite.role)
        events.access_changed(user_id=user.pk)
    return user

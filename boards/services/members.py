"""Board membership: who among people may see and act on a board, and as what."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from .. import events
from ..errors import InvalidInput, NotFound
from ..models import Board, Membership, Role
from .work import text, unit_of_work

# Django's username column; text() also refuses NUL, which PostgreSQL cannot even compare.
USERNAME_MAX = 150


def member_set(*, board: Board, username: str, role: str, actor: str) -> Membership:
    """Give a person a role on the board (adding them, or changing their role)."""
    username = text("username", username, USERNAME_MAX, required=True)
    if role not in Role.values:
        raise InvalidInput(f"role: one of {', '.join(Role.values)}", field="role")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFound(f"No person called {username[:150]!r}", code="user_not_found")
    current = Membership.objects.filter(board=board, user=user).first()
    if current is not None and current.role == role:
        return current  # nothing changes: no event
    with unit_of_work(board, actor, person=True) as work:
        membership, _ = Membership.objects.update_or_create(
            board=work.board, user=user, defaults={"role": role}
        )
        work.record("member", None, person=user.get_username(), role=role)
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
        work.record("member", None, person=username, role=None)
        events.access_changed(user_id=membership.user_id, board_id=work.board.pk)

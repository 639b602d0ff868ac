"""Who may do what on a board: one table of actions and the role each needs (SPEC §8).

Every people's door asks here: the board's pages and actions (``boards.web.views``),
its socket (``boards.web.consumers``) and the admin site's actions. A person who is
not a member of a board does not see it at all (404); a member whose role is too
low is refused (403) with the role the action needs.
"""

from __future__ import annotations

from typing import Any

from boards.core.errors import PermissionDenied, refuse
from boards.models import Board, Membership, Role

RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.APPROVER: 2, Role.ADMIN: 3}

# Every action a person can take on a board, and the least role that may take it.
ACTIONS: dict[str, Role] = {
    "view": Role.VIEWER,
    "activity": Role.VIEWER,
    "notify": Role.VIEWER,  # one's own notification choices
    # operators move work along
    "status": Role.OPERATOR,
    "reassign": Role.OPERATOR,
    "message": Role.OPERATOR,
    "retry": Role.OPERATOR,
    "priority": Role.OPERATOR,
    "labels": Role.OPERATOR,
    "unblock": Role.OPERATOR,
    # decisions on what needs a person (SPEC §12)
    "reopen": Role.OPERATOR,
    "skip": Role.OPERATOR,  # go on without it: its dependents drop it as a blocker
    "cancel-chain": Role.OPERATOR,
    "release": Role.OPERATOR,
    # approvers decide what agents asked, and what needs asking
    "approve": Role.APPROVER,
    "deny": Role.APPROVER,
    "require-approval": Role.APPROVER,
    # admins own the board itself
    "delete": Role.ADMIN,
    "reset": Role.ADMIN,
    "tokens": Role.ADMIN,
    "members": Role.ADMIN,
    "agents": Role.ADMIN,
    "settings": Role.ADMIN,
    "webhooks": Role.ADMIN,
    "events": Role.ADMIN,  # the event log as JSON (integrations)
}


def role_of(user: Any, board: Board) -> Role | None:
    """The user's role on the board; None for a non-member (or nobody logged in)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    role = Membership.objects.filter(board=board, user=user).values_list("role", flat=True).first()
    return Role(role) if role else None


def may(role: Role | None, action: str) -> bool:
    return role is not None and RANK[role] >= RANK[ACTIONS[action]]


def capabilities(role: Role | None) -> dict[str, bool]:
    """What the role may do, by action (``can.approve`` in templates)."""
    return {action.replace("-", "_"): may(role, action) for action in ACTIONS}


def check(user: Any, board: Board, action: str) -> Role:
    """The user's role when it allows ``action`` on ``board``; else 404 (not a member) or 403."""
    role = role_of(user, board)
    if role is None:
        raise refuse("board_not_found", slug=board.slug)
    if not may(role, action):
        raise refusal(role, action)
    return role


def refusal(role: Role, action: str) -> PermissionDenied:
    """The 403 for a member whose role is below what ``action`` needs, naming both."""
    needed = ACTIONS[action]
    return PermissionDenied(
        f"Your role on this board is {role.label.lower()}; "
        f"{action.replace('-', ' ')} needs {needed.label.lower()}",
    )


def visible_boards(user: Any) -> list[Board]:
    """The boards the user is a member of (all of them for a superuser)."""
    if user.is_superuser:
        return list(Board.objects.all())
    return list(Board.objects.filter(memberships__user=user).order_by("slug"))


def acting_boards(user: Any) -> dict[Board, Role]:
    """The boards where the user may act on what waits for a person (operator and up),
    with their role there; every board for a superuser."""
    if user is None or not user.is_authenticated or not user.is_active:
        return {}
    if user.is_superuser:
        return {board: Role.ADMIN for board in Board.objects.order_by("slug")}
    least = [role for role, rank in RANK.items() if rank >= RANK[Role.OPERATOR]]
    memberships = Membership.objects.filter(user=user, role__in=least).select_related("board")
    return {m.board: Role(m.role) for m in memberships.order_by("board__slug")}

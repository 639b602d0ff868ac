"""A person's inbox: what waits for them on every board they may act on (SPEC §12)."""

from __future__ import annotations

from typing import Any

from boards.core.permissions import acting_boards, may
from boards.models import Board, Role
from boards.needs import reads


def _deciding(roles: dict[Board, Role]) -> set[int]:
    """The boards where this person may decide approvals."""
    return {board.pk for board, role in roles.items() if may(role, "approve")}


def inbox_items(user: Any) -> list[reads.Item]:
    """Everything that waits for this person on every board they may act on (SPEC §12),
    oldest first: approvals only where they may decide them (filtered before each
    board's limit, so what they may not decide never crowds out what they may), and on
    each item only the actions their role allows."""
    roles = acting_boards(user)
    items = reads.needs_you(list(roles), deciding=_deciding(roles))
    return [
        item.allowed(lambda action, role=roles[item.board]: may(role, action)) for item in items
    ]


def inbox_counts(user: Any) -> dict[int, int]:
    """How many items wait for this person on each board they may act on, exactly."""
    roles = acting_boards(user)
    return reads.needs_counts(list(roles), deciding=_deciding(roles))


def inbox_count(user: Any) -> int:
    """How many items wait for this person in all, exactly (the header's count)."""
    return sum(inbox_counts(user).values())

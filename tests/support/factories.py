"""Plain helpers that make boards, tokens and tasks through the services."""

from __future__ import annotations

from typing import Any

from boards.core import services
from boards.models import Board, Task


def make_board(slug: str = "team", name: str = "") -> Board:
    return services.board_create(slug=slug, name=name or slug.title())


def make_token(board: Board, agent: str = "alice", *, team: bool = False) -> str:
    return services.token_issue(board=board, agent=agent, team=team)


def make_task(
    board: Board, subject: str = "Do something", actor: str = "alice", **kwargs: Any
) -> Task:
    outcome = services.task_create(board=board, actor=actor, subject=subject, **kwargs)
    return Task.objects.get(board=board, number=outcome.task_number)

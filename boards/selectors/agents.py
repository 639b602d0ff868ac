"""The agents of a board as a person sees them: the roster."""

from __future__ import annotations

from typing import Any

from django.db.models import (
    Count,
    OuterRef,
    Subquery,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from .. import clients
from ..models import (
    UNFINISHED,
    Agent,
    AgentState,
    Board,
    Message,
    Status,
    Task,
    agent_state,
)


def roster(board: Board) -> list[dict[str, Any]]:
    """Every agent seen on the board: what it owns, its state (``models.agent_state``:
    working, idle, silent, gone) and its latest client session, if any (two queries)."""
    now = timezone.now()
    sessions = clients.live_sessions(board)

    def owned(*statuses: str) -> Coalesce:
        counted = (
            Task.objects.filter(board=board, owner=OuterRef("name"), status__in=statuses)
            .order_by()
            .values("owner")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(counted), 0)

    agents = (
        Agent.objects.filter(board=board)
        .order_by("name")
        .annotate(
            open_count=owned(*UNFINISHED),
            in_progress_count=owned(Status.IN_PROGRESS),
        )
    )
    rows = []
    for agent in agents:
        session = sessions.get(agent.name)
        state = agent_state(
            last_seen=agent.last_seen,
            holding=agent.in_progress_count,
            session_state=session.state if session else None,
            silent_after=board.silent_after_seconds,
            now=now,
        )
        rows.append(
            {
                "name": agent.name,
                "last_seen": agent.last_seen,
                "owned": agent.open_count,
                "in_progress": agent.in_progress_count,
                "state": state,
                # Holding work while silent or gone: its cards say so.
                "stale": bool(agent.in_progress_count)
                and state in (AgentState.SILENT, AgentState.GONE),
                "session": session,
            }
        )
    return rows


SENT_SHOWN = 10


def sent_messages(board: Board, limit: int = SENT_SHOWN) -> list[Message]:
    """People's latest messages to agents, newest first, each read or not yet."""
    return list(Message.objects.filter(board=board).order_by("-created_at", "-id")[:limit])

"""Reads of coding clients seen through their hooks (SPEC §11): held tool calls waiting
for a person, sessions waiting for one, and each agent's live session for the roster
and the cards. Each is one query, whatever the board's history."""

from __future__ import annotations

from typing import Any

from .models import Board, CallState, ClientSession, SessionState, ToolCall

# The strip shows at most this many held calls (oldest first); more wait their turn.
HELD_SHOWN = 50


def held_calls(board: Board) -> list[ToolCall]:
    """Tool calls a gate rule holds for a person, oldest first."""
    return list(
        ToolCall.objects.filter(board=board, state=CallState.REQUESTED).order_by(
            "requested_at", "pk"
        )[:HELD_SHOWN]
    )


def waiting_sessions(board: Board) -> list[ClientSession]:
    """Sessions that told their person they wait for them (a Notification), with no
    held call of theirs already in the strip."""
    return list(
        ClientSession.objects.filter(board=board, state=SessionState.WAITING)
        .exclude(held__state=CallState.REQUESTED)
        .order_by("last_event_at")[:HELD_SHOWN]
    )


def live_sessions(board: Board) -> dict[str, ClientSession]:
    """Each agent's most recent session, ended or not (the roster and the cards)."""
    sessions: dict[str, ClientSession] = {}
    rows = ClientSession.objects.filter(board=board).order_by("agent", "-last_event_at")
    for session in rows[:500]:
        sessions.setdefault(session.agent, session)
    return sessions


def agent_sessions(board: Board, agent: str, limit: int = 5) -> list[ClientSession]:
    """An agent's latest sessions, newest first (its panel)."""
    return list(
        ClientSession.objects.filter(board=board, agent=agent).order_by("-last_event_at")[:limit]
    )


def doing_by_agent(sessions: dict[str, ClientSession]) -> dict[str, Any]:
    """What each agent with a live session is doing now, for its cards."""
    return {
        name: s.doing for name, s in sessions.items() if s.doing and s.state != SessionState.ENDED
    }

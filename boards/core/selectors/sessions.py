"""Reads of coding clients seen through their hooks (SPEC §11): held tool calls waiting
for a person, sessions waiting for one, and each agent's live session for the roster
and the cards. Each is one query, whatever the board's history."""

from __future__ import annotations

from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from boards.models import Board, CallState, ClientSession, SessionState, ToolCall

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


# The roster shows at most this many agents' sessions (the most recently active).
ROSTER_SESSIONS = 500


def live_sessions(board: Board) -> dict[str, ClientSession]:
    """Each agent's most recent session, ended or not (the roster and the cards): one row
    per agent, whatever how many sessions any agent has had."""
    latest = Window(
        RowNumber(),
        partition_by=[F("agent")],
        order_by=[F("last_event_at").desc(), F("pk").desc()],
    )
    rows = (
        ClientSession.objects.filter(board=board)
        .annotate(rank_for_agent=latest)
        .filter(rank_for_agent=1)
        .order_by("-last_event_at")[:ROSTER_SESSIONS]
    )
    return {session.agent: session for session in rows}


# Each agent's open sessions the roster lists at most (the most recently active).
SESSIONS_PER_AGENT = 8
# Who waits on a person first, then who works, then the rest.
SESSION_URGENCY: dict[str, int] = {
    SessionState.WAITING: 0,
    SessionState.WORKING: 1,
    SessionState.IDLE: 2,
}


def open_sessions(board: Board) -> dict[str, list[ClientSession]]:
    """Each agent's sessions that have not ended, the most urgent first (waiting, working,
    idle; then the latest): one name shared by several sessions (three Claude Code
    sessions on one token) shows each. One query; ``SESSIONS_PER_AGENT`` each at most."""
    latest = Window(
        RowNumber(),
        partition_by=[F("agent")],
        order_by=[F("last_event_at").desc(), F("pk").desc()],
    )
    rows = (
        ClientSession.objects.filter(board=board)
        .exclude(state=SessionState.ENDED)
        .annotate(rank_for_agent=latest)
        .filter(rank_for_agent__lte=SESSIONS_PER_AGENT)
        .order_by("-last_event_at")[:ROSTER_SESSIONS]
    )
    found: dict[str, list[ClientSession]] = {}
    for session in rows:
        found.setdefault(session.agent, []).append(session)
    for sessions in found.values():
        sessions.sort(key=lambda s: SESSION_URGENCY.get(s.state, 3))
    return found


def human_duration(ms: float | None) -> str:
    """A call's duration as a person reads it: "840 ms", "4.2 s", "3 min 5 s", "1 h 2 min"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


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

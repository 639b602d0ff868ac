"""The agents of a board as a person sees them: the roster."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db.models import (
    Count,
    F,
    OuterRef,
    Subquery,
    Window,
)
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from boards.core.selectors.sessions import (
    human_duration,
    live_sessions,
    open_sessions,
)
from boards.models import (
    UNFINISHED,
    Agent,
    AgentState,
    Board,
    ClientSession,
    Message,
    SessionState,
    Status,
    Task,
    agent_state,
)

AWAY = (AgentState.SILENT, AgentState.GONE)


# The roster's order: an agent with a session waiting on a person first, then by state.
STATE_URGENCY = {AgentState.WORKING: 1, AgentState.IDLE: 2, AgentState.SILENT: 3}


def roster(board: Board) -> list[dict[str, Any]]:
    """Every agent seen on the board, the most urgent first (a session waiting on a
    person, then working, idle, silent, gone; by name within): what it owns, its state
    (``models.agent_state``), its latest client session and each of its open sessions,
    with its own state and calls (``sessions.open_sessions``); three queries."""
    now = timezone.now()
    sessions = live_sessions(board)
    opened = open_sessions(board)

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
        lines = opened.get(agent.name, [])
        for line in lines:
            # Each call's duration as a person reads it, beside the figure the API gives.
            line.shown_calls = [  # type: ignore[attr-defined]
                {**call, "took": human_duration(call.get("ms"))}
                for call in reversed(line.calls or [])
            ]
        waiting = any(line.state == SessionState.WAITING for line in lines)
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
                "sessions": lines,
                "waiting": waiting,
            }
        )
    rows.sort(key=lambda r: (0 if r["waiting"] else STATE_URGENCY.get(r["state"], 4), r["name"]))
    return rows


def agents_away(
    boards: Collection[Board], names: Collection[str] | None = None, *, now: datetime | None = None
) -> dict[tuple[int, str], str]:
    """The agents of these boards (only ``names`` when given) that are silent or gone
    (``models.agent_state``), each (board id, name) → its state; two queries whatever
    how many sessions they had. An agent the board never saw is not in it."""
    now = now or timezone.now()
    by_pk = {b.pk: b for b in boards}
    if not by_pk or (names is not None and not names):
        return {}
    agents = Agent.objects.filter(board_id__in=by_pk)
    sessions = ClientSession.objects.filter(board_id__in=by_pk)
    if names is not None:
        agents = agents.filter(name__in=set(names))
        sessions = sessions.filter(agent__in=set(names))
    latest = Window(
        RowNumber(),
        partition_by=[F("board_id"), F("agent")],
        order_by=[F("last_event_at").desc(), F("pk").desc()],
    )
    ended = {
        (board_id, agent)
        for board_id, agent, state in sessions.annotate(rank_for_agent=latest)
        .filter(rank_for_agent=1)
        .values_list("board_id", "agent", "state")
        if state == "ended"
    }
    away = {}
    for board_id, name, last_seen in agents.order_by().values_list("board_id", "name", "last_seen"):
        state = agent_state(
            last_seen=last_seen,
            holding=0,  # working or idle is the same here: present
            session_state="ended" if (board_id, name) in ended else None,
            silent_after=by_pk[board_id].silent_after_seconds,
            now=now,
        )
        if state in AWAY:
            away[(board_id, name)] = state
    return away


def boards_unattended(boards: Collection[Board], *, now: datetime) -> set[int]:
    """The boards (ids) that have seen agents and whose every agent is gone: ready work
    there has nobody to take it (``rules.needs_of``'s ``unattended``)."""
    seen = set(
        Agent.objects.filter(board__in=list(boards))
        .order_by()
        .values_list("board_id", flat=True)
        .distinct()
    )
    away = agents_away([b for b in boards if b.pk in seen], now=now)
    present = {
        (board_id, name)
        for board_id, name in Agent.objects.filter(board_id__in=seen)
        .order_by()
        .values_list("board_id", "name")
        if away.get((board_id, name)) != AgentState.GONE
    }
    return seen - {board_id for board_id, _ in present}


# The refused attempts a board keeps (the Connect page's list): the latest, in the cache,
# so a refused setup leaves a trace without a write per refused call.
REFUSALS_KEPT = 20


def refusals_key(slug: str) -> str:
    return f"kanban:refusals:{slug}"


def recent_refusals(board: Board) -> list[dict[str, Any]]:
    """The board's latest refused attempts at its agent doors, newest first: who (the
    name asked for, or the token's), when, why (the answer's message), from which host."""
    rows = cache.get(refusals_key(board.slug)) or []
    return [{**row, "at": datetime.fromisoformat(row["at"])} for row in reversed(rows)]


SENT_SHOWN = 10


def sent_messages(board: Board, limit: int = SENT_SHOWN) -> list[Message]:
    """People's latest messages to agents, newest first, each read or not yet."""
    return list(Message.objects.filter(board=board).order_by("-created_at", "-id")[:limit])

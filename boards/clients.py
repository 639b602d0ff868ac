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


# Claude Code 2.1 sends these to http hooks; SessionStart only to command hooks.
HTTP_HOOK_EVENTS = (
    "UserPromptSubmit",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "Stop",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
QUICK_HOOK_SECONDS = 10


def claude_settings(hook_url: str, longest_wait: int) -> dict[str, Any]:
    """The ``.claude/settings.json`` a person copies from the Connect page (SPEC §11).

    A tool call goes through ``kanban-hook`` (a command hook): it blocks the call (exit
    2) when the board cannot be reached, where an http hook would give no verdict and
    let the client's own permissions run it. It waits a little longer than the board's
    longest rule, and the client a little longer than it, so the board always answers
    first. Everything else is an http hook that never blocks. The token and agent name
    come from the environment (``KANBAN_TOKEN``, ``KANBAN_AGENT``), never the file.
    """
    held = longest_wait + 30

    def command(seconds: int) -> dict[str, Any]:
        return {
            "type": "command",
            "command": f"kanban-hook --url {hook_url} --timeout {seconds}",
            "timeout": seconds + 30,
        }

    http = {
        "type": "http",
        "url": hook_url,
        "headers": {"Authorization": "Bearer $KANBAN_TOKEN", "X-Agent": "$KANBAN_AGENT"},
        "allowedEnvVars": ["KANBAN_TOKEN", "KANBAN_AGENT"],
        "timeout": QUICK_HOOK_SECONDS,
    }
    hooks: dict[str, list[dict[str, Any]]] = {
        "SessionStart": [{"hooks": [command(QUICK_HOOK_SECONDS)]}],
        "PreToolUse": [{"matcher": "*", "hooks": [command(held)]}],
    }
    for event in HTTP_HOOK_EVENTS:
        entry: dict[str, Any] = {"hooks": [http]}
        if event in TOOL_EVENTS:
            entry = {"matcher": "*", **entry}
        hooks[event] = [entry]
    return {"hooks": hooks}

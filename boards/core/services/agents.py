"""Agents and their tokens: the roster, issuing and revoking API tokens."""

from __future__ import annotations

import difflib
import logging
import math
import secrets
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from boards.core import events
from boards.core.errors import InvalidInput, NotFound, TooManyRequests
from boards.core.services.work import NAME_MAX, Work, text, unit_of_work
from boards.core.states import EventKind
from boards.models import (
    GONE_FACTOR,
    Agent,
    AgentState,
    AgentToken,
    Board,
    Task,
    agent_name_problem,
    hash_token,
)

logger = logging.getLogger(__name__)


def agent_seen(
    *, board: Board, agent: str, token: AgentToken | None = None, min_interval: float = 5.0
) -> bool:
    """Note that ``agent`` called the board's API; True when the roster changed.

    Writes at most once per ``min_interval`` seconds per agent, so a busy agent
    does not turn every read into a write. A team token may put at most
    ``KANBAN_TEAM_AGENT_LIMIT`` names on the roster (429 beyond), so invented
    names cannot grow the board without bound.
    """
    key = (token.token_hash, agent) if token is not None else None
    if key is not None and time.monotonic() - _seen.get(key, -math.inf) < min_interval:
        return False  # this process wrote it down moments ago: no query at all
    now = timezone.now()
    changed = bool(
        Agent.objects.filter(
            board=board, name=agent, last_seen__lt=now - timedelta(seconds=min_interval)
        ).update(last_seen=now)
    )
    if not changed and not Agent.objects.filter(board=board, name=agent).exists():
        team = token if token is not None and token.is_team else None
        limit = settings.KANBAN_TEAM_AGENT_LIMIT
        if team is not None and Agent.objects.filter(token=team).count() >= limit:
            raise TooManyRequests(
                f"This team token has put {limit} agent names on the board, its limit; "
                "reuse a name, or ask a board admin to remove agents from the roster",
                code="too_many_agents",
            )
        _, changed = Agent.objects.get_or_create(
            board=board, name=agent, defaults={"last_seen": now, "token": team}
        )
    if key is not None:
        if len(_seen) > 10_000:
            _seen.clear()
        _seen[key] = time.monotonic()
    if changed:
        # The roster lives in the board's header: re-rendered on every open board, at most
        # once a window however many agents call (coalesced with the sessions' activity).
        events.publish_later(board.pk, agent)
    return changed


# When this process last marked a (token, agent) seen. Keyed by the token's hash, which
# no other board or database shares; forgotten when an agent leaves a roster, so its next
# call puts it back at once.
_seen: dict[tuple[str, str], float] = {}


def token_issue(
    *,
    board: Board,
    agent: str = "",
    team: bool = False,
    created_by: str = "",
    admin: bool = False,
    orchestrator: bool = False,
    runner: bool = False,
) -> str:
    """Issue an API token for the board; the raw token is returned once and never stored.

    ``admin``: a token that reads the board's event log (integrations), not the tools.
    ``runner``: a runner's token (SPEC §16), bound to the runner named ``agent``: it
    registers that runner, reports its presence and its own runs, and calls nothing else.
    """
    if runner and (admin or team or orchestrator):
        raise InvalidInput(
            "runner: a runner's token is neither a team, an admin nor an orchestrator token",
            field="runner",
        )
    agent = "" if team or admin else (agent or "").strip()
    team = team and not admin
    if not team and not admin:
        what = "runner" if runner else "agent"
        if not agent:
            raise InvalidInput(
                f"{what}: a token is bound to {'a runner' if runner else 'an agent'} name"
                + ("" if runner else ", or is a team token"),
                field=what,
            )
        problem = agent_name_problem(agent)
        if problem is not None:
            raise InvalidInput(f"{what}: {problem}", field=what)
    raw = "ak_" + secrets.token_urlsafe(32)
    AgentToken.objects.create(
        board=board,
        agent=agent,
        is_team=team,
        orchestrator=orchestrator and not admin,
        scope="runner" if runner else "admin" if admin else "agent",
        token_hash=hash_token(raw),
        prefix=raw[:10],
        created_by=created_by,
    )
    return raw


def known_name(board: Board, name: str) -> str | None:
    """``name`` as the board knows it (on its roster, owning one of its tasks, holding a
    token of it, or a member; names compare without case), or None."""
    found = (
        Agent.objects.filter(board=board, name__iexact=name).values_list("name", flat=True).first()
        or Task.objects.filter(board=board, owner__iexact=name)
        .order_by()
        .values_list("owner", flat=True)
        .first()
        or AgentToken.objects.filter(board=board, agent__iexact=name, revoked_at__isnull=True)
        .exclude(scope="runner")  # a runner is no agent: nothing is sent to or owned by it
        .values_list("agent", flat=True)
        .first()
        or get_user_model()
        .objects.filter(username__iexact=name, is_active=True)
        .filter(Q(board_memberships__board=board) | Q(is_superuser=True))
        .values_list("username", flat=True)
        .first()
    )
    return str(found) if found else None


def _unknown(board: Board, field: str, name: str) -> InvalidInput:
    """The refusal of a name the board does not know, with the close ones it does."""
    names = set(Agent.objects.filter(board=board).values_list("name", flat=True)[:500])
    names |= set(
        AgentToken.objects.filter(board=board, revoked_at__isnull=True)
        .exclude(agent="")
        .exclude(scope="runner")
        .values_list("agent", flat=True)[:500]
    )
    names |= set(
        get_user_model()
        .objects.filter(board_memberships__board=board, is_active=True)
        .values_list("username", flat=True)[:500]
    )
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    message = f"No agent called {name[:64]!r} on this board{hint}"
    detail: dict[str, Any] = {"field": field, "message": message}
    if close:
        detail["suggestions"] = close
    return InvalidInput(f"{field}: {message}", details=[detail])


def checked_name(board: Board, name: str, *, field: str) -> str:
    """A plain name the board knows (``known_name``), as it spells it; else 400 naming
    ``field``, with close names suggested."""
    problem = agent_name_problem(name)
    if problem is not None:
        raise InvalidInput(f"{field}: {problem}", field=field)
    known = known_name(board, name)
    if known is None:
        raise _unknown(board, field, name)
    return known


def owner_name(board: Board, name: str) -> str:
    """``name`` as a task's owner: empty (nobody), or a plain name the board knows."""
    return name if name == "" else checked_name(board, name, field="owner")


def token_revoke(*, board: Board, token_id: int) -> AgentToken:
    """Revoke a token of the board (idempotent); its next call answers 403."""
    token = AgentToken.objects.filter(board=board, pk=token_id).first()
    if token is None:
        raise NotFound("Token not found", code="token_not_found")
    if token.revoked_at is None:
        AgentToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        token.refresh_from_db()
    return token


def token_suspend(work: Work, *, token_id: int | None, reason: str) -> bool:
    """Suspend a token of ``work``'s board, inside that unit of work (the caller records
    why): every door refuses it (``auth``) until ``token_unsuspend``. True when it was
    not suspended already; a revoked or unknown token is left as it is."""
    if token_id is None:
        return False
    found = AgentToken.objects.filter(
        board=work.board, pk=token_id, suspended_at__isnull=True, revoked_at__isnull=True
    )
    return bool(found.update(suspended_at=work.now, suspended_reason=reason[:300]))


def token_unsuspend(work: Work, *, token_id: int | None) -> bool:
    """Lift a token's suspension, inside ``work`` (a person cleared what caused it)."""
    if token_id is None:
        return False
    found = AgentToken.objects.filter(board=work.board, pk=token_id, suspended_at__isnull=False)
    return bool(found.update(suspended_at=None, suspended_reason=""))


def agent_remove(*, board: Board, name: str, actor: str) -> None:
    """Take an agent off the board's roster (a person's decision); its tasks keep their owner."""
    name = text("name", name, NAME_MAX, required=True)
    with unit_of_work(board, actor, person=True) as work:
        removed, _ = Agent.objects.filter(board=work.board, name=name).delete()
        if not removed:
            raise NotFound(f"No agent {name[:64]!r} on this board", code="agent_not_found")
        _seen.clear()
        work.record(EventKind.AGENT_REMOVED, None, name=name)


# Every agent quiet for at least this long is looked at by the sweeper (the least
# silentAfterSeconds a board may set).
QUIET_MIN_SECONDS = 10
SWEEPER_ACTOR = "board"
# The event that announces each quiet state, once.
ANNOUNCED: dict[str, EventKind] = {
    AgentState.SILENT: EventKind.AGENT_SILENT,
    AgentState.GONE: EventKind.AGENT_GONE,
}


def agents_sweep(*, now: datetime | None = None) -> int:
    """Record agents turning silent or gone (``models.agent_state``), and coming back, on
    every board: an event for each that went quiet, their roster and cards re-rendered.
    Returns how many changed. A board that fails is logged and skipped."""
    now = now or timezone.now()
    rows = (
        Agent.objects.filter(
            Q(last_seen__lt=now - timedelta(seconds=QUIET_MIN_SECONDS)) | ~Q(announced="")
        )
        .order_by()
        .values_list("board_id", "name", "last_seen", "announced", "board__silent_after_seconds")
    )
    due: dict[int, list[tuple[str, str]]] = {}
    for board_id, name, last_seen, announced, silent_after in rows[:2000]:
        quiet = (now - last_seen).total_seconds()
        target = (
            AgentState.GONE
            if quiet >= GONE_FACTOR * silent_after
            else AgentState.SILENT
            if quiet >= silent_after
            else ""
        )
        if target != announced:
            due.setdefault(board_id, []).append((name, target))
    changed = 0
    for board_id, agents in due.items():
        try:
            changed += _announce(Board.objects.get(pk=board_id), agents)
        except Exception:
            logger.exception("agent sweep of board %s failed", board_id)
    return changed


def _announce(board: Board, agents: list[tuple[str, str]]) -> int:
    with unit_of_work(board, SWEEPER_ACTOR, person=True) as work:
        for name, target in agents:
            Agent.objects.filter(board=work.board, name=name).update(announced=target)
            if target:
                work.record(ANNOUNCED[target], None, name=name)
            work.header = True
            work.touch_held_by(name)
    return len(agents)

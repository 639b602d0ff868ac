"""Agents and their tokens: the roster, issuing and revoking API tokens."""

from __future__ import annotations

import math
import secrets
import time
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from .. import events
from ..errors import InvalidInput, NotFound, TooManyRequests
from ..models import Agent, AgentToken, Board, agent_name_problem, hash_token
from .work import unit_of_work


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
        # The roster lives in the board's header: re-render it on every open board.
        events.publish(board, [], ())
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
) -> str:
    """Issue an API token for the board; the raw token is returned once and never stored.

    ``admin``: a token that reads the board's event log (integrations), not the tools.
    """
    agent = "" if team or admin else (agent or "").strip()
    team = team and not admin
    if not team and not admin:
        if not agent:
            raise InvalidInput("agent: a token is bound to an agent name, or is a team token")
        problem = agent_name_problem(agent)
        if problem is not None:
            raise InvalidInput(f"agent: {problem}", details=[{"field": "agent"}])
    raw = "ak_" + secrets.token_urlsafe(32)
    AgentToken.objects.create(
        board=board,
        agent=agent,
        is_team=team,
        orchestrator=orchestrator and not admin,
        scope="admin" if admin else "agent",
        token_hash=hash_token(raw),
        prefix=raw[:10],
        created_by=created_by,
    )
    return raw


def owner_name(board: Board, name: str) -> str:
    """``name`` as a task's owner: empty (nobody), or a plain name that is on the board's
    roster, holds a token of it, or is a member (as stored: names compare without case)."""
    if name == "":
        return name
    problem = agent_name_problem(name)
    if problem is not None:
        raise InvalidInput(f"owner: {problem}", details=[{"field": "owner", "message": problem}])
    known = (
        Agent.objects.filter(board=board, name__iexact=name).values_list("name", flat=True).first()
        or AgentToken.objects.filter(board=board, agent__iexact=name, revoked_at__isnull=True)
        .values_list("agent", flat=True)
        .first()
        or get_user_model()
        .objects.filter(username__iexact=name, is_active=True)
        .filter(Q(board_memberships__board=board) | Q(is_superuser=True))
        .values_list("username", flat=True)
        .first()
    )
    if not known:
        message = f"no agent or member called {name!r} on this board"
        raise InvalidInput(f"owner: {message}", details=[{"field": "owner", "message": message}])
    return str(known)


def token_revoke(*, board: Board, token_id: int) -> AgentToken:
    """Revoke a token of the board (idempotent); its next call answers 403."""
    token = AgentToken.objects.filter(board=board, pk=token_id).first()
    if token is None:
        raise NotFound("Token not found", code="token_not_found")
    if token.revoked_at is None:
        AgentToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        token.refresh_from_db()
    return token


def agent_remove(*, board: Board, name: str, actor: str) -> None:
    """Take an agent off the board's roster (a person's decision); its tasks keep their owner."""
    with unit_of_work(board, actor, person=True) as work:
        removed, _ = Agent.objects.filter(board=work.board, name=name).delete()
        if not removed:
            raise NotFound(f"No agent {name[:64]!r} on this board", code="agent_not_found")
        _seen.clear()
        work.record("agent_removed", None, name=name)

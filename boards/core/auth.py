"""Who is calling: an agent token (bound to one agent, or a team token naming its agent),
an admin-scoped token (reads the event log) or a runner's token (SPEC §16).

Which scope each door takes is checked here only (``_check_scope``): a token of another
scope is refused with a 403 ``wrong_scope`` naming what that token may do and what the
door takes.

For every agent door (the tool endpoint, MCP, the coding clients' hooks): ``authenticate``
reads who calls and writes nothing; ``agent_called`` is the step after it that writes
(the roster's seen mark, lease renewals); ``caller_from_request`` runs both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from boards.core import selectors, services
from boards.core.errors import InvalidInput, PermissionDenied, ServiceError, Unauthorized
from boards.core.selectors.agents import REFUSALS_KEPT, refusals_key
from boards.models import Agent, AgentToken, Board, agent_name_problem, hash_token


@dataclass
class Caller:
    """An authenticated agent on its board."""

    board: Board
    agent: str
    token_id: int | None = None
    orchestrator: bool = False
    # The token it called with (the roster's seen mark is throttled by it); None for a
    # caller the server makes itself.
    token: AgentToken | None = field(default=None, repr=False, compare=False)


def authenticate(
    headers: Mapping[str, str],
    board_slug: str,
    *,
    default_agent: str = "",
    suspended_ok: bool = False,
) -> Caller:
    """The caller named by a request's headers (a case-insensitive mapping).

    ``Authorization: Bearer <token>``; a team token names its agent in
    ``X-Agent`` (else ``default_agent``, when the door has one): a plain name
    (``models.agent_name_problem``) that is neither an agent with a token of its own
    nor a person. A suspended token is refused (403 ``token_suspended``) unless
    ``suspended_ok``: the hook door hears it still, to deny its calls in the client's
    own answer and to learn of any that ran. Reads only: the door then runs
    ``agent_called``.
    """
    token, board = _token(headers, board_slug)
    if not suspended_ok:
        _check_not_suspended(token)
    _check_scope(token, (AGENT_SCOPE,), "agents call tools, hooks and MCP with an agent token")
    if token.is_team:
        agent = headers.get("X-Agent", "").strip() or default_agent
        if not agent:
            raise InvalidInput(
                "A team token needs the agent's name in the X-Agent header",
                details=[{"field": "X-Agent", "message": "required"}],
            )
        agent = _team_agent(board, token, agent)
    else:
        agent = token.agent
    return Caller(
        board=board, agent=agent, token_id=token.pk, orchestrator=token.orchestrator, token=token
    )


def agent_called(caller: Caller) -> None:
    """The step after ``authenticate`` at every agent door: the agent is marked seen on the
    board's roster, and its leases on in-progress work are renewed (an agent that calls
    is alive). Writes, through the services; a team token's name beyond its limit is
    refused here (429)."""
    services.agent_seen(board=caller.board, agent=caller.agent, token=caller.token)
    services.leases_renew(board=caller.board, agent=caller.agent)


def _check_not_suspended(token: AgentToken) -> None:
    if token.suspended_at is not None:
        raise PermissionDenied(suspended_message(token), code="token_suspended")


def suspended_message(token: AgentToken) -> str:
    """Why a suspended token is refused, and what lifts it."""
    why = token.suspended_reason or "one of its sessions ran a call without the board's verdict"
    return (
        f"This token is suspended: {why}. A person must clear it on the board "
        "(Needs you) before its agents may call again."
    )


def caller_from_request(
    headers: Mapping[str, str],
    board_slug: str,
    *,
    default_agent: str = "",
    suspended_ok: bool = False,
) -> Caller:
    """A door's first step: who calls (``authenticate``), then that they called
    (``agent_called``)."""
    try:
        caller = authenticate(
            headers, board_slug, default_agent=default_agent, suspended_ok=suspended_ok
        )
    except (Unauthorized, PermissionDenied, InvalidInput) as exc:
        refusal_record(headers, board_slug, default_agent, exc)
        raise
    agent_called(caller)
    return caller


def refusal_record(
    headers: Mapping[str, str], board_slug: str, default_agent: str, exc: ServiceError
) -> None:
    """Keep a refused attempt on the board's short list (``selectors.recent_refusals``):
    a setup that fails (a bad or missing token, a name taken) blocks every tool call of
    its agent, and without this it leaves no trace where its person looks. Only for a
    board that exists; the list is the latest ``REFUSALS_KEPT``."""
    if not Board.objects.filter(slug=board_slug).exists():
        return
    row = {
        "agent": (headers.get("X-Agent", "").strip() or default_agent)[:100],
        "host": headers.get("X-Kanban-Host", "").strip()[:100],
        "status": exc.status,
        "code": exc.code,
        "why": exc.message[:300],
        "at": timezone.now().isoformat(),
    }
    key = refusals_key(board_slug)
    rows = (cache.get(key) or [])[-(REFUSALS_KEPT - 1) :]
    cache.set(key, [*rows, row], timeout=7 * 24 * 3600)


AGENT_SCOPE = "agent"
ADMIN_SCOPE = "admin"
RUNNER_SCOPE = "runner"

# What a token of each scope may do, as a refusal at another door says it.
SCOPE_DOES = {
    AGENT_SCOPE: "This is an agent's token: it calls tools, hooks and MCP",
    ADMIN_SCOPE: "This token reads the board's event log",
    RUNNER_SCOPE: (
        "This is a runner's token: it registers its runner, reports its presence and claims, "
        "renews and reports its own runs, and nothing else (no tools, hooks, MCP or "
        "approvals)"
    ),
}


def _check_scope(token: AgentToken, allowed: tuple[str, ...], door: str) -> None:
    """The one check of a token's scope at a door: 403 ``wrong_scope`` naming what the
    token may do and what ``door`` takes."""
    if token.scope in allowed:
        return
    does = SCOPE_DOES.get(token.scope, f"This token's scope is {token.scope!r}")
    raise PermissionDenied(f"{does}; {door}", code="wrong_scope")


def _token(headers: Mapping[str, str], board_slug: str) -> tuple[AgentToken, Board]:
    header = headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Unauthorized("Send the board's token as 'Authorization: Bearer <token>'")
    # The token first: without a valid one, an unknown board and a wrong token look
    # the same (401), so board names cannot be probed.
    # One query for both: this runs before every tool call. Unordered and sliced, not
    # ``first()``: the hash is unique, and an ORDER BY costs its compiling every call.
    found = AgentToken.objects.select_related("board").filter(token_hash=hash_token(raw.strip()))
    token = next(iter(found.order_by()[:1]), None)
    if token is None:
        raise Unauthorized("Unknown token")
    board = token.board
    if board.slug != board_slug:
        selectors.board_get(board_slug)  # an unknown board is a 404, to a valid token
        raise PermissionDenied("This token belongs to another board")
    if token.revoked_at is not None:
        raise PermissionDenied("This token has been revoked", code="token_revoked")
    return token, board


def authenticate_admin(headers: Mapping[str, str], board_slug: str) -> Board:
    """The board an admin-scoped token reads (the event log's JSON, for integrations)."""
    token, board = _token(headers, board_slug)
    _check_scope(
        token,
        (ADMIN_SCOPE,),
        "reading the event log needs an admin-scoped token (issued on the Tokens page)",
    )
    return board


def authenticate_reader(
    headers: Mapping[str, str], board_slug: str, *, runner_ok: bool = False
) -> Board:
    """The board a token may read (metrics, the roster): agent or admin scope, and a
    runner's when ``runner_ok`` (the runners' presence); not a suspended one."""
    token, board = _token(headers, board_slug)
    scopes = (AGENT_SCOPE, ADMIN_SCOPE, RUNNER_SCOPE) if runner_ok else (AGENT_SCOPE, ADMIN_SCOPE)
    _check_scope(token, scopes, "this read takes an agent's or an admin-scoped token")
    _check_not_suspended(token)
    return board


@dataclass
class RunnerCaller:
    """A runner's token on its board: the runner it names (``issuetoken --runner NAME``)."""

    board: Board
    name: str
    token: AgentToken = field(repr=False, compare=False)


def authenticate_runner(headers: Mapping[str, str], board_slug: str) -> RunnerCaller:
    """The runner a request's token names, at the runners' doors (hello, poll): a
    runner-scoped token only, not a suspended one. Reads only."""
    token, board = _token(headers, board_slug)
    _check_scope(
        token,
        (RUNNER_SCOPE,),
        "this door is the runners': issue one with `agent-kanban issuetoken <slug> --runner NAME`",
    )
    _check_not_suspended(token)
    return RunnerCaller(board=board, name=token.agent, token=token)


def _team_agent(board: Board, token: AgentToken, agent: str) -> str:
    """The agent a team token names in ``X-Agent``, as the roster spells it.

    Names compare without case. A name is refused when it is a person's, when a bound
    token has ever carried it (revoked names stay reserved, with their inbox), or when
    another team token put it on the roster: a team token's agents are its own.
    """
    problem = agent_name_problem(agent)
    if problem is not None:
        raise InvalidInput(f"X-Agent: {problem}", field="X-Agent")
    if AgentToken.objects.filter(board=board, agent__iexact=agent, is_team=False).exists():
        raise PermissionDenied(
            f"X-Agent: {agent!r} has (or had) a token of its own; a team token cannot act as it",
            code="identity_taken",
        )
    if get_user_model().objects.filter(username__iexact=agent).exists():
        raise PermissionDenied(
            f"X-Agent: {agent!r} is a person's name; agents cannot act as people",
            code="identity_taken",
        )
    known = Agent.objects.filter(board=board, name__iexact=agent).values_list("name", "token_id")
    for name, token_id in known[:1]:
        if token_id != token.pk:
            raise PermissionDenied(
                f"X-Agent: {agent!r} belongs to another token on this board",
                code="identity_taken",
            )
        return str(name)
    return agent


def challenge(exc: Exception, headers: Mapping[str, str]) -> dict[str, str] | None:
    """The ``WWW-Authenticate`` header of a 401 (RFC 6750): ``error="invalid_token"`` when
    a token was sent and is not valid, so OAuth-aware clients show why."""
    if not isinstance(exc, Unauthorized):
        return None
    if not headers.get("Authorization", "").strip():
        return {"WWW-Authenticate": 'Bearer realm="kanban"'}
    description = str(getattr(exc, "message", "invalid token")).replace('"', "'")
    return {
        "WWW-Authenticate": (
            f'Bearer realm="kanban", error="invalid_token", error_description="{description}"'
        )
    }

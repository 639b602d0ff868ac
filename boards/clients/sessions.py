"""Coding clients' sessions seen through their hooks (SPEC §11).

``session_event`` takes one hook event of a session (Claude Code's hook input)
and keeps the session's row: its state, what it is doing now, its last few tool
calls. Routine activity (a tool call starting or ending) writes that one row,
records no event and pushes nothing at once: the board's roster is re-rendered
at most once per ``KANBAN_SESSION_PUSH_SECONDS`` (``events.publish_later``), so a
session making ten calls a second floods neither the event log nor the sockets.

What an event does to the row is one handler per hook event name (``HANDLERS``).
A tool call's own part (the board's verdict, a call held for a person, a call that
ran without the verdict) is ``boards.clients.calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boards.clients import calls
from boards.clients.calls import Verdict
from boards.core import events, limits
from boards.core.errors import Conflict
from boards.core.rules import REPEATS_NO_PROGRESS
from boards.core.services.work import Work, shown, unit_of_work
from boards.core.states import EventKind
from boards.gates import matching
from boards.models import Board, ClientSession, Reason, SessionState

# Events that start or end a tool call, and those that change the session's state.
TOOL_START = "PreToolUse"
TOOL_ENDS = {"PostToolUse": "ok", "PostToolUseFailure": "error"}
SKILL_SHELL = "PreSkillShellCommand"
SUBAGENTS_DOING = "Subagents working: "
SUBAGENTS_KEPT = 50


def _subagent_types(session: ClientSession) -> str:
    return ", ".join(sorted({a.get("type") or "subagent" for a in session.running_subagents}))[:200]


@dataclass(frozen=True)
class Origin:
    """Which client sent a session's events, which version, from which machine."""

    client: str = "claude-code"
    version: str = ""
    host: str = ""
    # Seconds the client holds a hook before it goes on without a verdict (None: as long
    # as the rule waits); a held call ends with its fallback by then.
    longest_hold: int | None = None
    # The token the hook came with: its held calls are counted against the cap, and a
    # call that ran ungated suspends it.
    token_id: int | None = None
    # Why the token is suspended ("": it is not): every call it asks is denied.
    suspended: str = ""


def session_event(
    *,
    board: Board,
    agent: str,
    event: dict[str, Any],
    client: str = "claude-code",
    client_version: str = "",
    host: str = "",
    longest_hold: int | None = None,
    token_id: int | None = None,
    suspended: str = "",
) -> Verdict:
    """Record one hook event of a client session (Claude Code's hook input, or another
    client's read as it by its adapter, ``boards.clients.registry``).

    Returns the verdict on a ``PreToolUse``: the first matching gate rule's
    decision (``ask`` holds the call as a ``ToolCall``, for at most ``longest_hold``
    seconds when the client gives up on a hook sooner than the rule waits), or no
    decision. An ``ask`` past ``KANBAN_WATCHES_PER_TOKEN`` of ``token_id``'s calls
    waiting for a person is denied, and nothing is recorded for a person; every call of
    a ``suspended`` token is denied. The end of a call the board had not allowed (denied,
    still held, or never asked) is recorded as run without the board's verdict: a
    Needs-you item, and the token suspended (``calls.ran_ungated``).
    """
    origin = Origin(client, client_version, host, longest_hold, token_id, suspended)
    name = event["hook_event_name"]
    now = timezone.now()
    rule = None
    if name == TOOL_START and event.get("tool_name"):
        rule = calls.SUSPENDED_RULE if suspended else calls.first_match(board, event)
    known = (
        ClientSession.objects.filter(board=board, session_id=event["session_id"])
        .values_list("last_call_key", "repeats")
        .first()
    )
    # Whatever takes the board's lock takes it before the session's (as a person's decision
    # does), so the two never wait on each other.
    board_lock = (
        (rule is not None and rule.decision == matching.ASK)
        or name in ("SessionStart", "SessionEnd")
        or known is None
        or _loop_turns(known, name, calls.call_key(event))
    )
    try:
        return _locked(board, agent, event, rule, now, origin, board_lock=board_lock)
    except _NeedsBoardLock:
        # Parallel calls of the session made the read above stale: again, on the board.
        return _locked(board, agent, event, rule, now, origin, board_lock=True)


class _NeedsBoardLock(Exception):
    """The session's loop began or ended, which is a write on the board (an event, the
    strip re-rendered), but the event was applied without the board's lock."""


def _locked(
    board: Board,
    agent: str,
    event: dict[str, Any],
    rule: matching.Rule | None,
    now: Any,
    origin: Origin,
    *,
    board_lock: bool,
) -> Verdict:
    scope = unit_of_work(board, agent) if board_lock else nullcontext(None)
    with transaction.atomic(), scope as work:
        return _apply(board, agent, event, rule, now, work, origin)


# Events after which a session's run of one tool call no longer counts: the person spoke,
# or the turn or the session ended.
LOOP_RESETS = frozenset({"UserPromptSubmit", "Stop", "SessionStart", "SessionEnd"})


def _loop_turns(known: tuple[str, int], name: str, key: str) -> bool:
    """Whether this event starts or ends a loop a person sees (``REPEATS_NO_PROGRESS`` of
    the same call in a row): a write on the board, recorded and pushed. A guess from a
    read made before the write; ``_apply`` has the last word."""
    last_key, repeats = known
    if name == TOOL_START and key == last_key:
        return repeats + 1 == REPEATS_NO_PROGRESS
    return (name == TOOL_START or name in LOOP_RESETS) and repeats >= REPEATS_NO_PROGRESS


def _check_sessions_cap(board: Board, agent: str) -> None:
    """One agent's open sessions are bounded (each is a roster line, and may wait for a
    person): past the cap a new session is refused, and the row just made rolls back."""
    cap = int(settings.KANBAN_SESSIONS_PER_AGENT)
    open_sessions = ClientSession.objects.filter(board=board, agent=agent).exclude(
        state=SessionState.ENDED
    )
    if open_sessions.count() > cap:
        raise Conflict(
            f"{agent} has {cap} sessions open on this board, the most it may: end one "
            "(or let the board mark it gone) before starting another",
            code="too_many_sessions",
        )


@dataclass
class _Hook:
    """One hook event being applied to its session's row (locked)."""

    session: ClientSession
    event: dict[str, Any]
    name: str
    tool: str
    tool_input: dict[str, Any]
    # The gate rule that decides a PreToolUse (None for any other event).
    rule: matching.Rule | None
    now: Any
    # None when the event is applied without the board's lock (``session_event``).
    work: Work | None
    origin: Origin
    # The subagent that sent the event, if one did.
    subagent: str | None


def _on_session_end(hook: _Hook) -> None:
    session = hook.session
    calls.close_calls(session)
    session.state, session.doing, session.ended_at = SessionState.ENDED, "", hook.now


def _on_idle(hook: _Hook) -> None:
    session = hook.session
    calls.close_calls(session)
    session.state, session.doing, session.ended_at = SessionState.IDLE, "", None


def _on_stop(hook: _Hook) -> None:
    session = hook.session
    if not session.running_subagents:
        _on_idle(hook)
        return
    # The main thread's turn ended; a background subagent still works.
    session.state, session.ended_at = SessionState.WORKING, None
    session.doing = SUBAGENTS_DOING + _subagent_types(session)


def _on_stop_failure(hook: _Hook) -> None:
    session = hook.session
    calls.close_calls(session)
    error = " ".join(str(hook.event.get("error") or "an error").split())[:100]
    session.state, session.doing = SessionState.STOPPED, f"Stopped: {error}"[:300]


def _on_notification(hook: _Hook) -> None:
    session = hook.session
    session.state = SessionState.WAITING
    session.doing = shown(str(hook.event.get("message") or "Waiting for you"))[:300]


def _on_prompt(hook: _Hook) -> None:
    session, prompt = hook.session, hook.event.get("prompt")
    session.state = SessionState.WORKING
    session.doing = "Working on: " + " ".join(str(hook.event.get("prompt", "")).split())[:200]
    session.goal = goal_of(prompt) or session.goal


def _on_subagent_start(hook: _Hook) -> None:
    session, agent_id = hook.session, hook.event.get("agent_id")
    running = [a for a in session.running_subagents if a.get("id") != agent_id]
    running.append({"id": str(agent_id or "")[:128], "type": hook.subagent or ""})
    session.running_subagents = running[-SUBAGENTS_KEPT:]
    session.subagents = len(session.running_subagents)
    session.state = SessionState.WORKING


def _on_subagent_stop(hook: _Hook) -> None:
    session, agent_id = hook.session, hook.event.get("agent_id")
    # ``/compact`` sends two SubagentStop with no start: an unknown one is ignored.
    running = [a for a in session.running_subagents if a.get("id") != agent_id]
    if len(running) != len(session.running_subagents):
        session.running_subagents, session.subagents = running, len(running)
        if not running and session.doing.startswith(SUBAGENTS_DOING):
            session.state, session.doing = SessionState.IDLE, ""


def _on_tool_start(hook: _Hook) -> None:
    session, event, tool, rule = hook.session, hook.event, hook.tool, hook.rule
    if not tool:
        return
    key = calls.call_key(event)
    session.repeats = session.repeats + 1 if key == session.last_call_key else 1
    session.last_call_key = key
    doing = matching.describe_call(tool, hook.tool_input)
    session.state, session.doing = SessionState.WORKING, doing[:300]
    outcome = "running"
    if rule is not None and rule.decision == matching.DENY:
        outcome = "denied"
    elif rule is not None and rule.decision == matching.ASK:
        outcome, session.state = "waiting", SessionState.WAITING
    entry = {
        "id": calls.entry_id(event, key),
        "tool": tool[:200],
        "doing": doing[:300],
        "outcome": outcome,
        "at": hook.now.isoformat(),
    }
    if event.get("client_tool") and event["client_tool"] != tool:
        entry["clientTool"] = str(event["client_tool"])[:200]
    if event.get("client_event") == SKILL_SHELL:
        # A skill's shell line has no PostToolUse: once let through, it ran.
        entry["skill"] = str(event.get("command_name") or "")[:100]
    if hook.subagent:
        entry["subagent"] = str(hook.subagent)[:100]
    if not event.get("tool_use_id"):
        entry["key"] = key[: calls.KEY_KEPT]
    calls.note_call(session, entry)
    event["tool_use_id"] = entry["id"]  # a held call of a client without ids finds it


def _on_tool_end(hook: _Hook) -> None:
    session, event = hook.session, hook.event
    session.state = SessionState.WORKING
    given = str(event.get("tool_use_id") or "")
    reported = calls.ended_entry(session, given, calls.call_key(event))
    held = calls.held_row(session, reported)
    why = calls.ran_ungated(session, reported, held, hook.tool)
    if why:
        if hook.work is None:
            raise _NeedsBoardLock
        calls.record_ran(hook.work, session, reported, held, event, why, hook.origin.token_id)
    elif reported is not None and reported.get("outcome") != calls.RAN_UNGATED:
        ended = str(reported.get("id") or "")
        calls.end_call(session, ended, TOOL_ENDS[hook.name], event.get("duration_ms"))


def _on_permission_denied(hook: _Hook) -> None:
    calls.end_call(hook.session, str(hook.event.get("tool_use_id") or ""), "refused", None)


def _on_tool_batch(hook: _Hook) -> None:
    # Every call of the batch has resolved: one still open was refused by the client.
    batch = hook.event.get("tool_calls")
    for call in batch if isinstance(batch, list) else ():
        if isinstance(call, dict) and call.get("tool_use_id"):
            calls.end_call(hook.session, str(call["tool_use_id"]), "refused", None, only_open=True)


# What each hook event does to its session's row (an event not named here only keeps the
# row's common fields: when it was last heard from, where it works, its model).
HANDLERS: dict[str, Callable[[_Hook], None]] = {
    "SessionStart": _on_idle,
    "SessionEnd": _on_session_end,
    "Stop": _on_stop,
    "StopFailure": _on_stop_failure,
    "Notification": _on_notification,
    "UserPromptSubmit": _on_prompt,
    "SubagentStart": _on_subagent_start,
    "SubagentStop": _on_subagent_stop,
    TOOL_START: _on_tool_start,
    **dict.fromkeys(TOOL_ENDS, _on_tool_end),
    "PermissionDenied": _on_permission_denied,
    "PostToolBatch": _on_tool_batch,
}


def _apply(
    board: Board,
    agent: str,
    event: dict[str, Any],
    rule: matching.Rule | None,
    now: Any,
    work: Work | None,
    origin: Origin,
) -> Verdict:
    name = event["hook_event_name"]
    tool = event.get("tool_name") or ""
    tool_input = event.get("tool_input") or {}
    session, created = ClientSession.objects.select_for_update().get_or_create(
        board=board,
        session_id=event["session_id"],
        defaults={
            "agent": agent,
            "client": origin.client,
            "started_at": now,
            "last_event_at": now,
        },
    )
    if session.agent != agent:
        raise Conflict(
            f"Session {event['session_id'][:40]!r} belongs to {session.agent}",
            code="session_taken",
        )
    if created:
        _check_sessions_cap(board, agent)
    was = (session.state, session.doing, session.goal)
    looping = session.repeats >= REPEATS_NO_PROGRESS
    if name in LOOP_RESETS:
        session.repeats, session.last_call_key = 0, ""
    session.last_event_at = now
    if origin.version:
        session.client_version = origin.version
    if origin.host:
        session.host = origin.host
    for field, limit in (("cwd", 1000), ("permission_mode", 32)):
        if isinstance(event.get(field), str):
            setattr(session, field, event[field][:limit])
    model = event.get("model")
    if isinstance(model, dict):
        model = model.get("display_name") or model.get("id")
    if isinstance(model, str) and model:
        session.model = model[:100]
    subagent = event.get("agent_type") if event.get("agent_id") else None
    handler = HANDLERS.get(name)
    if handler is not None:
        hook = _Hook(session, event, name, tool, tool_input, rule, now, work, origin, subagent)
        handler(hook)
    if (session.repeats >= REPEATS_NO_PROGRESS) != looping:
        if work is None:
            raise _NeedsBoardLock
        _record_loop(work, session, ended=looping)
    session.save()
    verdict = Verdict()
    if rule is not None:
        verdict = calls.call_verdict(
            agent,
            session,
            rule,
            event,
            now,
            work,
            token_id=origin.token_id,
            longest_hold=origin.longest_hold,
            suspended=origin.suspended,
        )
    started = created and name != "SessionEnd"
    ended = name == "SessionEnd" and was[0] != SessionState.ENDED
    if work is not None and (started or ended):
        work.record(
            EventKind.SESSION_STARTED if started else EventKind.SESSION_ENDED,
            None,
            session=session.session_id[:40],
            cwd=session.cwd[:200],
        )
        # The cards its agent holds say whether it is there (``states.agent_state``).
        work.touch_held_by(agent)
    elif (session.state, session.doing, session.goal) != was or created:
        events.publish_later(board.pk, agent)
    return verdict


def goal_of(prompt: Any) -> str:
    """A prompt as a session keeps it for its goal: printable text (line breaks kept),
    trimmed, at most ``limits.SESSION_GOAL_MAX`` characters ("" when there is none)."""
    if not isinstance(prompt, str):
        return ""
    kept = "".join(ch for ch in prompt if ch.isprintable() or ch in "\n\t").strip()
    if len(kept) > limits.SESSION_GOAL_MAX:
        kept = kept[: limits.SESSION_GOAL_MAX - 1].rstrip() + "…"
    return kept


def _record_loop(work: Work, session: ClientSession, ended: bool) -> None:
    """A session's loop began (it needs a person: ``no_progress``) or ended (the strip
    loses the item)."""
    if ended:
        work.header = True
        return
    work.record(
        EventKind.NEEDS_ATTENTION,
        None,
        reason=Reason.NO_PROGRESS,
        session=session.session_id[:40],
        repeats=session.repeats,
    )

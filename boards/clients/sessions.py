"""Coding clients' sessions seen through their hooks, and their gated tool calls (SPEC §11).

``session_event`` takes one hook event of a session (Claude Code's hook input)
and keeps the session's row: its state, what it is doing now, its last few tool
calls. Routine activity (a tool call starting or ending) writes that one row,
records no event and pushes nothing at once: the board's roster is re-rendered
at most once per ``KANBAN_SESSION_PUSH_SECONDS`` (``events.publish_later``), so a
session making ten calls a second floods neither the event log nor the sockets.

A ``PreToolUse`` is matched against the board's gate rules (``boards.gates.matching``);
an ``ask`` becomes a held ``ToolCall`` (an event, pushed), which a person
decides (``tool_call_decide``) or which ends with its rule's fallback at its
deadline (``tool_call_expire``). The door holds the client's request meanwhile.

A call's end (``PostToolUse``) that reports a call the board had not allowed (denied,
still held, or never asked in a session whose calls reach the gate) means its hook was
stopped: the call is recorded as run (``CallState.RAN``), waits for a person
(``Reason.TAMPERING``) and suspends its token until they clear it (``tool_call_clear``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boards.core import events, limits
from boards.core.errors import Conflict, InvalidInput, NotFound
from boards.core.rules import REPEATS_NO_PROGRESS, client_gone
from boards.core.services import agents, stepup
from boards.core.services.work import Work, shown, text, unit_of_work
from boards.core.states import EventKind
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import (
    Board,
    CallState,
    ClientSession,
    GateRule,
    Reason,
    SessionState,
    ToolCall,
)

SUMMARY_MAX = 2_000
NOTE_MAX = limits.NOTE_MAX
# Events that start or end a tool call, and those that change the session's state.
TOOL_START = "PreToolUse"
TOOL_ENDS = {"PostToolUse": "ok", "PostToolUseFailure": "error"}


@dataclass
class Verdict:
    """What the board answers a hook: nothing, or a decision on a tool call; ``held`` is
    a ToolCall waiting for a person (the door waits for its decision)."""

    decision: str | None = None
    reason: str = ""
    held: int | None = None
    deadline: Any = None


def _calls_kept() -> int:
    return max(1, int(settings.KANBAN_SESSION_CALLS))


def _note_call(session: ClientSession, entry: dict[str, Any]) -> None:
    """Keep ``entry`` among the session's last calls. Ended calls make room first: an
    open call's end must find it (an end the board cannot place reads as a call it never
    saw asked, ``_ran_ungated``), so it is dropped only beyond ``OPEN_KEPT`` open ones."""
    calls = [c for c in session.calls if c.get("id") != entry["id"] or not entry["id"]]
    calls.append(entry)
    keep = _calls_kept()
    while len(calls) > keep:
        ended = next((c for c in calls if c.get("outcome") not in OPEN), None)
        if ended is None:
            calls = calls[-max(keep, OPEN_KEPT) :]
            break
        calls.remove(ended)
    session.calls = calls


# Clients that send no call id (Gemini CLI, Copilot CLI): a call is named by the board
# and its end is matched by the call's name and input (a digest, this many characters).
KEY_KEPT = 16
OPEN = frozenset({"running", "waiting", "approved"})
# Open calls no person holds: the client may still refuse them itself.
OPEN_UNHELD = frozenset({"running", "approved"})
# Open calls a session keeps past its last few (``_note_call``).
OPEN_KEPT = 100
# A call its client ran though the board had not allowed it (``_ran_ungated``).
RAN_UNGATED = "ran_ungated"
SKILL_SHELL = "PreSkillShellCommand"
SUBAGENTS_DOING = "Subagents working: "
SUBAGENTS_KEPT = 50


def _subagent_types(session: ClientSession) -> str:
    return ", ".join(sorted({a.get("type") or "subagent" for a in session.running_subagents}))[:200]


def _close_calls(session: ClientSession) -> None:
    """The turn or the session is over: a call still open and held by no person was
    refused by the client (a skill's shell line, let through, ran)."""
    for call in session.calls:
        if call.get("outcome") in OPEN_UNHELD:
            call["outcome"] = "ok" if call.get("skill") is not None else "refused"


def _call_id(event: dict[str, Any], key: str) -> str:
    given = str(event.get("tool_use_id") or "")[:128]
    return given or f"board-{key[:8]}-{uuid.uuid4().hex[:8]}"


def _ended_entry(session: ClientSession, given: str, key: str) -> dict[str, Any] | None:
    """The session's call that an end reports (None: the board has none): by its id, or,
    from a client without ids, its oldest open call with this name and input (it ends its
    calls in the order it made them), else its oldest denied one (which ran all the same)."""
    if given:
        return next((c for c in reversed(session.calls) if c.get("id") == given), None)
    same = [c for c in session.calls if c.get("key") == key[:KEY_KEPT]]
    for outcomes in (OPEN, {"denied"}):
        found = next((c for c in same if c.get("outcome") in outcomes), None)
        if found is not None:
            return found
    return None


def _held_row(session: ClientSession, entry: dict[str, Any] | None) -> ToolCall | None:
    """The held call row of a session's call, locked, if a rule held it for a person."""
    if entry is None or entry.get("outcome") not in ("waiting", "denied") or not entry.get("id"):
        return None
    rows = ToolCall.objects.select_for_update().filter(
        session=session, tool_use_id=str(entry["id"])[:128]
    )
    return rows.order_by("-pk").first()


def _ran_ungated(
    session: ClientSession, entry: dict[str, Any] | None, held: ToolCall | None, tool: str
) -> str:
    """Why a call whose end arrived ran without the board's verdict ("": it had one):
    the board denied it, still held it for a person, or never saw it asked in a session
    whose calls it has been asked about (every tool call goes through the gated hook)."""
    if entry is None:
        # Calls are noted only when asked. A tool this session was never asked about may
        # be one its client sends no PreToolUse for (a client's own tools differ by
        # version): only a tool the gate has heard of in this session is taken for a
        # stopped hook, so an ordinary session is never suspended by a client's quirk.
        asked_before = any(c.get("tool") == tool[:200] for c in session.calls)
        return "the board never saw it asked" if tool and asked_before else ""
    if held is not None and held.state == CallState.APPROVED:
        return ""
    if held is not None and held.state == CallState.EXPIRED and held.fallback == matching.ALLOW:
        return ""
    if entry.get("outcome") == "waiting":
        return "it was still waiting for a person's decision"
    if entry.get("outcome") != "denied":
        return ""
    if held is not None and held.state == CallState.EXPIRED:
        return "nobody answered in time and its rule denies it then"
    if held is not None and held.decided_by:
        return f"{held.decided_by} denied it"
    return "the board denied it"


def _record_ran(
    work: Work,
    session: ClientSession,
    entry: dict[str, Any] | None,
    held: ToolCall | None,
    event: dict[str, Any],
    why: str,
    origin: Origin,
) -> ToolCall:
    """A call ran without the board's verdict: its record says so (the held row, or a
    new one), it waits for a person (``Reason.TAMPERING``), and the token is suspended
    until a person clears it (``tool_call_clear``)."""
    tool, tool_input = event["tool_name"], event.get("tool_input") or {}
    if entry is None:
        key = call_key(event)
        entry = {
            "id": _call_id(event, key),
            "tool": tool[:200],
            "doing": matching.describe_call(tool, tool_input)[:300],
            "at": work.now.isoformat(),
        }
        if not event.get("tool_use_id"):
            entry["key"] = key[:KEY_KEPT]
        _note_call(session, entry)
    entry["outcome"] = RAN_UNGATED
    call = held
    if call is None:
        kind, summary = matching.main_input(tool, tool_input)
        call = ToolCall(
            board=work.board,
            session=session,
            agent=session.agent,
            tool_name=tool[:200],
            tool_use_id=str(entry.get("id") or "")[:128],
            input_kind=kind,
            summary=summary[:SUMMARY_MAX],
            tool_input=_bounded(tool_input),
            cwd=session.cwd,
            wait_seconds=0,
            requested_at=work.now,
            deadline=work.now,
        )
    call.state, call.ran_at = CallState.RAN, work.now
    call.token_id = call.token_id or origin.token_id
    call.save()
    reason = f"{session.agent} ran {call.tool_name} `{shown(call.summary)[:120]}` ({why})"
    agents.token_suspend(work, token_id=call.token_id, reason=reason)
    work.record(
        EventKind.TOOL_CALL_RAN,
        None,
        call=call.pk,
        agent=session.agent,
        tool=call.tool_name,
        summary=shown(call.summary),
        why=why,
        session=session.session_id[:40],
    )
    return call


def _end_call(
    session: ClientSession, call_id: str, outcome: str, ms: Any, *, only_open: bool = False
) -> None:
    for call in reversed(session.calls):
        if call.get("id") == call_id:
            if only_open and call.get("outcome") not in OPEN_UNHELD:
                return
            call["outcome"] = "ok" if only_open and call.get("skill") is not None else outcome
            if isinstance(ms, int | float) and 0 <= ms < 10**9:
                call["ms"] = int(ms)
            return


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


def _first_match(board: Board, event: dict[str, Any]) -> matching.Rule | None:
    """The rule that decides a call, read by Claude Code's tool name and the client's own."""
    return matching.first_match(
        gaterules.rules_of_board(board, str(event.get("session_id") or "")),
        event["tool_name"],
        event.get("tool_input") or {},
        event.get("cwd") or "",
        client_tool=event.get("client_tool") or event["tool_name"],
    )


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
    Needs-you item, and the token suspended (``_ran_ungated``).
    """
    origin = Origin(client, client_version, host, longest_hold, token_id, suspended)
    name = event["hook_event_name"]
    now = timezone.now()
    rule = None
    if name == TOOL_START and event.get("tool_name"):
        rule = SUSPENDED_RULE if suspended else _first_match(board, event)
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
        or _loop_turns(known, name, call_key(event))
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


def call_key(event: dict[str, Any]) -> str:
    """A tool call's identity for noticing a loop: its name and input (no ids or times)."""
    tool = event.get("tool_name") or ""
    body = json.dumps([tool, event.get("tool_input") or {}], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


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
    if name == "SessionEnd":
        _close_calls(session)
        session.state, session.doing, session.ended_at = SessionState.ENDED, "", now
    elif name == "Stop" and session.running_subagents:
        # The main thread's turn ended; a background subagent still works.
        session.state, session.ended_at = SessionState.WORKING, None
        session.doing = SUBAGENTS_DOING + _subagent_types(session)
    elif name in ("Stop", "SessionStart"):
        _close_calls(session)
        session.state, session.doing, session.ended_at = SessionState.IDLE, "", None
    elif name == "StopFailure":
        _close_calls(session)
        error = " ".join(str(event.get("error") or "an error").split())[:100]
        session.state, session.doing = SessionState.STOPPED, f"Stopped: {error}"[:300]
    elif name == "Notification":
        session.state = SessionState.WAITING
        session.doing = shown(str(event.get("message") or "Waiting for you"))[:300]
    elif name == "UserPromptSubmit":
        session.state = SessionState.WORKING
        session.doing = "Working on: " + " ".join(str(event.get("prompt", "")).split())[:200]
        session.goal = goal_of(event.get("prompt")) or session.goal
    elif name == "SubagentStart":
        running = [a for a in session.running_subagents if a.get("id") != event.get("agent_id")]
        running.append({"id": str(event.get("agent_id") or "")[:128], "type": subagent or ""})
        session.running_subagents = running[-SUBAGENTS_KEPT:]
        session.subagents = len(session.running_subagents)
        session.state = SessionState.WORKING
    elif name == "SubagentStop":
        # ``/compact`` sends two SubagentStop with no start: an unknown one is ignored.
        running = [a for a in session.running_subagents if a.get("id") != event.get("agent_id")]
        if len(running) != len(session.running_subagents):
            session.running_subagents, session.subagents = running, len(running)
            if not running and session.doing.startswith(SUBAGENTS_DOING):
                session.state, session.doing = SessionState.IDLE, ""
    elif name == TOOL_START and tool:
        key = call_key(event)
        session.repeats = session.repeats + 1 if key == session.last_call_key else 1
        session.last_call_key = key
        doing = matching.describe_call(tool, tool_input)
        session.state, session.doing = SessionState.WORKING, doing[:300]
        outcome = "running"
        if rule is not None and rule.decision == matching.DENY:
            outcome = "denied"
        elif rule is not None and rule.decision == matching.ASK:
            outcome, session.state = "waiting", SessionState.WAITING
        entry = {
            "id": _call_id(event, key),
            "tool": tool[:200],
            "doing": doing[:300],
            "outcome": outcome,
            "at": now.isoformat(),
        }
        if event.get("client_tool") and event["client_tool"] != tool:
            entry["clientTool"] = str(event["client_tool"])[:200]
        if event.get("client_event") == SKILL_SHELL:
            # A skill's shell line has no PostToolUse: once let through, it ran.
            entry["skill"] = str(event.get("command_name") or "")[:100]
        if subagent:
            entry["subagent"] = str(subagent)[:100]
        if not event.get("tool_use_id"):
            entry["key"] = key[:KEY_KEPT]
        _note_call(session, entry)
        event["tool_use_id"] = entry["id"]  # a held call of a client without ids finds it
    elif name in TOOL_ENDS:
        session.state = SessionState.WORKING
        reported = _ended_entry(session, str(event.get("tool_use_id") or ""), call_key(event))
        held = _held_row(session, reported)
        why = _ran_ungated(session, reported, held, tool)
        if why:
            if work is None:
                raise _NeedsBoardLock
            _record_ran(work, session, reported, held, event, why, origin)
        elif reported is not None and reported.get("outcome") != RAN_UNGATED:
            _end_call(
                session, str(reported.get("id") or ""), TOOL_ENDS[name], event.get("duration_ms")
            )
    elif name == "PermissionDenied":
        _end_call(session, str(event.get("tool_use_id") or ""), "refused", None)
    elif name == "PostToolBatch":
        # Every call of the batch has resolved: one still open was refused by the client.
        batch = event.get("tool_calls")
        for call in batch if isinstance(batch, list) else ():
            if isinstance(call, dict) and call.get("tool_use_id"):
                _end_call(session, str(call["tool_use_id"]), "refused", None, only_open=True)
    if (session.repeats >= REPEATS_NO_PROGRESS) != looping:
        if work is None:
            raise _NeedsBoardLock
        _record_loop(work, session, ended=looping)
    session.save()
    verdict = Verdict()
    if rule is not None:
        verdict = _verdict(agent, session, rule, event, now, work, origin)
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


def _verdict(
    agent: str,
    session: ClientSession,
    rule: matching.Rule,
    event: dict[str, Any],
    now: Any,
    work: Work | None,
    origin: Origin,
) -> Verdict:
    label = rule.label()
    if origin.suspended:
        return Verdict(matching.DENY, suspended_reason(origin.suspended))
    if rule.decision == matching.ALLOW:
        return Verdict(matching.ALLOW, f"Allowed by the board's rule “{label}”.")
    if rule.decision == matching.DENY:
        return Verdict(
            matching.DENY,
            f"Blocked by the board's rule “{label}”: do not run this; find another way "
            "or ask a person on the board.",
        )
    if _over_cap(origin.token_id):
        return Verdict(
            matching.DENY,
            "Too many of this token's calls are waiting for a person: this one was not "
            "asked; wait for the others to be decided, then try again.",
        )
    tool, tool_input = event["tool_name"], event.get("tool_input") or {}
    kind, summary = matching.main_input(tool, tool_input)
    wait = max(matching.WAIT_MIN, min(matching.WAIT_MAX, rule.wait_seconds))
    if origin.longest_hold is not None:
        wait = min(wait, origin.longest_hold)
    assert work is not None  # an ask holds the board's lock (session_event)
    call = ToolCall.objects.create(
        board=work.board,
        session=session,
        agent=agent,
        token_id=origin.token_id,
        gate_rule_id=_rule_row(work.board, rule),
        tool_name=tool[:200],
        tool_use_id=str(event.get("tool_use_id") or "")[:128],
        input_kind=kind,
        summary=summary[:SUMMARY_MAX],
        tool_input=_bounded(tool_input),
        cwd=session.cwd,
        rule=label[:400],
        wait_seconds=wait,
        fallback=rule.fallback,
        step_up=rule.step_up,
        requested_at=now,
        deadline=now + timedelta(seconds=wait),
    )
    work.record(
        EventKind.TOOL_CALL_REQUESTED,
        None,
        call=call.pk,
        tool=call.tool_name,
        summary=shown(call.summary),
        cwd=call.cwd[:200],
        rule=call.rule,
    )
    return Verdict(matching.ASK, "", held=call.pk, deadline=call.deadline)


def _over_cap(token_id: int | None) -> bool:
    """Whether the token has as many calls waiting for a person as it may: counted in the
    database (under the board's lock), so a client that hung up still counts until its
    calls are decided or end at their deadline."""
    if token_id is None:
        return False
    waiting = ToolCall.objects.filter(token_id=token_id, state=CallState.REQUESTED)
    return waiting.count() >= settings.KANBAN_WATCHES_PER_TOKEN


def _rule_row(board: Board, rule: matching.Rule) -> int | None:
    """The stored rule behind ``rule`` (None for a built-in one): a held call reads its
    step-up flag at decision time (``stepup.is_step_up``)."""
    if rule.id is None or not GateRule.objects.filter(board=board, pk=rule.id).exists():
        return None
    return rule.id


# What every call of a suspended token meets (its reason says why: ``suspended_reason``).
SUSPENDED_RULE = matching.Rule("*", decision=matching.DENY, note="Session suspended")


def suspended_reason(why: str) -> str:
    """What a suspended token's call is answered: refused, and what a person must do."""
    return (
        f"Refused: this session's token is suspended ({why}). A person must clear the "
        "session on the board (Needs you) before it may run anything; stop and tell your "
        "person."
    )


def _bounded(value: dict[str, Any]) -> dict[str, Any]:
    """The call's input as kept for the person deciding: long strings shortened."""
    return {
        str(k)[:100]: (shown(v) if isinstance(v, str) else v)
        for k, v in list(value.items())[:50]
        if isinstance(v, str | int | float | bool) or v is None
    }


def tool_call_decide(
    *,
    board: Board,
    person: str,
    call_id: int,
    approve: bool,
    note: str = "",
    from_now: str = "",
) -> ToolCall:
    """A person's decision on a held tool call; the waiting client hears it at once.

    ``from_now`` ("session" or "board"), with an approval: the same call is allowed from
    now on, in the call's session or on the whole board (``gaterules.allow_from_now``),
    in the same unit of work: both happen, or neither."""
    note = text("note", note or "", NOTE_MAX)
    if from_now and (not approve or from_now not in gaterules.SCOPES):
        raise InvalidInput("from_now: session or board, with an approval", field="from_now")
    with unit_of_work(board, person, person=True) as work:
        call = ToolCall.objects.select_for_update().filter(board=work.board, pk=call_id).first()
        if call is None:
            raise _call_not_found(f"Tool call {call_id} not found")
        if call.state != CallState.REQUESTED:
            raise Conflict(
                f"{call.agent}'s {call.tool_name} call was already decided "
                f"({call.get_state_display().lower()})",
                code="call_decided",
            )
        gone = approve and _nobody_waits(call, work)
        if gone:
            raise Conflict(
                f"{call.agent}'s {call.tool_name} call cannot be approved: {gone}, so nobody "
                "would run it. Deny it to clear it from Needs you.",
                code="client_gone",
            )
        if approve:
            stepup.step_up_check(board=work.board, person=person, call=call)
        call.state = CallState.APPROVED if approve else CallState.DENIED
        call.decided_by, call.decided_at, call.note = person, work.now, note
        call.save()
        _session_resumes(call)
        work.record(
            EventKind.TOOL_CALL_APPROVED if approve else EventKind.TOOL_CALL_DENIED,
            None,
            call=call.pk,
            agent=call.agent,
            tool=call.tool_name,
            summary=shown(call.summary),
            note=note,
            **({"from_now": from_now} if from_now else {}),
        )
        if from_now:
            gaterules.allow_from_now(work, call, from_now)
    return call


def tool_call_clear(
    *, board: Board, person: str, call_id: int, revoke: bool = False, note: str = ""
) -> ToolCall:
    """A person has looked at a call that ran without the board's verdict: its item
    leaves Needs you, and its token's suspension is lifted once none of the token's
    other such calls waits (``revoke``: the token is revoked instead, for good). The
    caller checks the person's role: approver to clear, admin to revoke."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True) as work:
        call = ToolCall.objects.select_for_update().filter(board=work.board, pk=call_id).first()
        if call is None or call.state != CallState.RAN:
            raise _call_not_found(f"No call {call_id} that ran without the board's verdict")
        if call.cleared_at is not None:
            raise Conflict(
                f"{call.agent}'s {call.tool_name} call was already cleared by {call.cleared_by}",
                code="call_cleared",
            )
        call.cleared_by, call.cleared_at = person, work.now
        if note:
            call.note = note
        call.save(update_fields=["cleared_by", "cleared_at", "note"])
        others = ToolCall.objects.filter(
            token_id=call.token_id, state=CallState.RAN, cleared_at__isnull=True
        )
        if revoke and call.token_id is not None:
            agents.token_revoke(board=work.board, token_id=call.token_id)
        elif call.token_id is not None and not others.exists():
            agents.token_unsuspend(work, token_id=call.token_id)
        work.record(
            EventKind.TOOL_CALL_CLEARED,
            None,
            call=call.pk,
            agent=call.agent,
            tool=call.tool_name,
            summary=shown(call.summary),
            note=note,
            **({"revoked": True} if revoke else {}),
        )
    return call


def _call_not_found(message: str) -> NotFound:
    return NotFound(message, code="call_not_found")


def _nobody_waits(call: ToolCall, work: Work) -> str:
    """Why ``call``'s client no longer waits for an answer (``rules.client_gone``), or ""."""
    session = call.session if call.session_id is not None else None
    return client_gone(
        session_state=session.state if session else None,
        last_event_at=session.last_event_at if session else None,
        deadline=call.deadline,
        silent_after=work.board.silent_after_seconds,
        now=work.now,
    )


def tool_call_expire(*, board: Board, call_id: int) -> ToolCall | None:
    """A held call nobody decided in time ends with its rule's fallback (None: it was
    decided meanwhile, or is not due yet)."""
    now = timezone.now()
    with unit_of_work(board, "board", person=True) as work:
        call = (
            ToolCall.objects.select_for_update()
            .filter(board=work.board, pk=call_id, state=CallState.REQUESTED, deadline__lte=now)
            .first()
        )
        if call is None:
            return None
        call.state, call.decided_at = CallState.EXPIRED, now
        call.save()
        _session_resumes(call)
        work.record(
            EventKind.TOOL_CALL_EXPIRED,
            None,
            call=call.pk,
            agent=call.agent,
            tool=call.tool_name,
            summary=shown(call.summary),
            fallback=call.fallback,
        )
    return call


def tool_calls_expire(*, grace_seconds: float = 5.0) -> int:
    """End every held call past its deadline whose client went away (the sweeper)."""
    due = timezone.now() - timedelta(seconds=grace_seconds)
    ended = 0
    for board_id, call_id in (
        ToolCall.objects.filter(state=CallState.REQUESTED, deadline__lt=due)
        .order_by()
        .values_list("board_id", "pk")[:200]
    ):
        if tool_call_expire(board=Board.objects.get(pk=board_id), call_id=call_id):
            ended += 1
    return ended


def _session_resumes(call: ToolCall) -> None:
    if call.session_id is None:
        return
    session = ClientSession.objects.select_for_update().filter(pk=call.session_id).first()
    if session is None:
        return
    outcome = {
        CallState.APPROVED: "running",
        CallState.DENIED: "denied",
        CallState.EXPIRED: "approved" if call.fallback == matching.ALLOW else "denied",
    }[CallState(call.state)]
    if call.tool_use_id:
        _end_call(session, call.tool_use_id, outcome, None)
    if session.state == SessionState.WAITING:
        session.state = SessionState.WORKING
    session.save(update_fields=["calls", "state"])


def verdict_of(call: ToolCall) -> tuple[str, str]:
    """(decision, reason) that a decided or expired call answers its client with."""
    by = f" by {call.decided_by}" if call.decided_by else ""
    note = f": {call.note}" if call.note else ""
    if call.state == CallState.APPROVED:
        return matching.ALLOW, f"Approved{by} on the board{note}"
    if call.state == CallState.DENIED:
        return matching.DENY, f"Denied{by} on the board{note}. Do not retry this call as is."
    if call.state == CallState.RAN:
        return matching.DENY, suspended_reason("a call ran without the board's verdict")
    waited = f"{call.wait_seconds} s"
    if call.fallback == matching.ALLOW:
        return (
            matching.ALLOW,
            f"No person answered on the board within {waited}; the rule allows it.",
        )
    return (
        matching.DENY,
        f"No person answered on the board within {waited}, so the call was not run "
        f"(rule “{call.rule}”). Ask a person on the board, or find another way.",
    )


# -- the rules ---------------------------------------------------------------------------------

"""Coding clients' sessions seen through their hooks, and their gated tool calls (SPEC §11).

``session_event`` takes one hook event of a session (Claude Code's hook input)
and keeps the session's row: its state, what it is doing now, its last few tool
calls. Routine activity (a tool call starting or ending) writes that one row,
records no event and pushes nothing at once: the board's roster is re-rendered
at most once per ``KANBAN_SESSION_PUSH_SECONDS`` (``events.publish_later``), so a
session making ten calls a second floods neither the event log nor the sockets.

A ``PreToolUse`` is matched against the board's gate rules (``boards.gates``);
an ``ask`` becomes a held ``ToolCall`` (an event, pushed), which a person
decides (``tool_call_decide``) or which ends with its rule's fallback at its
deadline (``tool_call_expire``). The door holds the client's request meanwhile.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .. import events, gates, limits
from ..errors import Conflict, InvalidInput, NotFound
from ..models import (
    Board,
    CallState,
    ClientSession,
    GateRule,
    Reason,
    SessionState,
    ToolCall,
)
from ..rules import REPEATS_NO_PROGRESS
from ..states import EventKind
from .work import Work, shown, text, unit_of_work

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


def _rules(board: Board) -> list[gates.Rule]:
    return _rules_of(list(GateRule.objects.filter(board=board).order_by("position", "id")))


def _calls_kept() -> int:
    return max(1, int(settings.KANBAN_SESSION_CALLS))


def _note_call(session: ClientSession, entry: dict[str, Any]) -> None:
    calls = [c for c in session.calls if c.get("id") != entry["id"] or not entry["id"]]
    calls.append(entry)
    session.calls = calls[-_calls_kept() :]


def _end_call(session: ClientSession, call_id: str, outcome: str, ms: Any) -> None:
    for call in reversed(session.calls):
        if call.get("id") == call_id:
            call["outcome"] = outcome
            if isinstance(ms, int | float) and 0 <= ms < 10**9:
                call["ms"] = int(ms)
            return


def session_event(*, board: Board, agent: str, event: dict[str, Any]) -> Verdict:
    """Record one hook event of a client session (validated by ``schemas.HookInput``).

    Returns the verdict on a ``PreToolUse``: the first matching gate rule's
    decision (``ask`` holds the call as a ``ToolCall``), or no decision.
    """
    name = event["hook_event_name"]
    now = timezone.now()
    rule = None
    if name == TOOL_START and event.get("tool_name"):
        rule = gates.first_match(
            _rules(board), event["tool_name"], event.get("tool_input") or {}, event.get("cwd") or ""
        )
    known = (
        ClientSession.objects.filter(board=board, session_id=event["session_id"])
        .values_list("last_call_key", "repeats")
        .first()
    )
    # Whatever takes the board's lock takes it before the session's (as a person's decision
    # does), so the two never wait on each other.
    board_lock = (
        (rule is not None and rule.decision == gates.ASK)
        or name in ("SessionStart", "SessionEnd")
        or known is None
        or _loop_turns(known, name, call_key(event))
    )
    try:
        return _locked(board, agent, event, rule, now, board_lock=board_lock)
    except _NeedsBoardLock:
        # Parallel calls of the session made the read above stale: again, on the board.
        return _locked(board, agent, event, rule, now, board_lock=True)


class _NeedsBoardLock(Exception):
    """The session's loop began or ended, which is a write on the board (an event, the
    strip re-rendered), but the event was applied without the board's lock."""


def _locked(
    board: Board,
    agent: str,
    event: dict[str, Any],
    rule: gates.Rule | None,
    now: Any,
    *,
    board_lock: bool,
) -> Verdict:
    scope = unit_of_work(board, agent) if board_lock else nullcontext(None)
    with transaction.atomic(), scope as work:
        return _apply(board, agent, event, rule, now, work)


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


def _apply(
    board: Board,
    agent: str,
    event: dict[str, Any],
    rule: gates.Rule | None,
    now: Any,
    work: Work | None,
) -> Verdict:
    name = event["hook_event_name"]
    tool = event.get("tool_name") or ""
    tool_input = event.get("tool_input") or {}
    session, created = ClientSession.objects.select_for_update().get_or_create(
        board=board,
        session_id=event["session_id"],
        defaults={"agent": agent, "started_at": now, "last_event_at": now},
    )
    if session.agent != agent:
        raise Conflict(
            f"Session {event['session_id'][:40]!r} belongs to {session.agent}",
            code="session_taken",
        )
    was = (session.state, session.doing)
    looping = session.repeats >= REPEATS_NO_PROGRESS
    if name in LOOP_RESETS:
        session.repeats, session.last_call_key = 0, ""
    session.last_event_at = now
    for field, limit in (("cwd", 1000), ("permission_mode", 32)):
        if isinstance(event.get(field), str):
            setattr(session, field, event[field][:limit])
    model = event.get("model")
    if isinstance(model, dict):
        model = model.get("display_name") or model.get("id")
    if isinstance(model, str) and model:
        session.model = model[:100]
    if name == "SessionEnd":
        session.state, session.doing, session.ended_at = SessionState.ENDED, "", now
    elif name in ("Stop", "SessionStart"):
        session.state, session.doing, session.ended_at = SessionState.IDLE, "", None
    elif name == "Notification":
        session.state = SessionState.WAITING
        session.doing = shown(str(event.get("message") or "Waiting for you"))[:300]
    elif name == "UserPromptSubmit":
        session.state = SessionState.WORKING
        session.doing = "Working on: " + " ".join(str(event.get("prompt", "")).split())[:200]
    elif name == "SubagentStart":
        session.subagents += 1
    elif name == "SubagentStop":
        session.subagents = max(0, session.subagents - 1)
    elif name == TOOL_START and tool:
        key = call_key(event)
        session.repeats = session.repeats + 1 if key == session.last_call_key else 1
        session.last_call_key = key
        doing = gates.describe_call(tool, tool_input)
        session.state, session.doing = SessionState.WORKING, doing[:300]
        outcome = "running"
        if rule is not None and rule.decision == gates.DENY:
            outcome = "denied"
        elif rule is not None and rule.decision == gates.ASK:
            outcome, session.state = "waiting", SessionState.WAITING
        _note_call(
            session,
            {
                "id": str(event.get("tool_use_id") or "")[:128],
                "tool": tool[:200],
                "doing": doing[:300],
                "outcome": outcome,
                "at": now.isoformat(),
            },
        )
    elif name in TOOL_ENDS:
        session.state = SessionState.WORKING
        _end_call(
            session, str(event.get("tool_use_id") or ""), TOOL_ENDS[name], event.get("duration_ms")
        )
    if (session.repeats >= REPEATS_NO_PROGRESS) != looping:
        if work is None:
            raise _NeedsBoardLock
        _record_loop(work, session, ended=looping)
    session.save()
    verdict = Verdict()
    if rule is not None:
        verdict = _verdict(agent, session, rule, event, now, work)
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
    elif (session.state, session.doing) != was or created:
        events.publish_later(board.pk, agent)
    return verdict


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
    rule: gates.Rule,
    event: dict[str, Any],
    now: Any,
    work: Work | None,
) -> Verdict:
    label = rule.label()
    if rule.decision == gates.ALLOW:
        return Verdict(gates.ALLOW, f"Allowed by the board's rule “{label}”.")
    if rule.decision == gates.DENY:
        return Verdict(
            gates.DENY,
            f"Blocked by the board's rule “{label}”: do not run this; find another way "
            "or ask a person on the board.",
        )
    tool, tool_input = event["tool_name"], event.get("tool_input") or {}
    kind, summary = gates.main_input(tool, tool_input)
    wait = max(gates.WAIT_MIN, min(gates.WAIT_MAX, rule.wait_seconds))
    assert work is not None  # an ask holds the board's lock (session_event)
    call = ToolCall.objects.create(
        board=work.board,
        session=session,
        agent=agent,
        tool_name=tool[:200],
        tool_use_id=str(event.get("tool_use_id") or "")[:128],
        input_kind=kind,
        summary=summary[:SUMMARY_MAX],
        tool_input=_bounded(tool_input),
        cwd=session.cwd,
        rule=label[:400],
        wait_seconds=wait,
        fallback=rule.fallback,
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
    return Verdict(gates.ASK, "", held=call.pk, deadline=call.deadline)


def _bounded(value: dict[str, Any]) -> dict[str, Any]:
    """The call's input as kept for the person deciding: long strings shortened."""
    return {
        str(k)[:100]: (shown(v) if isinstance(v, str) else v)
        for k, v in list(value.items())[:50]
        if isinstance(v, str | int | float | bool) or v is None
    }


def tool_call_decide(
    *, board: Board, person: str, call_id: int, approve: bool, note: str = ""
) -> ToolCall:
    """A person's decision on a held tool call; the waiting client hears it at once."""
    note = text("note", note or "", NOTE_MAX)
    with unit_of_work(board, person, person=True) as work:
        call = ToolCall.objects.select_for_update().filter(board=work.board, pk=call_id).first()
        if call is None:
            raise NotFound(f"Tool call {call_id} not found", code="call_not_found")
        if call.state != CallState.REQUESTED:
            raise Conflict(
                f"{call.agent}'s {call.tool_name} call was already decided "
                f"({call.get_state_display().lower()})",
                code="call_decided",
            )
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
        )
    return call


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
        CallState.EXPIRED: "approved" if call.fallback == gates.ALLOW else "denied",
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
        return gates.ALLOW, f"Approved{by} on the board{note}"
    if call.state == CallState.DENIED:
        return gates.DENY, f"Denied{by} on the board{note}. Do not retry this call as is."
    waited = f"{call.wait_seconds} s"
    if call.fallback == gates.ALLOW:
        return gates.ALLOW, f"No person answered on the board within {waited}; the rule allows it."
    return (
        gates.DENY,
        f"No person answered on the board within {waited}, so the call was not run "
        f"(rule “{call.rule}”). Ask a person on the board, or find another way.",
    )


# -- the rules ---------------------------------------------------------------------------------


def _rule_fields(
    tool: str, pattern: str, decision: str, wait_seconds: Any, fallback: str, note: str
) -> dict[str, Any]:
    problems = []
    tool = (tool or "").strip()
    if (p := gates.tool_glob_problem(tool)) is not None:
        problems.append({"field": "tool", "message": p})
    if (p := gates.pattern_problem(pattern or "")) is not None:
        problems.append({"field": "pattern", "message": p})
    if decision not in gates.DECISIONS:
        problems.append({"field": "decision", "message": "ask, deny or allow"})
    if fallback not in gates.FALLBACKS:
        problems.append({"field": "fallback", "message": "deny or allow"})
    if (
        isinstance(wait_seconds, bool)
        or not isinstance(wait_seconds, int)
        or not gates.WAIT_MIN <= wait_seconds <= gates.WAIT_MAX
    ):
        problems.append(
            {"field": "waitSeconds", "message": f"{gates.WAIT_MIN} to {gates.WAIT_MAX} seconds"}
        )
    if not isinstance(note, str) or len(note) > gates.NOTE_MAX or "\x00" in note:
        problems.append({"field": "note", "message": f"at most {gates.NOTE_MAX} characters"})
    if problems:
        summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        raise InvalidInput(f"Gate rule: {summary}", details=problems)
    return {
        "tool": tool,
        "pattern": pattern or "",
        "decision": decision,
        "wait_seconds": wait_seconds,
        "fallback": fallback,
        "note": note.strip(),
    }


def gate_rule_add(
    *,
    board: Board,
    actor: str,
    tool: str,
    pattern: str = "",
    outside_cwd: bool = False,
    decision: str = gates.ASK,
    wait_seconds: int = gates.WAIT_DEFAULT,
    fallback: str = gates.DENY,
    note: str = "",
) -> GateRule:
    """Add a gate rule after the board's others (the first rule that matches decides)."""
    fields = _rule_fields(tool, pattern, decision, wait_seconds, fallback, note)
    with unit_of_work(board, actor, person=True) as work:
        last = GateRule.objects.filter(board=work.board).order_by("-position").first()
        rule = GateRule.objects.create(
            board=work.board,
            position=(last.position + 1) if last else 0,
            outside_cwd=bool(outside_cwd),
            **fields,
        )
        work.record(EventKind.GATE_RULE, None, action="added", rule=gates.Rule(**fields).label())
    return rule


def gate_rule_remove(*, board: Board, actor: str, rule_id: int) -> None:
    with unit_of_work(board, actor, person=True) as work:
        rule = GateRule.objects.filter(board=work.board, pk=rule_id).first()
        if rule is None:
            raise NotFound(f"Gate rule {rule_id} not found", code="rule_not_found")
        label = _rules_of([rule])[0].label()
        rule.delete()
        work.record(EventKind.GATE_RULE, None, action="removed", rule=label)


def _rules_of(rows: list[GateRule]) -> list[gates.Rule]:
    return [
        gates.Rule(
            r.tool, r.pattern, r.outside_cwd, r.decision, r.wait_seconds, r.fallback, r.note, r.pk
        )
        for r in rows
    ]


def gate_rules_default(*, board: Board) -> None:
    """Give a new board the default rules (``gates.DEFAULT_RULES``)."""
    GateRule.objects.bulk_create(
        GateRule(
            board=board,
            position=n,
            tool=r.tool,
            pattern=r.pattern,
            outside_cwd=r.outside_cwd,
            decision=r.decision,
            wait_seconds=r.wait_seconds,
            fallback=r.fallback,
            note=r.note,
        )
        for n, r in enumerate(gates.DEFAULT_RULES)
    )

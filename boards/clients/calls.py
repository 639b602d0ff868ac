"""A session's tool calls: the last few its row keeps, and those held for a person (SPEC §11).

A session's row keeps its last calls (``ClientSession.calls``: what each was, how it
ended), which the roster shows and a call's end is matched against. A ``PreToolUse``
is decided by the board's gate rules (``boards.gates.matching``): ``call_verdict``
answers it, and an ``ask`` becomes a held ``ToolCall`` (an event, pushed), which a
person decides (``tool_call_decide``) or which ends with its rule's fallback at its
deadline (``tool_call_expire``). The door holds the client's request meanwhile and
answers what the call ended with (``verdict_of``).

A call's end that reports a call the board had not allowed (denied, still held, or
never asked in a session whose calls reach the gate) means its hook was stopped
(``ran_ungated``): the call is recorded as run (``CallState.RAN``), waits for a person
(``Reason.TAMPERING``) and suspends its token until they clear it (``tool_call_clear``).

The session's own record and its hook events are ``boards.clients.sessions``, which
calls these inside its unit of work.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from boards.core import limits
from boards.core.errors import Conflict, InvalidInput, NotFound
from boards.core.rules import client_gone
from boards.core.services import agents, stepup
from boards.core.services.work import Work, shown, text, unit_of_work
from boards.core.states import EventKind
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import Board, CallState, ClientSession, GateRule, SessionState, ToolCall

SUMMARY_MAX = 2_000
NOTE_MAX = limits.NOTE_MAX


@dataclass
class Verdict:
    """What the board answers a hook: nothing, or a decision on a tool call; ``held`` is
    a ToolCall waiting for a person (the door waits for its decision)."""

    decision: str | None = None
    reason: str = ""
    held: int | None = None
    deadline: Any = None


# -- the calls a session's row keeps ---------------------------------------------------

# Clients that send no call id (Gemini CLI, Copilot CLI): a call is named by the board
# and its end is matched by the call's name and input (a digest, this many characters).
KEY_KEPT = 16
OPEN = frozenset({"running", "waiting", "approved"})
# Open calls no person holds: the client may still refuse them itself.
OPEN_UNHELD = frozenset({"running", "approved"})
# Open calls a session keeps past its last few (``note_call``).
OPEN_KEPT = 100
# A call its client ran though the board had not allowed it (``ran_ungated``).
RAN_UNGATED = "ran_ungated"


def _calls_kept() -> int:
    return max(1, int(settings.KANBAN_SESSION_CALLS))


def note_call(session: ClientSession, entry: dict[str, Any]) -> None:
    """Keep ``entry`` among the session's last calls. Ended calls make room first: an
    open call's end must find it (an end the board cannot place reads as a call it never
    saw asked, ``ran_ungated``), so it is dropped only beyond ``OPEN_KEPT`` open ones."""
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


def close_calls(session: ClientSession) -> None:
    """The turn or the session is over: a call still open and held by no person was
    refused by the client (a skill's shell line, let through, ran)."""
    for call in session.calls:
        if call.get("outcome") in OPEN_UNHELD:
            call["outcome"] = "ok" if call.get("skill") is not None else "refused"


def entry_id(event: dict[str, Any], key: str) -> str:
    """A call's id in the session's row: the client's, or one the board makes up."""
    given = str(event.get("tool_use_id") or "")[:128]
    return given or f"board-{key[:8]}-{uuid.uuid4().hex[:8]}"


def ended_entry(session: ClientSession, given: str, key: str) -> dict[str, Any] | None:
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


def end_call(
    session: ClientSession, call_id: str, outcome: str, ms: Any, *, only_open: bool = False
) -> None:
    """The session's call ``call_id`` ended with ``outcome`` (``only_open``: only if
    it had not ended yet; a skill's shell line let through ran, ``ok``)."""
    for call in reversed(session.calls):
        if call.get("id") == call_id:
            if only_open and call.get("outcome") not in OPEN_UNHELD:
                return
            call["outcome"] = "ok" if only_open and call.get("skill") is not None else outcome
            if isinstance(ms, int | float) and 0 <= ms < 10**9:
                call["ms"] = int(ms)
            return


# -- a call's end: ran without the board's verdict? --------------------------------------


def held_row(session: ClientSession, entry: dict[str, Any] | None) -> ToolCall | None:
    """The held call row of a session's call, locked, if a rule held it for a person."""
    if entry is None or entry.get("outcome") not in ("waiting", "denied") or not entry.get("id"):
        return None
    rows = ToolCall.objects.select_for_update().filter(
        session=session, tool_use_id=str(entry["id"])[:128]
    )
    return rows.order_by("-pk").first()


def ran_ungated(
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


def record_ran(
    work: Work,
    session: ClientSession,
    entry: dict[str, Any] | None,
    held: ToolCall | None,
    event: dict[str, Any],
    why: str,
    token_id: int | None,
) -> ToolCall:
    """A call ran without the board's verdict: its record says so (the held row, or a
    new one), it waits for a person (``Reason.TAMPERING``), and the token is suspended
    until a person clears it (``tool_call_clear``)."""
    tool, tool_input = event["tool_name"], event.get("tool_input") or {}
    if entry is None:
        key = call_key(event)
        entry = {
            "id": entry_id(event, key),
            "tool": tool[:200],
            "doing": matching.describe_call(tool, tool_input)[:300],
            "at": work.now.isoformat(),
        }
        if not event.get("tool_use_id"):
            entry["key"] = key[:KEY_KEPT]
        note_call(session, entry)
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
    call.token_id = call.token_id or token_id
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


# -- a call asked: the board's verdict, or held for a person ------------------------------


def first_match(board: Board, event: dict[str, Any]) -> matching.Rule | None:
    """The rule that decides a call, read by Claude Code's tool name and the client's own."""
    return matching.first_match(
        gaterules.rules_of_board(board, str(event.get("session_id") or "")),
        event["tool_name"],
        event.get("tool_input") or {},
        event.get("cwd") or "",
        client_tool=event.get("client_tool") or event["tool_name"],
    )


def call_key(event: dict[str, Any]) -> str:
    """A tool call's identity for noticing a loop: its name and input (no ids or times)."""
    tool = event.get("tool_name") or ""
    body = json.dumps([tool, event.get("tool_input") or {}], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


# What every call of a suspended token meets (its reason says why: ``suspended_reason``).
SUSPENDED_RULE = matching.Rule("*", decision=matching.DENY, note="Session suspended")


def suspended_reason(why: str) -> str:
    """What a suspended token's call is answered: refused, and what a person must do."""
    return (
        f"Refused: this session's token is suspended ({why}). A person must clear the "
        "session on the board (Needs you) before it may run anything; stop and tell your "
        "person."
    )


def call_verdict(
    agent: str,
    session: ClientSession,
    rule: matching.Rule,
    event: dict[str, Any],
    now: Any,
    work: Work | None,
    *,
    token_id: int | None,
    longest_hold: int | None,
    suspended: str,
) -> Verdict:
    """The board's answer to a ``PreToolUse`` that ``rule`` decides: every call of a
    ``suspended`` token is denied; an ``ask`` past ``KANBAN_WATCHES_PER_TOKEN`` of
    ``token_id``'s calls waiting for a person is denied, and nothing is recorded for a
    person; otherwise an ``ask`` is held as a ``ToolCall`` (an event), for at most
    ``longest_hold`` seconds when the client gives up on a hook sooner than the rule waits."""
    label = rule.label()
    if suspended:
        return Verdict(matching.DENY, suspended_reason(suspended))
    if rule.decision == matching.ALLOW:
        return Verdict(matching.ALLOW, f"Allowed by the board's rule “{label}”.")
    if rule.decision == matching.DENY:
        return Verdict(
            matching.DENY,
            f"Blocked by the board's rule “{label}”: do not run this; find another way "
            "or ask a person on the board.",
        )
    if _over_cap(token_id):
        return Verdict(
            matching.DENY,
            "Too many of this token's calls are waiting for a person: this one was not "
            "asked; wait for the others to be decided, then try again.",
        )
    tool, tool_input = event["tool_name"], event.get("tool_input") or {}
    kind, summary = matching.main_input(tool, tool_input)
    wait = max(matching.WAIT_MIN, min(matching.WAIT_MAX, rule.wait_seconds))
    if longest_hold is not None:
        wait = min(wait, longest_hold)
    assert work is not None  # an ask holds the board's lock (session_event)
    call = ToolCall.objects.create(
        board=work.board,
        session=session,
        agent=agent,
        token_id=token_id,
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


def _bounded(value: dict[str, Any]) -> dict[str, Any]:
    """The call's input as kept for the person deciding: long strings shortened."""
    return {
        str(k)[:100]: (shown(v) if isinstance(v, str) else v)
        for k, v in list(value.items())[:50]
        if isinstance(v, str | int | float | bool) or v is None
    }


# -- a held call decided, cleared or ended ------------------------------------------------


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
        end_call(session, call.tool_use_id, outcome, None)
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

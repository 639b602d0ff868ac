"""A board's gate rules (SPEC §11, §13): which of its agents' tool calls need a person.

The rules are matched by ``boards.gates.matching`` (pure functions over normalised actions);
here they are added, removed and given to new boards, each change one unit of work (the
core's ``unit_of_work``: the gate sits above the core and writes through it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import Q

from boards.core import limits
from boards.core.errors import Conflict, InvalidInput, NotFound
from boards.core.services import stepup
from boards.core.services.work import Work, unit_of_work
from boards.core.states import EventKind
from boards.gates import matching
from boards.models import Board, GateRule, ToolCall


def rules_of_board(board: Board, session_id: str = "") -> list[matching.Rule]:
    """The board's rules in the order they are matched, for a call of ``session_id``: the
    board's own, and the standing approvals of that session (none of other sessions)."""
    scope = Q(session_id="") | Q(session_id=session_id) if session_id else Q(session_id="")
    return _rules_of(list(GateRule.objects.filter(scope, board=board).order_by("position", "id")))


def _rule_fields(
    tool: str, pattern: str, decision: str, wait_seconds: Any, fallback: str, note: str
) -> dict[str, Any]:
    problems = []
    tool = (tool or "").strip()
    if (p := matching.tool_glob_problem(tool)) is not None:
        problems.append({"field": "tool", "message": p})
    if (p := matching.pattern_problem(pattern or "")) is not None:
        problems.append({"field": "pattern", "message": p})
    if decision not in matching.DECISIONS:
        problems.append({"field": "decision", "message": "ask, deny or allow"})
    if fallback not in matching.FALLBACKS:
        problems.append({"field": "fallback", "message": "deny or allow"})
    if (
        isinstance(wait_seconds, bool)
        or not isinstance(wait_seconds, int)
        or not matching.WAIT_MIN <= wait_seconds <= matching.WAIT_MAX
    ):
        problems.append(
            {
                "field": "waitSeconds",
                "message": f"{matching.WAIT_MIN} to {matching.WAIT_MAX} seconds",
            }
        )
    if not isinstance(note, str) or len(note) > matching.NOTE_MAX or "\x00" in note:
        problems.append({"field": "note", "message": f"at most {matching.NOTE_MAX} characters"})
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


def _ordered(board: Board) -> list[GateRule]:
    return list(GateRule.objects.filter(board=board).order_by("position", "id"))


def _place(rows: list[GateRule]) -> None:
    """Number the rows' positions 0, 1, … in list order (what people read is one more)."""
    moved = []
    for n, row in enumerate(rows):
        if row.position != n:
            row.position = n
            moved.append(row)
    GateRule.objects.bulk_update(moved, ["position"])


def _number(name: str, value: Any, highest: int) -> int:
    """A rule's number as people read it (1-based), checked against the board's rules."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= highest:
        raise InvalidInput(f"{name}: a rule's number, 1 to {highest}", field=name)
    return value


def rule_numbered(board: Board, number: Any) -> GateRule:
    """The board's rule with this number (its place in the order, from 1)."""
    rows = _ordered(board)
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(rows):
        raise NotFound(
            f"No gate rule number {number}: the board has {len(rows)}", code="rule_number"
        )
    return rows[number - 1]


def _row(rows: list[GateRule], rule_id: int) -> GateRule:
    row = next((r for r in rows if r.pk == rule_id), None)
    if row is None:
        raise NotFound("That gate rule is not on the board (any more)", code="rule_not_found")
    return row


def _label(row: GateRule) -> str:
    return _rules_of([row])[0].label()


def gate_rule_add(
    *,
    board: Board,
    actor: str,
    tool: str,
    pattern: str = "",
    outside_cwd: bool = False,
    decision: str = matching.ASK,
    wait_seconds: int = matching.WAIT_DEFAULT,
    fallback: str = matching.DENY,
    note: str = "",
    step_up: bool = False,
    before: int | None = None,
) -> GateRule:
    """Add a gate rule after the board's others, or before its rule number ``before``
    (the first rule that matches decides: an exception goes before the rule it narrows);
    ``step_up``: approving what it holds needs a passkey (SPEC §14)."""
    fields = _rule_fields(tool, pattern, decision, wait_seconds, fallback, note)
    with unit_of_work(board, actor, person=True) as work:
        rule = _insert(
            work, {**fields, "outside_cwd": bool(outside_cwd), "step_up": bool(step_up)}, before
        )
        work.record(
            EventKind.GATE_RULE, None, action="added", rule=_label(rule), at=rule.position + 1
        )
    return rule


def _insert(work: Work, fields: dict[str, Any], before: int | None) -> GateRule:
    """A new rule, last or before rule number ``before``, within the board's limit."""
    rows = _ordered(work.board)
    # Every rule is matched against every tool call of the board's agents.
    if len(rows) >= limits.GATE_RULES_MAX:
        raise Conflict(
            f"The board has {limits.GATE_RULES_MAX} gate rules, the most it may have: "
            "remove one first",
            code="gate_rules_limit",
        )
    at = len(rows) if before is None else _number("before", before, len(rows) + 1) - 1
    rule = GateRule(board=work.board, position=at, **fields)
    rows.insert(at, rule)
    rule.save()
    _place(rows)
    return rule


# How far a standing approval reaches (``allow_from_now``).
SCOPES = ("session", "board")
# Characters with a meaning in a pattern: a call's own text is matched as it is.
_SPECIAL = frozenset(".^$*+?{}[]\\|()")


def _literal(text: str) -> str:
    return "".join("\\" + ch if ch in _SPECIAL else ch for ch in text)


def allow_from_now(work: Work, call: ToolCall, scope: str) -> GateRule:
    """A standing approval of a held call, inside the unit of work that approves it: an
    allow rule for exactly this call (its tool, its whole command, path or URL), first
    among the board's rules, for the call's session or for the whole board.

    Refused (Conflict) when no rule could let the call by: one the gate cannot read whole,
    that changes the supervision's own files or could stop its hooks (asked about
    whatever the rules say), or
    one too long to spell as a rule, or one a step-up rule holds (it needs a passkey each
    time: a standing approval would walk around it, SPEC §14)."""
    # Read from the text kept whole (the input kept for people drops lists: Codex's argv).
    action = matching.read_action(
        call.tool_name, matching.input_for(call.tool_name, call.summary), call.cwd
    )
    pattern = f"^{_literal(call.summary)}$"
    why = ""
    if action.supervision:
        why = "it changes the supervision's own files, which are always asked about"
    elif action.tampering:
        why = "it could stop the supervision's hooks, which is always asked about"
    elif action.unsure:
        why = "the gate cannot read all of what it runs, so it always asks"
    elif stepup.is_step_up(work.board, call=call):  # the rule's flag as it is now
        why = "a step-up rule holds it, and each approval needs a passkey"
    elif (
        len(call.summary) >= matching.PATTERN_MAX
        or matching.pattern_problem(pattern) is not None
        or matching.tool_glob_problem(call.tool_name) is not None
    ):
        why = "it is too long to spell as a rule; write one for calls like it on the rules page"
    if why:
        raise Conflict(
            f"No rule can allow this call from now on: {why}. Approve it alone.",
            code="not_allowable",
        )
    session_id = ""
    if scope == "session":
        if call.session is None:
            raise Conflict(
                "The call's session is gone: allow it for the board, or approve it alone",
                code="session_gone",
            )
        session_id = call.session.session_id
    where = f"{call.agent}'s session" if session_id else "the board"
    note = f"Allowed from now on in {where} by {work.actor}"
    fields = {
        "tool": call.tool_name,
        "pattern": pattern,
        "decision": matching.ALLOW,
        "note": note[: matching.NOTE_MAX],
        "session_id": session_id,
    }
    rule = _insert(work, fields, 1)
    work.record(
        EventKind.GATE_RULE,
        None,
        action="added",
        rule=_label(rule),
        at=1,
        scope=scope,
        call=call.pk,
        **({"session": session_id} if session_id else {}),
    )
    return rule


def gate_rule_move(*, board: Board, actor: str, rule_id: int, to: int) -> GateRule:
    """Move a rule to number ``to`` (1-based); the rules between shift by one."""
    with unit_of_work(board, actor, person=True) as work:
        rows = _ordered(work.board)
        rule = _row(rows, rule_id)
        to = _number("to", to, len(rows))
        was = rows.index(rule) + 1
        if was != to:
            rows.remove(rule)
            rows.insert(to - 1, rule)
            _place(rows)
            work.record(
                EventKind.GATE_RULE,
                None,
                action="moved",
                rule=_label(rule),
                **{"from": was, "to": to},
            )
    return rule


# What ``gate_rule_change`` may change, by the name the event records.
CHANGEABLE = (
    "tool",
    "pattern",
    "outside_cwd",
    "decision",
    "wait_seconds",
    "fallback",
    "note",
    "step_up",
)


def gate_rule_change(*, board: Board, actor: str, rule_id: int, **changes: Any) -> GateRule:
    """Change a rule in place (any of ``CHANGEABLE``; the rest stays), checked as a new
    rule is; its number stays. ``step_up`` holds from then on, for the calls it already
    holds too (approving one reads the rule as it is: ``stepup.is_step_up``)."""
    unknown = sorted(set(changes) - set(CHANGEABLE))
    if unknown:
        raise InvalidInput(f"{unknown[0]}: not a gate rule's field", field=unknown[0])
    with unit_of_work(board, actor, person=True) as work:
        rule = _row(_ordered(work.board), rule_id)
        merged = {name: getattr(rule, name) for name in CHANGEABLE}
        merged.update({k: v for k, v in changes.items() if v is not None})
        flags = {name: bool(merged.pop(name)) for name in ("outside_cwd", "step_up")}
        fields = {**_rule_fields(**merged), **flags}
        diff = {
            name: {"from": getattr(rule, name), "to": value}
            for name, value in fields.items()
            if getattr(rule, name) != value
        }
        if diff:
            for name, value in fields.items():
                setattr(rule, name, value)
            rule.save(update_fields=list(fields))
            work.record(
                EventKind.GATE_RULE, None, action="changed", rule=_label(rule), changes=diff
            )
    return rule


def gate_rule_remove(*, board: Board, actor: str, rule_id: int) -> None:
    with unit_of_work(board, actor, person=True) as work:
        rows = _ordered(work.board)
        rule = _row(rows, rule_id)
        label = _label(rule)
        rows.remove(rule)
        rule.delete()
        _place(rows)
        work.record(EventKind.GATE_RULE, None, action="removed", rule=label)


# What a person tests a rule with (a command is matched on its first ``INPUT_MATCH_MAX``
# characters; more is asked about, which the test shows too).
TEST_TEXT_MAX = 2 * matching.INPUT_MATCH_MAX
CWD_MAX = 1000
# The folder a test runs in when the person names none (paths are read against it).
TEST_CWD = "/home/you/project"


def gate_rule_test(*, board: Board, tool: str, text: str, cwd: str = "") -> matching.Explanation:
    """Which of the board's rules would decide a call of ``tool`` doing ``text`` (a
    command, path or URL) in ``cwd``, in no particular session (one session's standing
    approvals do not apply): nothing is saved or recorded."""
    problems = []
    tool = (tool or "").strip() if isinstance(tool, str) else tool
    if (
        not isinstance(tool, str)
        or not tool
        or matching.tool_glob_problem(tool) is not None
        or any(ch in tool for ch in "|*?")
    ):
        problems.append({"field": "tool", "message": "one tool's name (Bash, Write, mcp__x__y)"})
    if not isinstance(text, str) or len(text) > TEST_TEXT_MAX or "\x00" in text:
        problems.append({"field": "text", "message": f"at most {TEST_TEXT_MAX} characters"})
    if not isinstance(cwd, str) or len(cwd) > CWD_MAX or "\x00" in cwd:
        problems.append({"field": "cwd", "message": f"at most {CWD_MAX} characters"})
    elif cwd.strip() and not cwd.strip().startswith("/"):
        problems.append({"field": "cwd", "message": "an absolute folder (/home/you/project)"})
    if problems:
        summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        raise InvalidInput(f"Gate rule test: {summary}", details=problems)
    found = matching.explain(
        rules_of_board(board), tool, matching.input_for(tool, text), cwd.strip()
    )
    if found.number is None or found.rule is None or found.rule.id is None:
        return found
    # Numbered as people read them: among all the board's rules, one session's included.
    number = [row.pk for row in _ordered(board)].index(found.rule.id) + 1
    return dataclasses.replace(found, number=number)


def _rules_of(rows: list[GateRule]) -> list[matching.Rule]:
    return [
        matching.Rule(
            r.tool,
            r.pattern,
            r.outside_cwd,
            r.decision,
            r.wait_seconds,
            r.fallback,
            r.note,
            r.pk,
            r.step_up,
        )
        for r in rows
    ]


def gate_rules_default(board: Board) -> None:
    """Give a new board the default rules (``matching.DEFAULT_RULES``): installed as
    the core's board defaults (``services.install_board_defaults``) by ``boards.apps``."""
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
            step_up=r.step_up,
        )
        for n, r in enumerate(matching.DEFAULT_RULES)
    )

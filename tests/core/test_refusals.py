"""One sentence per refusal code (issue #28): a code in ``errors.REFUSALS`` is refused
only through ``errors.refuse``, with the facts its sentence names; any other code is
written at one raise site, so an agent never reads two wordings of one rule.

The source is read, not run: a raise site added anywhere in ``boards`` is checked.
"""

from __future__ import annotations

import ast
import inspect
import string
from collections import defaultdict
from pathlib import Path

import pytest

from boards.core import errors
from boards.core.errors import CONFLICT_DETAILS, REFUSALS, Conflict, ServiceError, refuse

BOARDS = Path(errors.__file__).parent.parent
# Every refusal class a raise site can name.
REFUSAL_CLASSES = {
    name
    for name, value in vars(errors).items()
    if inspect.isclass(value) and issubclass(value, ServiceError)
}
# Codes still written at a site of their own although REFUSALS has them: the lead's file.
NOT_YET_SWITCHED: set[tuple[str, str]] = set()
# Codes refused from more than one site, each in a situation of its own (a different
# subject, or a different remedy), not yet given one sentence. This list may only shrink.
SEVERAL_SENTENCES = {
    "cycle",  # dependencies (blockedBy) and parents (parentId)
    "identity_taken",  # auth.py: a bound token's name, a person's name, another token's
    "invalid_json",  # api.py: nested too deep, or not JSON at all
    "invite_not_found",  # an admin's invite id, or a person's invite link
    "invite_used",  # an admin revoking it (409), a person following it (410)
    "lease_lost",  # reassigned to another (leave it), or lapsed (claim it again)
    "wip_limit",  # the agent's limit, or the board's
}


def _sites() -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str, tuple[str, ...]]]]:
    """(file, line, code) of every error built with a literal ``code=``, and (file, line,
    code, fact names) of every ``refuse(code, ...)``."""
    written, refused = [], []
    for path in sorted(BOARDS.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        name = str(path.relative_to(BOARDS))
        for node in ast.walk(ast.parse(path.read_text(), filename=name)):
            if not isinstance(node, ast.Call):
                continue
            callee = getattr(node.func, "id", getattr(node.func, "attr", None))
            if callee == "refuse" and node.args and isinstance(node.args[0], ast.Constant):
                facts = tuple(sorted(k.arg for k in node.keywords if k.arg))
                refused.append((name, node.lineno, node.args[0].value, facts))
            elif callee in REFUSAL_CLASSES:
                for keyword in node.keywords:
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                        written.append((name, node.lineno, keyword.value.value))
    return written, refused


WRITTEN, REFUSED = _sites()


def test_the_source_walk_finds_the_raise_sites():
    assert len(WRITTEN) > 40 and len(REFUSED) > 15
    assert {code for _, _, code, _ in REFUSED} == set(REFUSALS)  # none unused


def test_a_code_with_a_sentence_is_never_written_at_a_raise_site():
    own = [(f, line, code) for f, line, code in WRITTEN if code in REFUSALS]
    assert {(f, code) for f, _, code in own} == NOT_YET_SWITCHED, own


def test_every_other_code_is_written_at_one_site():
    sites = defaultdict(list)
    for f, line, code in WRITTEN:
        if code not in REFUSALS:
            sites[code].append(f"{f}:{line}")
    several = {code for code, where in sites.items() if len(where) > 1}
    assert several == SEVERAL_SENTENCES, {code: sites[code] for code in several}


@pytest.mark.parametrize(
    ("where", "line", "code", "facts"), REFUSED, ids=[f"{w}:{n}" for w, n, _, _ in REFUSED]
)
def test_each_refusal_site_gives_the_facts_its_sentence_names(where, line, code, facts):
    _, template = REFUSALS[code]
    named = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    assert named <= set(facts), f"{where}:{line} leaves out {named - set(facts)}"


# Each code's sentence as an agent reads it, and its details.
EXAMPLES = {
    "task_not_found": ({"number": 9}, "Task #9 not found", None),
    "board_not_found": ({"slug": "ops"}, "Board 'ops' not found", None),
    "terminal": ({"number": 3, "status": "completed"}, "Task #3 is completed", None),
    "owned": ({"number": 3, "owner": "bob"}, "Task #3 is owned by bob", None),
    "blocked": (
        {"number": 3, "blockedBy": ["1", "2"]},
        "Task #3 is blocked by #1, #2",
        {"blockedBy": ["1", "2"]},
    ),
    "awaiting_approval": (
        {"number": 3, "requestedBy": "alice"},
        "Task #3 awaits approval requested by alice",
        {"requestedBy": "alice"},
    ),
    "approval_required": (
        {"number": 3, "blocker": "1", "approval": "none"},
        "Task #3 waits for a person to approve #1: agents ask for it with TaskClaim, and only "
        "a person with the approver role decides",
        {"blocker": "1", "approval": "none"},
    ),
    "approval_denied": (
        {"number": 3, "decidedBy": "pat", "note": ": too risky"},
        "Task #3 was denied by pat: too risky; only a person can reopen it",
        {"decidedBy": "pat"},
    ),
    "not_awaiting_approval": ({"number": 3}, "Task #3 is not awaiting approval", None),
    "chain_changed": (
        {"number": 3, "shown": 4, "count": 5},
        "What waits on #3 changed since it was shown (4 to cancel then, 5 now): nothing was "
        "cancelled; look at it again before cancelling",
        None,
    ),
    "held_by_another": (
        {"number": 3, "owner": "bob"},
        "Task #3 is in progress under bob, whose lease is live; only bob, a person or an "
        "orchestrator's token can change its status or delete it",
        {"owner": "bob"},
    ),
    "stale_version": (
        {"number": 3, "version": 5, "seen": 4},
        "Task #3 is at version 5, not 4: it changed since it was read; read it again and retry",
        {"version": 5},
    ),
}


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_each_code_reads_as_one_sentence_with_typed_details(code):
    facts, message, details = EXAMPLES[code]
    kind, template = REFUSALS[code]
    assert ". " not in template and not template.endswith(".")
    refusal = refuse(code, **facts)
    assert (type(refusal), refusal.code, refusal.message) == (kind, code, message)
    assert refusal.details == details
    assert (kind is Conflict) == (refusal.status == 409)
    if details is not None:
        assert CONFLICT_DETAILS[code].model_validate(details)

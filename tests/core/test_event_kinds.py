"""Event kinds are one vocabulary (``states.EventKind``, issue #28): every place that records
an event names its kind there, the column's choices are that vocabulary, and the wire
values stay the plain strings agents, webhooks and the feed already read."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import boards
from boards.core.activity import describe
from boards.core.states import EventKind
from boards.models import Event

BOARDS = Path(boards.__file__).parent
# The lead's file, not yet switched (issue #28): its kinds are written as strings.
NOT_YET_SWITCHED: set[str] = set()
# Where services record events: the core's write path and the parts' own services.
WRITE_PATHS = ("core/services/", "needs/", "clients/", "webhooks/")


def _kind_arguments() -> list[tuple[str, int, ast.expr]]:
    """(file, line, the kind expression) of every ``record(kind, ...)``,
    ``save_task(task, kind, ...)`` and ``kind=`` keyword of an ``Event(...)`` or update."""
    found = []
    for path in sorted(BOARDS.rglob("*.py")):
        name = str(path.relative_to(BOARDS))
        if "migrations" in path.parts or name in NOT_YET_SWITCHED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            callee = getattr(node.func, "attr", getattr(node.func, "id", None))
            if callee == "record" and node.args and name.startswith(WRITE_PATHS):
                found.append((name, node.lineno, node.args[0]))
            elif callee == "save_task" and len(node.args) > 1:
                found.append((name, node.lineno, node.args[1]))
            elif callee in ("Event", "_update"):
                found += [(name, node.lineno, k.value) for k in node.keywords if k.arg == "kind"]
    return found


def _names_a_kind(node: ast.expr) -> bool:
    """A kind expression names EventKind members only (a member, a choice of members, a
    lookup into a table of members, or a variable holding one)."""
    if isinstance(node, ast.Constant):
        return False
    if isinstance(node, ast.IfExp):
        return _names_a_kind(node.body) and _names_a_kind(node.orelse)
    if isinstance(node, ast.BoolOp):
        return all(_names_a_kind(v) for v in node.values)
    return not isinstance(node, ast.JoinedStr)


def test_every_event_is_recorded_by_a_kind_of_the_vocabulary():
    found = _kind_arguments()
    assert len(found) > 30
    written = [(f, line, ast.unparse(node)) for f, line, node in found if not _names_a_kind(node)]
    assert written == []


def test_the_event_log_column_takes_the_vocabulary_as_its_choices():
    assert Event._meta.get_field("kind").choices == EventKind.choices


def test_a_kind_is_its_plain_string_on_the_wire():
    assert json.dumps({"kind": EventKind.TOOL_CALL_REQUESTED}) == '{"kind": "tool_call_requested"}'
    assert f"{EventKind.CREATED}" == "created" and EventKind("approved") is EventKind.APPROVED


def test_every_kind_reads_as_a_sentence_of_its_own():
    generic = describe("no such kind", 3, "alice", {})
    data = {"fields": {"status": {"from": "pending", "to": "completed"}}, "name": "bot"}
    for kind in EventKind:
        if kind == EventKind.UPDATED:
            continue  # the generic sentence is the update's own
        assert describe(kind, 3, "alice", data) != generic, kind

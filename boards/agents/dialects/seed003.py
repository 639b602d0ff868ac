"""Seed 003's one tool, ``tasks``, on the tool endpoint (SPEC §4 "Seed dialects"), with
``action`` insert / list / update / delete / batch:

- ``label`` ↔ subject; ``id``, ``parent_id`` and the ids in answers are integers;
  ``blocked_by`` is a comma-separated string of ids (a list is accepted too).
- Statuses are the board's columns: ``open`` = pending and not blocked, ``blocked``
  = pending with an unfinished blocker, ``in_progress``, ``done`` = completed,
  failed or cancelled. A done task that did not complete carries ``outcome``
  (``failed`` / ``cancelled``); its dependents stay blocked, since only a
  completed blocker unblocks. Setting ``done`` completes a task.
- ``blocked`` is derived from ``blocked_by``, never stored: insert and update accept
  it only with blockers (named in the same call's ``blocked_by``, or unfinished ones
  the task already has), refusing it otherwise; ``open`` on a task with
  unfinished blockers leaves it blocked. A task's ``blocked_by`` lists its
  unfinished blockers (a completed blocker drops out, as in the seed's auto-unblock).
  Update's ``blocked_by`` replaces that list.
- Every write, single or batch, is one ``services.task_batch`` call, so an insert
  with ``status``, ``result`` or ``notes`` (which the canonical create does not
  take) is still atomic: a create plus an update of the same task.
- In a batch, an insert may be referenced by later or earlier ops either by its
  ``ref`` (a name with a letter in it, as in TaskBatch) or by the integer id it
  will receive: inserts are numbered from the board's high-water mark in op order,
  exactly as seed 003 predicts, and those ids are passed to the services as refs,
  so they hold even when another writer numbers a task in between. Any other
  integer names an existing task. Cycles and unknown references are refused by the
  services with the seed's messages. ``list`` is not a batch operation.
- Every answer is ``{kind: "tasks", action, tasks, total, counts, changes}`` (plus
  ``operations`` for batch). ``tasks`` is the whole board (or the list's
  selection), ``total`` its length, ``counts`` the whole board's. ``changes`` maps
  the services' changes: created → insert, updated → update, deleted → delete,
  auto_unblock → auto_unblock (and auto_block, when a reopened task blocks its
  dependents again); an update of a task inserted in the same call is part of its
  insert. Fields an action does not use are refused, naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictBool, WithJsonSchema

from boards.agents import schemas
from boards.agents.dialects.common import SEED003
from boards.agents.handlers import Answer
from boards.agents.schemas import tool
from boards.core import limits, numbers, selectors, services
from boards.core.auth import Caller
from boards.core.errors import InvalidInput
from boards.models import Board, Status

REF = re.compile(r"^[A-Za-z0-9_.:-]*[A-Za-z_.:-][A-Za-z0-9_.:-]*$")
NOT_A_TASK = "must be a task id (an integer) or, in a batch, the ref of an insert"


def _seed003_ref(value: Any) -> str:
    text = numbers.task_text(value)  # the one reading: 3, "3", "#3"
    if isinstance(text, str):
        number = numbers.spelled(text)
        if number:  # task 0 does not exist: "0" is no id
            return str(number)
        if len(text) <= limits.REF_MAX and REF.match(text):
            return text
    raise ValueError(NOT_A_TASK)


def _seed003_refs(value: Any) -> Any:
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [_seed003_ref(item) for item in value]
    raise ValueError('must be comma-separated task ids, e.g. "1,2"')


Seed003Id = Annotated[
    str,
    BeforeValidator(_seed003_ref),
    WithJsonSchema({"type": "integer", "description": "A task id, e.g. 3."}),
]
BlockedBy = Annotated[
    list[str],
    BeforeValidator(_seed003_refs),
    Field(max_length=100),
    WithJsonSchema(
        {
            "type": "string",
            "description": 'Comma-separated ids of the tasks that must be done first, e.g. "1,2".',
        }
    ),
]
Seed003Status = Literal["open", "in_progress", "done", "blocked"]


class _Seed003Fields(schemas.ToolInput):
    action: str  # narrowed by each subclass; declared here so it comes first in the schema
    id: Seed003Id | None = Field(None, description="Task id; required for update and delete.")
    label: schemas.Subject | None = Field(None, description="What to do; required for insert.")
    status: Seed003Status | None = Field(
        None,
        description="open, in_progress, done, or blocked (which follows from blocked_by). "
        "Setting done auto-unblocks the tasks waiting for this one.",
    )
    parent_id: Seed003Id | None = Field(None, description="Parent task id (hierarchy).")
    prompt: schemas.Long | None = Field(None, description="Full sub-agent instructions.")
    result: schemas.Long | None = Field(None, description="Sub-agent output, set on completion.")
    notes: schemas.Long | None = None
    blocked_by: BlockedBy | None = None


class Seed003Op(_Seed003Fields):
    action: Literal["insert", "update", "delete"]
    ref: schemas.Ref | None = Field(
        None,
        description="Your name for this insert, usable in other ops' blocked_by, parent_id and "
        "id (the id the insert will receive works too).",
    )


class Seed003Input(_Seed003Fields):
    """Plan and track work as a DAG of tasks. action insert (label required; parent_id for
    hierarchy, blocked_by for ordering, prompt for the sub-agent), list (view open / ready /
    blocked / in_progress / done, or status / parent_id filters; tree: true orders by parent
    with depth), update (id required; status done completes it and auto-unblocks its dependents,
    listed as auto_unblock changes; set result when done), delete (id), batch (ops: [{action,
    ...}], all or nothing; inserts are numbered in order, so later ops may use the ids they will
    get, or give an insert a ref; cycles and unknown ids reject the whole batch). view ready
    lists the work you can dispatch now. Every answer has tasks, total, counts and changes."""

    action: Literal["insert", "list", "update", "delete", "batch"]
    view: Literal["open", "done", "blocked", "in_progress", "ready"] | None = Field(
        None, description="List preset; ready = open with no unfinished blocker."
    )
    tree: StrictBool = Field(False, description="List depth-first by parent with a depth field.")
    ops: Annotated[list[Seed003Op], Field(min_length=1, max_length=500)] | None = Field(
        None, description="Operations for batch, each with its own action; all or nothing."
    )


ACTION_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    # action: (required, allowed)
    "insert": (
        {"label"},
        {"label", "status", "parent_id", "prompt", "result", "notes", "blocked_by", "ref"},
    ),
    "update": (
        {"id"},
        {"id", "label", "status", "parent_id", "prompt", "result", "notes", "blocked_by"},
    ),
    "delete": ({"id"}, {"id"}),
    "list": (set(), {"view", "tree", "status", "parent_id"}),
    "batch": ({"ops"}, {"ops"}),
}
STATUS_TO_CANONICAL = {"open": Status.PENDING, "in_progress": Status.IN_PROGRESS}
COLUMN_STATUS = {
    "pending": "open",
    "blocked": "blocked",
    "in_progress": "in_progress",
    "completed": "done",
}
STATUS_COLUMN = {status: column for column, status in COLUMN_STATUS.items()}
FIELD_NAMES = {
    "subject": "label",
    "parentId": "parent_id",
    "addBlockedBy": "blocked_by",
    "removeBlockedBy": "blocked_by",
    "addBlocks": "blocks",
    "activeForm": "active_form",
}
CHANGE_OPS = {"created": "insert", "updated": "update", "deleted": "delete"}


def _check_fields(data: _Seed003Fields, action: str, prefix: str) -> None:
    """Each action takes its own fields: a missing one or one it does not use is named."""
    required, allowed = ACTION_FIELDS[action]
    # LLMs often send null (or tree: false) for fields they do not mean to use.
    sent = {
        name
        for name in data.model_fields_set
        if name != "action" and getattr(data, name) is not None and getattr(data, name) is not False
    }
    problems = [(f, f"required for action {action!r}") for f in sorted(required - sent)]
    problems += [(f, f"not used by action {action!r}") for f in sorted(sent - allowed)]
    if problems:
        raise InvalidInput(
            "; ".join(f"{prefix}{name}: {text}" for name, text in problems),
            details=[{"field": prefix + name, "message": text} for name, text in problems],
        )


def _seed003_task(view: selectors.TaskView, *, tree: bool = False) -> dict[str, Any]:
    task = view.task
    status = COLUMN_STATUS[view.column]
    data: dict[str, Any] = {
        "id": task.number,
        "label": task.subject,
        "status": status,
        "done": status == "done",
        "parent_id": selectors.view_parent_number(task),
        "prompt": task.prompt or None,
        "result": task.result or None,
        "notes": task.notes,
        "blocked_by": view.open_blockers,
        "created_at": selectors.iso(task.created_at),
        "updated_at": selectors.iso(task.updated_at),
    }
    if task.status in (Status.FAILED, Status.CANCELLED):
        data["outcome"] = task.status
    if tree:
        data["depth"] = view.depth or 0
    return data


def _seed003_counts(board: Board) -> dict[str, int]:
    """The whole board's, from the counts the board keeps (one query, whatever its size)."""
    counts = selectors.board_counts(board)
    return {
        "open": counts["pending"],
        "in_progress": counts["in_progress"],
        "done": counts["completed"] + counts["failed"] + counts["cancelled"],
        "blocked": counts["blocked"],
    }


def _seed003_answer(
    action: str,
    views: Sequence[selectors.TaskView],
    board: Board,
    *,
    tree: bool = False,
    changes: Sequence[dict[str, Any]] = (),
    operations: list[dict[str, Any]] | None = None,
) -> Answer:
    body: dict[str, Any] = {
        "kind": "tasks",
        "action": action,
        "tasks": [_seed003_task(v, tree=tree) for v in views],
        "total": len(views),
        "counts": _seed003_counts(board),
        "changes": list(changes),
    }
    if operations is not None:
        body["operations"] = operations
    return Answer(body)


def _integer(field_name: str, token: str) -> str:
    """Outside a batch there are no refs: a reference is a task number."""
    if numbers.spelled(token) is None:
        raise InvalidInput(
            f"{field_name}: must be a task id (an integer)",
            details=[{"field": field_name, "message": "not an integer"}],
        )
    return token


def _seed003_list(caller: Caller, data: Seed003Input) -> Answer:
    parent = _integer("parent_id", data.parent_id) if data.parent_id else None
    rows = selectors.task_rows(
        caller.board,
        view="ready" if data.view == "ready" else "all",
        parent_id=int(parent) if parent else None,
    )
    # A status and a view each name a column; given both, a task must be in both (so
    # none are, unless they agree).
    for wanted in {data.status, data.view} - {None, "ready"}:
        rows = rows.in_column(STATUS_COLUMN[str(wanted)])
    selected = selectors.task_selection(caller.board, rows)
    if data.tree:
        selected = selectors.tree_order(selected)
    return _seed003_answer("list", selected, caller.board, tree=data.tree)


class _Plan:
    """Seed-003 operations translated into one ``services.task_batch`` call."""

    def __init__(self, caller: Caller, ops: Sequence[_Seed003Fields], *, batch: bool):
        self.batch = batch
        self.service_ops: list[dict[str, Any]] = []
        self.owners: list[int] = []  # the seed op each service op comes from
        self.user_refs: dict[int, str] = {}
        actions = [op.action for op in ops]
        # Inserts get numbers from the high-water mark in op order, as seed 003 predicts;
        # those numbers reach the services as refs, so a concurrent writer cannot shift them.
        base = caller.board.task_counter
        inserts = [i for i, a in enumerate(actions) if a == "insert"]
        self.predicted = {str(base + k + 1): f"@{k}" for k in range(len(inserts))}
        self.insert_ref = {i: f"@{k}" for k, i in enumerate(inserts)}
        seen: dict[str, int] = {}
        for index, op in enumerate(ops):
            ref = getattr(op, "ref", None)
            if ref is not None:
                if ref in seen:
                    raise InvalidInput(
                        f"{self._at(index)}ref: {ref!r} is used by an earlier operation",
                        details=[{"field": f"{self._at(index)}ref", "message": "duplicate"}],
                    )
                seen[ref] = index
        self.named = {ref: self.insert_ref[i] for ref, i in seen.items()}
        existing = {
            number
            for op, action in zip(ops, actions, strict=True)
            if action in ("update", "delete")
            and op.id
            and op.id not in self.predicted
            and (number := numbers.spelled(op.id)) is not None
        }
        self.before = selectors.task_views(caller.board, existing, with_children=False)
        translate = {"insert": self._insert, "update": self._update, "delete": self._delete}
        for index, (op, action) in enumerate(zip(ops, actions, strict=True)):
            translate[action](index, op)

    def _at(self, index: int) -> str:
        return f"ops.{index}." if self.batch else ""

    def _target(self, token: str) -> str:
        """A seed-003 reference as the services resolve it: a number or a batch ref."""
        return self.predicted.get(token) or self.named.get(token) or token

    def _id(self, field_name: str, token: str) -> str:
        return self._target(token if self.batch else _integer(field_name, token))

    def _add(self, index: int, op: dict[str, Any]) -> None:
        self.service_ops.append(op)
        self.owners.append(index)

    def _status(self, index: int, status: str, blockers: Sequence[str]) -> str | None:
        if status == "blocked":
            if not blockers:
                field_name = f"{self._at(index)}status"
                raise InvalidInput(
                    f"{field_name}: blocked follows from blocked_by; "
                    "name the unfinished tasks it waits for in blocked_by",
                    details=[{"field": field_name, "message": "no blocker"}],
                )
            return Status.PENDING
        return STATUS_TO_CANONICAL.get(status, Status.COMPLETED)

    def _fields(self, index: int, op: _Seed003Fields) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, public in (("subject", "label"), ("prompt", "prompt"), ("result", "result")):
            if getattr(op, public) is not None:
                fields[name] = getattr(op, public)
        if op.notes is not None:
            fields["notes"] = op.notes
        if op.parent_id is not None:
            fields["parent_id"] = self._id(f"{self._at(index)}parent_id", op.parent_id)
        return fields

    def _blockers(self, index: int, op: _Seed003Fields) -> list[str]:
        field_name = f"{self._at(index)}blocked_by"
        return [self._id(field_name, token) for token in op.blocked_by or ()]

    def _insert(self, index: int, op: _Seed003Fields) -> None:
        ref = self.insert_ref[index]
        if getattr(op, "ref", None):
            self.user_refs[index] = getattr(op, "ref", "")
        fields = self._fields(index, op)
        blockers = self._blockers(index, op)
        self._add(
            index,
            {
                "op": "create",
                "ref": ref,
                "subject": fields.pop("subject"),
                "prompt": fields.pop("prompt", ""),
                "parent_id": fields.pop("parent_id", None),
                "blocked_by": blockers,
            },
        )
        if op.status is not None and op.status != "open":
            status = self._status(index, op.status, blockers)
            if status != Status.PENDING:
                fields["status"] = status
        if fields:  # result, notes or a starting status: the canonical create has none of them
            self._add(index, {"op": "update", "task_id": ref, **fields})

    def _update(self, index: int, op: _Seed003Fields) -> None:
        assert op.id is not None  # _check_fields requires it
        target = self._id(f"{self._at(index)}id", op.id)
        fields = self._fields(index, op)
        number = numbers.spelled(target)
        view = self.before.get(number) if number is not None else None
        current = [str(n) for n in view.open_blockers] if view else []
        blockers = current
        if op.blocked_by is not None:
            blockers = self._blockers(index, op)
            fields["add_blocked_by"] = [b for b in blockers if b not in current]
            fields["remove_blocked_by"] = [c for c in current if c not in blockers]
        if op.status is not None:
            fields["status"] = self._status(index, op.status, blockers)
        self._add(index, {"op": "update", "task_id": target, **fields})

    def _delete(self, index: int, op: _Seed003Fields) -> None:
        assert op.id is not None  # _check_fields requires it
        self._add(index, {"op": "delete", "task_id": self._id(f"{self._at(index)}id", op.id)})


def _seed003_changes(
    changes: Sequence[dict[str, Any]], labels: dict[int, str]
) -> list[dict[str, Any]]:
    created = {int(c["taskId"]) for c in changes if c["type"] == "created"}
    mapped: list[dict[str, Any]] = []
    for change in changes:
        number = int(change["taskId"])
        kind = change["type"]
        entry: dict[str, Any] = {"op": CHANGE_OPS.get(kind, kind), "id": number}
        if kind in ("created", "deleted") and number in labels:
            entry["label"] = labels[number]
        elif kind == "updated":
            if number in created:
                continue  # the second half of an insert
            names = [FIELD_NAMES.get(f, f) for f in change.get("fields", ())]
            entry["changed_fields"] = list(dict.fromkeys(names))
        elif kind in ("auto_unblock", "auto_block"):
            entry["changed_fields"] = ["blocked_by", "status"]
        mapped.append(entry)
    return mapped


def _seed003_write(
    caller: Caller, action: str, ops: Sequence[_Seed003Fields], *, batch: bool
) -> Answer:
    plan = _Plan(caller, ops, batch=batch)
    outcome = services.task_batch(board=caller.board, actor=caller.agent, ops=plan.service_ops)
    # The seed answers every write with the whole board (its "task snapshot"), in a
    # constant number of queries; the counts are the board's own.
    every = selectors.task_selection(caller.board, selectors.task_rows(caller.board))
    written = [int(outcome.operations[plan.owners.index(i)]["taskId"]) for i in range(len(ops))]
    # Labels for insert and delete changes: of the tasks as they were, and as inserted.
    labels = {number: view.task.subject for number, view in plan.before.items()}
    labels |= {n: op.label for n, op in zip(written, ops, strict=True) if op.label is not None}
    labels |= {view.number: view.task.subject for view in every}
    changes = _seed003_changes(outcome.changes, labels)
    operations = None
    if batch:
        operations = []
        for index, (op, number) in enumerate(zip(ops, written, strict=True)):
            result: dict[str, Any] = {"action": op.action, "ok": True, "id": number}
            if index in plan.user_refs:
                result["ref"] = plan.user_refs[index]
            operations.append(result)
    return _seed003_answer(action, every, caller.board, changes=changes, operations=operations)


@tool(name="tasks", input=Seed003Input, dialect=SEED003)
def seed003_tasks(caller: Caller, data: Seed003Input) -> Answer:
    _check_fields(data, data.action, "")
    if data.action == "list":
        return _seed003_list(caller, data)
    if data.action == "batch":
        assert data.ops is not None  # _check_fields requires it
        for index, op in enumerate(data.ops):
            _check_fields(op, op.action, f"ops.{index}.")
        return _seed003_write(caller, "batch", data.ops, batch=True)
    return _seed003_write(caller, data.action, [data], batch=False)

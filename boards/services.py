"""THE write path of Agent Kanban.

Every change from every door (tool API, MCP, board views, admin, commands)
goes through a function here. Each one runs in one transaction with the
board's row locked (so numbering, the event sequence, claims and the
dependency graph never race), records its Events, and publishes them to the
board's open browsers and watchers after commit (``events.publish``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from . import events
from .errors import Conflict, InvalidInput, NotFound
from .models import (
    TERMINAL_STATUSES,
    Agent,
    AgentToken,
    ApprovalState,
    Board,
    Dependency,
    Event,
    Message,
    Status,
    Task,
    hash_token,
)
from .selectors import blocked_numbers, parse_task_id, task_to_dict, task_view

SUBJECT_MAX = 200
NAME_MAX = 100
METADATA_MAX_KEYS = 100
METADATA_KEY_MAX = 100
METADATA_VALUE_MAX = 10_000


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class Outcome:
    """What a write did: the task it was about, and the answer's ``changes``."""

    task_number: int | None
    changes: list[dict]
    awaiting_approval: bool = False
    operations: list[dict] = field(default_factory=list)


class _Work:
    """One service call's unit of work: events to record and tasks to re-render."""

    def __init__(self, board: Board, actor: str) -> None:
        self.board = board
        self.actor = actor
        self.now = timezone.now()
        self.events: list[Event] = []
        self.changes: list[dict] = []
        self.touched: set[int] = set()
        self.created: set[int] = set()
        self.deleted: set[int] = set()
        # Tasks whose own status a call changed: their change is reported, not an auto_(un)block.
        self.restatused: set[int] = set()
        self.edges_changed = False
        self.reset = False
        # Which tasks were blocked before the first change that can (un)block any:
        # a status change, an edge change or a delete. Other writes skip both reads.
        self.blocked_before: set[int] | None = None

    def graph_may_change(self) -> None:
        if self.blocked_before is None:
            self.blocked_before = blocked_numbers(self.board)

    def record(self, kind: str, number: int | None, **data: Any) -> None:
        self.board.last_seq += 1
        self.events.append(
            Event(
                board=self.board,
                seq=self.board.last_seq,
                task_number=number,
                actor=self.actor,
                kind=kind,
                data=data,
            )
        )
        if number is not None:
            self.touched.add(number)

    def change(self, kind: str, number: int, **extra: Any) -> None:
        self.changes.append({"type": kind, "taskId": str(number), **extra})

    def finish(self) -> None:
        if self.edges_changed:
            _assert_acyclic(self.board)
        if self.blocked_before is not None:
            after = blocked_numbers(self.board)
            for number in sorted(self.blocked_before - after - self.deleted - self.restatused):
                self.record("unblocked", number)
                self.change("auto_unblock", number)
            for number in sorted(after - self.blocked_before - self.created - self.restatused):
                self.record("blocked", number)
                self.change("auto_block", number)
        Event.objects.bulk_create(self.events)
        Board.objects.filter(pk=self.board.pk).update(
            last_seq=self.board.last_seq,
            task_counter=self.board.task_counter,
            updated_at=self.now,
        )
        events.publish(
            self.board,
            self.events,
            self.touched,
            reset=self.reset,
            header=self.reset or events.changes_header(self.events),
        )


@contextmanager
def _work(board: Board, actor: str) -> Iterator[_Work]:
    with transaction.atomic():
        # One lock per board serialises its writers: task numbers, event sequence,
        # claims and cycle checks all read-then-write the same rows.
        locked = Board.objects.select_for_update().get(pk=board.pk)
        work = _Work(locked, actor)
        yield work
        work.finish()
    board.last_seq = locked.last_seq
    board.task_counter = locked.task_counter


# --- checks -------------------------------------------------------------------------------


def _text(name: str, value: str, limit: int, *, required: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: must be a string", details=[{"field": name}])
    if "\x00" in value:
        raise InvalidInput(f"{name}: must not contain the NUL character", details=[{"field": name}])
    value = value.strip() if required else value
    if required and not value:
        raise InvalidInput(f"{name}: must not be empty", details=[{"field": name}])
    if len(value) > limit:
        raise InvalidInput(
            f"{name}: at most {limit} characters (got {len(value)})", details=[{"field": name}]
        )
    return value


def _merge_metadata(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge key by key; a key set to ``None`` is removed. Values must be primitives."""
    merged = dict(current)
    for key, value in patch.items():
        if not isinstance(key, str) or not key or len(key) > METADATA_KEY_MAX:
            raise InvalidInput(f"metadata: keys are 1 to {METADATA_KEY_MAX} characters")
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, bool | int | float | str):
            if isinstance(value, str) and len(value) > METADATA_VALUE_MAX:
                raise InvalidInput(f"metadata.{key}: at most {METADATA_VALUE_MAX} characters")
            merged[key] = value
        else:
            raise InvalidInput(f"metadata.{key}: values must be strings, numbers, booleans or null")
    if len(merged) > METADATA_MAX_KEYS:
        raise InvalidInput(f"metadata: at most {METADATA_MAX_KEYS} keys")
    return merged


def _assert_acyclic(board: Board) -> None:
    """Depth-first search with three colours, lowest numbers first, so a cycle reads
    the same way every time: ``Cycle detected: 3 → 5 → 3``."""
    graph: dict[int, list[int]] = {}
    for task, blocker in Dependency.objects.filter(board=board).values_list(
        "task__number", "blocker__number"
    ):
        graph.setdefault(task, []).append(blocker)
    done: set[int] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(sorted(graph.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
            elif nxt in on_path:
                cycle = [*path[path.index(nxt) :], nxt]
                raise InvalidInput(
                    "Cycle detected: " + " → ".join(str(n) for n in cycle),
                    code="cycle",
                    details={"cycle": [str(n) for n in cycle]},
                )
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))


def _open_blockers(task: Task) -> list[int]:
    return sorted(
        Dependency.objects.filter(task=task)
        .exclude(blocker__status=Status.COMPLETED)
        .values_list("blocker__number", flat=True)
    )


def _blocked_message(task: Task, blockers: Sequence[int]) -> str:
    return f"Task #{task.number} is blocked by " + ", ".join(f"#{n}" for n in blockers)


def _assert_can_start(task: Task) -> None:
    """A task may go in progress only when nothing blocks it and no approval is outstanding."""
    if task.status in TERMINAL_STATUSES:
        raise Conflict(f"Task #{task.number} is {task.status}", code="terminal")
    blockers = _open_blockers(task)
    if blockers:
        raise Conflict(
            _blocked_message(task, blockers),
            code="blocked",
            details={"blockedBy": [str(n) for n in blockers]},
        )
    if task.approval_required and task.approval_state != ApprovalState.APPROVED:
        if task.approval_state == ApprovalState.REQUESTED:
            raise Conflict(
                f"Task #{task.number} awaits approval requested by {task.approval_requested_by}",
                code="awaiting_approval",
            )
        raise Conflict(
            f"Task #{task.number} needs a person's approval before it starts; "
            "claim it with TaskClaim to ask for approval",
            code="approval_required",
        )


# --- task lookups ---------------------------------------------------------------------------


def _task(work: _Work, ident: str | int, refs: Mapping[str, int] | None = None) -> Task:
    if refs and isinstance(ident, str) and ident in refs:
        number = refs[ident]
    else:
        number = parse_task_id(ident)
    task = Task.objects.filter(board=work.board, number=number).first()
    if task is None:
        raise NotFound(f"Task #{number} not found", code="task_not_found")
    return task


def _resolve(
    work: _Work,
    ident: str | int,
    *,
    owner: Task,
    field_name: str,
    refs: Mapping[str, int] | None = None,
) -> Task:
    """A task referenced from ``owner``'s ``field_name``; unknown ones are named in the error."""
    if refs and isinstance(ident, str) and ident in refs:
        number: int | None = refs[ident]
    else:
        text = str(ident).strip().lstrip("#")
        number = int(text) if text.isdigit() and len(text) < 10 else None
    found = (
        Task.objects.filter(board=work.board, number=number).first() if number is not None else None
    )
    if found is None:
        raise InvalidInput(
            f"Task #{owner.number}: {field_name} references unknown task "
            f"#{str(ident).lstrip('#')[:40]}",
            code="unknown_reference",
            details={"field": field_name, "taskId": str(owner.number), "reference": str(ident)},
        )
    if found.pk == owner.pk:
        raise InvalidInput(
            f"Task #{owner.number}: {field_name} cannot reference the task itself",
            code="self_reference",
            details={"field": field_name, "taskId": str(owner.number)},
        )
    return found


def _add_edges(
    work: _Work, task: Task, blockers: Sequence[Task], dependents: Sequence[Task]
) -> None:
    rows = [Dependency(board=work.board, task=task, blocker=b) for b in blockers]
    rows += [Dependency(board=work.board, task=d, blocker=task) for d in dependents]
    if rows:
        work.graph_may_change()
        Dependency.objects.bulk_create(rows, ignore_conflicts=True)
        work.edges_changed = True
        work.touched.update(t.number for t in [*blockers, *dependents])


def _set_parent(work: _Work, task: Task, parent: Task | None) -> None:
    if parent is not None:
        chain = [task.number, parent.number]
        cursor = parent
        while cursor.parent_id is not None:
            cursor = Task.objects.get(pk=cursor.parent_id)
            chain.append(cursor.number)
            if cursor.pk == task.pk:
                raise InvalidInput(
                    "Cycle detected in parentId: " + " → ".join(str(n) for n in chain),
                    code="cycle",
                )
    old = task.parent
    task.parent = parent
    work.touched.update(t.number for t in (old, parent) if t is not None)


# --- the task life --------------------------------------------------------------------------


def _create(
    work: _Work,
    *,
    subject: str,
    description: str = "",
    active_form: str = "",
    metadata: Mapping[str, Any] | None = None,
    prompt: str = "",
    requires_approval: bool = False,
) -> Task:
    work.board.task_counter += 1
    task = Task.objects.create(
        board=work.board,
        number=work.board.task_counter,
        subject=_text("subject", subject, SUBJECT_MAX, required=True),
        description=description,
        active_form=_text("activeForm", active_form, SUBJECT_MAX),
        metadata=_merge_metadata({}, metadata or {}),
        prompt=prompt,
        created_by=work.actor,
        approval_required=requires_approval,
    )
    work.created.add(task.number)
    work.record("created", task.number, subject=task.subject)
    work.change("created", task.number)
    return task


def _link(
    work: _Work,
    task: Task,
    *,
    blocked_by: Sequence[str | int] = (),
    blocks: Sequence[str | int] = (),
    parent_id: str | int | None = None,
    refs: Mapping[str, int] | None = None,
) -> None:
    blockers = [
        _resolve(work, ref, owner=task, field_name="blocked_by", refs=refs) for ref in blocked_by
    ]
    dependents = [_resolve(work, ref, owner=task, field_name="blocks", refs=refs) for ref in blocks]
    _add_edges(work, task, blockers, dependents)
    if parent_id is not None:
        parent = _resolve(work, parent_id, owner=task, field_name="parent_id", refs=refs)
        _set_parent(work, task, parent)
        task.save(update_fields=["parent"])


def task_create(
    *,
    board: Board,
    actor: str,
    subject: str,
    description: str = "",
    active_form: str = "",
    blocked_by: Sequence[str | int] = (),
    blocks: Sequence[str | int] = (),
    parent_id: str | int | None = None,
    metadata: Mapping[str, Any] | None = None,
    prompt: str = "",
    requires_approval: bool = False,
) -> Outcome:
    """Create a pending task numbered from the board's high-water mark.

    Its blockers, dependents and parent must exist on the board; a new edge
    that closes a cycle rolls the whole creation back.
    """
    with _work(board, actor) as work:
        task = _create(
            work,
            subject=subject,
            description=description,
            active_form=active_form,
            metadata=metadata,
            prompt=prompt,
            requires_approval=requires_approval,
        )
        _link(work, task, blocked_by=blocked_by, blocks=blocks, parent_id=parent_id)
    return Outcome(task.number, work.changes)


UPDATABLE_TEXT = {
    "subject": ("subject", SUBJECT_MAX),
    "description": ("description", 100_000),
    "active_form": ("activeForm", SUBJECT_MAX),
    "prompt": ("prompt", 100_000),
    "result": ("result", 100_000),
    "notes": ("notes", 100_000),
    "owner": ("owner", NAME_MAX),
}
EVENT_VALUE_MAX = 500


def _shown(value: Any) -> Any:
    if isinstance(value, str) and len(value) > EVENT_VALUE_MAX:
        return value[:EVENT_VALUE_MAX] + "…"
    return value


def _update(
    work: _Work,
    task: Task,
    fields: Mapping[str, Any],
    *,
    refs: Mapping[str, int] | None = None,
    kind: str | None = None,
) -> list[str]:
    """Apply a partial update to a locked task; returns the public names of changed fields."""
    expected = fields.get("expected_version")
    if expected is not None and expected != task.version:
        raise Conflict(
            f"Task #{task.number} is at version {task.version}, not {expected}; "
            "read it again and retry",
            code="stale_version",
            details={"task": task_to_dict(task_view(work.board, task.number))},
        )
    diff: dict[str, dict[str, Any]] = {}

    for name, (public, limit) in UPDATABLE_TEXT.items():
        if name in fields and fields[name] is not None:
            value = _text(public, fields[name], limit, required=(name == "subject"))
            if value != getattr(task, name):
                diff[public] = {"from": _shown(getattr(task, name)), "to": _shown(value)}
                setattr(task, name, value)

    if fields.get("metadata") is not None:
        merged = _merge_metadata(task.metadata, fields["metadata"])
        if merged != task.metadata:
            diff["metadata"] = {"from": task.metadata, "to": merged}
            task.metadata = merged

    if "parent_id" in fields:
        parent_ref = fields["parent_id"]
        parent = (
            None
            if parent_ref in (None, "")
            else _resolve(work, parent_ref, owner=task, field_name="parent_id", refs=refs)
        )
        if (parent.pk if parent else None) != task.parent_id:
            old_number = task.parent.number if task.parent is not None else None
            _set_parent(work, task, parent)
            diff["parentId"] = {
                "from": str(old_number) if old_number else None,
                "to": str(parent.number) if parent else None,
            }

    removed = [
        _resolve(work, ref, owner=task, field_name="blocked_by", refs=refs)
        for ref in fields.get("remove_blocked_by") or ()
    ]
    if removed:
        work.graph_may_change()
        count, _ = Dependency.objects.filter(task=task, blocker__in=removed).delete()
        if count:
            work.edges_changed = True
            work.touched.update(t.number for t in removed)
            diff["removeBlockedBy"] = {"to": [str(t.number) for t in removed]}
    added = [
        _resolve(work, ref, owner=task, field_name="blocked_by", refs=refs)
        for ref in fields.get("add_blocked_by") or ()
    ]
    dependents = [
        _resolve(work, ref, owner=task, field_name="blocks", refs=refs)
        for ref in fields.get("add_blocks") or ()
    ]
    if added or dependents:
        _add_edges(work, task, added, dependents)
        if added:
            diff["addBlockedBy"] = {"to": [str(t.number) for t in added]}
        if dependents:
            diff["addBlocks"] = {"to": [str(t.number) for t in dependents]}

    status = fields.get("status")
    if status is not None and status != task.status:
        if status not in Status.values:
            raise InvalidInput(f"status: unknown status {status!r}")
        if status == Status.IN_PROGRESS:
            _assert_can_start(task)
        work.graph_may_change()
        work.restatused.add(task.number)
        if Status.COMPLETED in (status, task.status):
            # Dependents show "blocked by" only unfinished blockers: their cards change too.
            work.touched.update(task.blocks.values_list("number", flat=True))
        diff["status"] = {"from": task.status, "to": status}
        task.status = status
        task.completed_at = work.now if status in TERMINAL_STATUSES else None

    if not diff:
        return []
    task.version += 1
    task.updated_at = work.now
    task.save()
    if kind is None:
        kind = "status" if "status" in diff else "updated"
    work.record(kind, task.number, fields=diff)
    work.change("updated", task.number, fields=list(diff))
    return list(diff)


def _delete(work: _Work, task: Task) -> None:
    work.graph_may_change()
    for child in Task.objects.filter(parent=task):
        Task.objects.filter(pk=child.pk).update(
            parent=None, version=F("version") + 1, updated_at=work.now
        )
        work.record(
            "updated", child.number, fields={"parentId": {"from": str(task.number), "to": None}}
        )
        work.change("updated", child.number, fields=["parentId"])
    dependents = list(task.blocks.values_list("number", flat=True))
    blockers = list(task.blocked_by.values_list("number", flat=True))
    task.delete()
    work.deleted.add(task.number)
    work.touched.update(dependents + blockers)
    work.record("deleted", task.number, subject=task.subject)
    work.change("deleted", task.number)


def task_update(
    *,
    board: Board,
    actor: str,
    task_id: str | int,
    subject: str | None = None,
    description: str | None = None,
    active_form: str | None = None,
    status: str | None = None,
    owner: str | None = None,
    add_blocked_by: Sequence[str | int] = (),
    remove_blocked_by: Sequence[str | int] = (),
    add_blocks: Sequence[str | int] = (),
    parent_id: Any = UNSET,
    metadata: Mapping[str, Any] | None = None,
    prompt: str | None = None,
    result: str | None = None,
    notes: str | None = None,
    expected_version: int | None = None,
) -> Outcome:
    """Change any of a task's fields; ``status="deleted"`` deletes it.

    Going to ``in_progress`` fails like a claim would (blocked, awaiting approval).
    Completing a task unblocks its dependents (``auto_unblock`` changes);
    re-opening a completed one blocks them again (``auto_block``). A stale
    ``expected_version`` fails with 409 and the current task.
    """
    fields: dict[str, Any] = {
        "subject": subject,
        "description": description,
        "active_form": active_form,
        "status": status,
        "owner": owner,
        "add_blocked_by": add_blocked_by,
        "remove_blocked_by": remove_blocked_by,
        "add_blocks": add_blocks,
        "metadata": metadata,
        "prompt": prompt,
        "result": result,
        "notes": notes,
        "expected_version": expected_version,
    }
    if parent_id is not UNSET:
        fields["parent_id"] = parent_id
    with _work(board, actor) as work:
        task = _task(work, task_id)
        if status == "deleted":
            if expected_version is not None and expected_version != task.version:
                _update(work, task, {"expected_version": expected_version})
            _delete(work, task)
            return_number = None
        else:
            _update(work, task, fields)
            return_number = task.number
    return Outcome(return_number, work.changes)


def task_delete(*, board: Board, actor: str, task_id: str | int) -> Outcome:
    """Delete a task and its edges; its number is never given out again (until a reset)."""
    with _work(board, actor) as work:
        _delete(work, _task(work, task_id))
    return Outcome(None, work.changes)


def task_claim(*, board: Board, agent: str, task_id: str | int) -> Outcome:
    """Atomically make ``agent`` the owner of a task and start it.

    Refused (409) when the task is terminal, owned by someone else, blocked, or
    awaiting another agent's approval request. Claiming one's own in-progress
    task again changes nothing. A task that requires approval is not started:
    the claim records an approval request instead (``awaiting_approval``).
    """
    with _work(board, agent) as work:
        task = _task(work, task_id)
        outcome = _claim(work, task)
    return outcome


def _claim(work: _Work, task: Task) -> Outcome:
    agent = work.actor
    if task.status in TERMINAL_STATUSES:
        raise Conflict(f"Task #{task.number} is {task.status}", code="terminal")
    if task.owner and task.owner != agent:
        raise Conflict(f"Task #{task.number} is owned by {task.owner}", code="owned")
    blockers = _open_blockers(task)
    if blockers:
        raise Conflict(
            _blocked_message(task, blockers),
            code="blocked",
            details={"blockedBy": [str(n) for n in blockers]},
        )
    if task.owner == agent and task.status == Status.IN_PROGRESS:
        return Outcome(task.number, [])
    if task.approval_required and task.approval_state != ApprovalState.APPROVED:
        if task.approval_state == ApprovalState.REQUESTED:
            if task.approval_requested_by != agent:
                raise Conflict(
                    f"Task #{task.number} awaits approval requested by "
                    f"{task.approval_requested_by}",
                    code="awaiting_approval",
                    details={"requestedBy": task.approval_requested_by},
                )
            return Outcome(task.number, [], awaiting_approval=True)
        _request_approval(work, task, "claimed; waiting for approval before starting")
        return Outcome(task.number, work.changes, awaiting_approval=True)
    diff = {
        "owner": {"from": task.owner, "to": agent},
        "status": {"from": task.status, "to": "in_progress"},
    }
    task.owner = agent
    task.status = Status.IN_PROGRESS
    task.version += 1
    task.updated_at = work.now
    task.save()
    work.record("claimed", task.number, fields=diff)
    work.change("updated", task.number, fields=["owner", "status"])
    return Outcome(task.number, work.changes)


def task_claim_next(*, board: Board, agent: str) -> Outcome:
    """Claim the lowest-numbered ready task, atomically; ``task_number`` is None when none is ready."""
    with _work(board, agent) as work:
        blocked = blocked_numbers(work.board)
        candidates = (
            Task.objects.filter(board=work.board, status=Status.PENDING)
            .exclude(approval_state=ApprovalState.REQUESTED)
            .exclude(number__in=blocked)
            .filter(owner__in=["", agent])
            .order_by("number")
        )
        for task in candidates[:50]:
            return _claim(work, task)
    return Outcome(None, [])


def task_reassign(*, board: Board, actor: str, task_id: str | int, owner: str) -> Outcome:
    """Give a task to another owner (empty = unassigned); not for blocked or terminal tasks."""
    owner = _text("owner", owner, NAME_MAX).strip()
    with _work(board, actor) as work:
        task = _task(work, task_id)
        if task.status in TERMINAL_STATUSES:
            raise Conflict(f"Task #{task.number} is {task.status}", code="terminal")
        blockers = _open_blockers(task)
        if blockers:
            raise Conflict(_blocked_message(task, blockers), code="blocked")
        if owner != task.owner:
            _update(work, task, {"owner": owner}, kind="reassigned")
    return Outcome(task.number, work.changes)


def task_batch(*, board: Board, actor: str, ops: Sequence[Mapping[str, Any]]) -> Outcome:
    """Apply create / update / delete operations all or nothing.

    Creates are numbered first, in order, so any operation may reference a
    created task by its ``ref``; the whole graph is checked for unknown
    references and cycles before anything is committed.
    """
    with _work(board, actor) as work:
        refs: dict[str, int] = {}
        created: dict[int, Task] = {}
        for index, op in enumerate(ops):
            if op["op"] != "create":
                continue
            task = _create(
                work,
                subject=op["subject"],
                description=op.get("description") or "",
                active_form=op.get("active_form") or "",
                metadata=op.get("metadata"),
                prompt=op.get("prompt") or "",
                requires_approval=bool(op.get("requires_approval")),
            )
            created[index] = task
            ref = op.get("ref")
            if ref:
                if ref in refs:
                    raise InvalidInput(
                        f"ops[{index}].ref: {ref!r} is used by an earlier operation",
                        details={"operation": index},
                    )
                refs[ref] = task.number
        operations: list[dict[str, Any]] = []
        for index, op in enumerate(ops):
            kind = op["op"]
            entry: dict[str, Any]
            if kind == "create":
                task = created[index]
                _link(
                    work,
                    task,
                    blocked_by=op.get("blocked_by") or (),
                    blocks=op.get("blocks") or (),
                    parent_id=op.get("parent_id"),
                    refs=refs,
                )
                entry = {"op": "create", "taskId": str(task.number)}
                if op.get("ref"):
                    entry["ref"] = op["ref"]
            elif kind == "update":
                task = _task(work, op["task_id"], refs)
                fields = {k: v for k, v in op.items() if k not in ("op", "task_id")}
                if fields.get("status") == "deleted":
                    _delete(work, task)
                    entry = {"op": "delete", "taskId": str(task.number)}
                else:
                    changed = _update(work, task, fields, refs=refs)
                    entry = {"op": "update", "taskId": str(task.number), "fields": changed}
            else:
                task = _task(work, op["task_id"], refs)
                _delete(work, task)
                entry = {"op": "delete", "taskId": str(task.number)}
            operations.append(entry)
    return Outcome(None, work.changes, operations=operations)


def board_reset(*, board: Board, actor: str) -> Outcome:
    """Delete every task of the board and restart numbering at 1. The event log stays."""
    with _work(board, actor) as work:
        Task.objects.filter(board=work.board).delete()
        work.board.task_counter = 0
        work.blocked_before = set()  # nothing is left to report as unblocked
        work.reset = True
        work.record("reset", None)
    return Outcome(None, work.changes)


def board_create(*, slug: str, name: str = "") -> Board:
    """A new, empty board."""
    from django.core.validators import validate_slug

    slug = slug.strip()
    if not slug or len(slug) > 64:
        raise InvalidInput("slug: 1 to 64 characters")
    try:
        validate_slug(slug)
    except Exception as exc:
        raise InvalidInput("slug: letters, numbers, hyphens or underscores only") from exc
    if Board.objects.filter(slug=slug).exists():
        raise Conflict(f"Board {slug!r} already exists", code="exists")
    return Board.objects.create(slug=slug, name=_text("name", name or slug, 200, required=True))


# --- approval -------------------------------------------------------------------------------


def _request_approval(work: _Work, task: Task, reason: str) -> None:
    task.approval_state = ApprovalState.REQUESTED
    task.approval_requested_by = work.actor
    task.approval_requested_at = work.now
    task.approval_reason = reason
    task.approval_decided_by = ""
    task.approval_decided_at = None
    task.approval_note = ""
    task.version += 1
    task.updated_at = work.now
    task.save()
    work.record("approval_requested", task.number, reason=_shown(reason))
    work.change("approval_requested", task.number)


def approval_request(*, board: Board, agent: str, task_id: str | int, reason: str) -> Outcome:
    """An agent asks a person before doing something on a task ("about to run the migration")."""
    reason = _text("reason", reason, 2000, required=True)
    with _work(board, agent) as work:
        task = _task(work, task_id)
        if task.status in TERMINAL_STATUSES:
            raise Conflict(f"Task #{task.number} is {task.status}", code="terminal")
        if task.approval_state == ApprovalState.REQUESTED and task.approval_requested_by != agent:
            raise Conflict(
                f"Task #{task.number} awaits approval requested by {task.approval_requested_by}",
                code="awaiting_approval",
            )
        _request_approval(work, task, reason)
    return Outcome(task.number, work.changes)


def approval_decide(
    *, board: Board, person: str, task_id: str | int, approve: bool, note: str = ""
) -> Outcome:
    """A person approves or denies a pending request.

    Approving lets the requester's claim go through (owner + in progress) when
    the task can start; denying cancels the task with the note.
    """
    note = _text("note", note or "", 2000)
    with _work(board, person) as work:
        task = _task(work, task_id)
        if task.approval_state != ApprovalState.REQUESTED or task.status in TERMINAL_STATUSES:
            raise Conflict(
                f"Task #{task.number} is not awaiting approval", code="not_awaiting_approval"
            )
        requester = task.approval_requested_by
        task.approval_state = ApprovalState.APPROVED if approve else ApprovalState.DENIED
        task.approval_decided_by = person
        task.approval_decided_at = work.now
        task.approval_note = note
        fields: dict[str, Any] = {"requestedBy": requester}
        if approve:
            starts = (
                task.status == Status.PENDING
                and task.owner in ("", requester)
                and not _open_blockers(task)
            )
            if starts:
                fields["owner"] = {"from": task.owner, "to": requester}
                fields["status"] = {"from": task.status, "to": Status.IN_PROGRESS}
                task.owner = requester
                task.status = Status.IN_PROGRESS
        else:
            fields["status"] = {"from": task.status, "to": Status.CANCELLED}
            task.status = Status.CANCELLED
            task.completed_at = work.now
        task.version += 1
        task.updated_at = work.now
        task.save()
        work.record("approved" if approve else "denied", task.number, note=note, fields=fields)
        work.change("approved" if approve else "denied", task.number)
    return Outcome(task.number, work.changes)


def approval_require(*, board: Board, person: str, task_id: str | int, required: bool) -> Outcome:
    """A person marks a task as needing approval before it starts (or lifts that)."""
    with _work(board, person) as work:
        task = _task(work, task_id)
        if task.approval_required != required:
            task.approval_required = required
            if not required and task.approval_state == ApprovalState.REQUESTED:
                task.approval_state = ApprovalState.NONE
            task.version += 1
            task.updated_at = work.now
            task.save()
            work.record("updated", task.number, fields={"approvalRequired": {"to": required}})
            work.change("updated", task.number, fields=["approvalRequired"])
    return Outcome(task.number, work.changes)


# --- messages, agents, tokens ---------------------------------------------------------------


def message_send(
    *, board: Board, sender: str, recipient: str, body: str, task_id: str | int | None = None
) -> Message:
    """Queue a person's message for an agent, optionally about a task."""
    recipient = _text("recipient", recipient, NAME_MAX, required=True)
    body = _text("body", body, 10_000, required=True)
    with _work(board, sender) as work:
        number = _task(work, task_id).number if task_id is not None and task_id != "" else None
        message = Message.objects.create(
            board=work.board, recipient=recipient, sender=sender, task_number=number, body=body
        )
        work.record("message", number, to=recipient, body=_shown(body))
    return message


def inbox_read(*, board: Board, agent: str, ack: bool = False) -> list[Message]:
    """The agent's unread messages, oldest first; ``ack`` marks them read."""
    with transaction.atomic():
        messages = list(
            Message.objects.filter(board=board, recipient=agent, read_at__isnull=True).order_by(
                "created_at", "id"
            )
        )
        if ack and messages:
            Message.objects.filter(pk__in=[m.pk for m in messages]).update(read_at=timezone.now())
    return messages


def agent_seen(*, board: Board, agent: str, min_interval: float = 5.0) -> bool:
    """Note that ``agent`` called the board's API; True when the roster changed.

    Writes at most once per ``min_interval`` seconds per agent, so a busy agent
    does not turn every read into a write.
    """
    now = timezone.now()
    changed = bool(
        Agent.objects.filter(
            board=board, name=agent, last_seen__lt=now - timedelta(seconds=min_interval)
        ).update(last_seen=now)
    )
    if not changed:
        _, changed = Agent.objects.get_or_create(
            board=board, name=agent, defaults={"last_seen": now}
        )
    if changed:
        # The roster lives in the board's header: re-render it on every open board.
        events.publish(board, [], ())
    return changed


def token_issue(*, board: Board, agent: str = "", team: bool = False, created_by: str = "") -> str:
    """Issue an API token for the board; the raw token is returned once and never stored."""
    agent = _text("agent", agent, NAME_MAX).strip()
    if not team and not agent:
        raise InvalidInput("agent: a token is bound to an agent name, or is a team token")
    raw = "ak_" + secrets.token_urlsafe(32)
    AgentToken.objects.create(
        board=board,
        agent="" if team else agent,
        is_team=team,
        token_hash=hash_token(raw),
        prefix=raw[:10],
        created_by=created_by,
    )
    return raw


def token_revoke(*, board: Board, token_id: int) -> AgentToken:
    token = AgentToken.objects.filter(board=board, pk=token_id).first()
    if token is None:
        raise NotFound("Token not found", code="token_not_found")
    if token.revoked_at is None:
        AgentToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
        token.refresh_from_db()
    return token

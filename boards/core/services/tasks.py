"""Tasks: create, update, delete, claim, reassign, batch. Status rules are the state machine's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Case, F, When

from boards.core import limits
from boards.core.errors import InvalidInput, refuse
from boards.core.fields import CREATABLE, TASK_FIELDS, UPDATABLE, TaskField
from boards.core.selectors import task_to_dict, task_view
from boards.core.services import agents, costs, graph, lifecycle
from boards.core.services import labels as task_labels
from boards.core.services.work import (
    NAME_MAX,
    UNSET,
    Outcome,
    Work,
    shown,
    text,
    unit_of_work,
)
from boards.core.states import EventKind
from boards.models import PRIORITY_BY_NAME, Board, Dependency, Message, Priority, Status, Task

METADATA_MAX_KEYS = limits.METADATA_KEYS_MAX
METADATA_KEY_MAX = limits.METADATA_KEY_MAX
METADATA_VALUE_MAX = limits.METADATA_VALUE_MAX


def merge_metadata(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge key by key; a key set to ``None`` is removed. Values must be primitives."""
    merged = dict(current)
    for key, value in patch.items():
        if not isinstance(key, str) or not key or len(key) > METADATA_KEY_MAX:
            raise InvalidInput(
                f"metadata: keys are 1 to {METADATA_KEY_MAX} characters", field="metadata"
            )
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, bool | int | float | str):
            if isinstance(value, str) and len(value) > METADATA_VALUE_MAX:
                raise InvalidInput(
                    f"metadata.{key}: at most {METADATA_VALUE_MAX} characters",
                    field=f"metadata.{key}",
                )
            merged[key] = value
        else:
            raise InvalidInput(
                f"metadata.{key}: values must be strings, numbers, booleans or null",
                field=f"metadata.{key}",
            )
    if len(merged) > METADATA_MAX_KEYS:
        raise InvalidInput(f"metadata: at most {METADATA_MAX_KEYS} keys", field="metadata")
    return merged


def priority_value(name: str | None) -> int:
    """``"urgent"`` … ``"low"`` as stored (None: normal)."""
    if name is None:
        return Priority.NORMAL
    if name not in PRIORITY_BY_NAME:
        raise InvalidInput(f"priority: one of {', '.join(PRIORITY_BY_NAME)}", field="priority")
    return PRIORITY_BY_NAME[name]


def _plain_only(function: str, plain: Mapping[str, Any], rows: Sequence[TaskField]) -> None:
    """Refuse, as Python would, a keyword that is not one of ``rows`` (a caller's mistake:
    agents' inputs are checked by their models before they get here)."""
    unknown = sorted(set(plain) - {row.model for row in rows})
    if unknown:
        raise TypeError(f"{function}() got unexpected keyword arguments: {', '.join(unknown)}")


def _create(
    work: Work,
    *,
    metadata: Mapping[str, Any] | None = None,
    requires_approval: bool = False,
    priority: str | None = None,
    labels: Sequence[str] = (),
    session: str = "",
    client_plan: str = "",
    client_task_id: str = "",
    **plain: str,
) -> Task:
    """Create a task; ``plain``: its text fields (``TASK_FIELDS``) by model name, each
    checked as an update checks it (those not given start empty)."""
    _plain_only("_create", plain, TASK_FIELDS)
    values = {
        row.model: text(row.wire, plain.get(row.model, ""), row.limit, required=row.required)
        for row in TASK_FIELDS
    }
    work.board.task_counter += 1
    task = Task(
        board=work.board,
        number=work.board.task_counter,
        **values,
        metadata=merge_metadata({}, metadata or {}),
        created_by=work.actor,
        approval_required=requires_approval,
        priority=priority_value(priority),
        session=session,
        client_plan=client_plan,
        client_task_id=client_task_id,
    )
    work.created_task(task)
    task.save(force_insert=True)
    if labels:
        task_labels.apply(work, task, set_to=labels)
    work.created.add(task.number)
    work.record(EventKind.CREATED, task.number, subject=task.subject)
    work.change("created", task.number)
    return task


def task_create(
    *,
    board: Board,
    actor: str,
    blocked_by: Sequence[str | int] = (),
    blocks: Sequence[str | int] = (),
    parent_id: str | int | None = None,
    metadata: Mapping[str, Any] | None = None,
    requires_approval: bool = False,
    priority: str | None = None,
    labels: Sequence[str] = (),
    **plain: str,
) -> Outcome:
    """Create a pending task numbered from the board's high-water mark.

    ``plain``: the text fields a creation may set (``CREATABLE``: subject, required,
    description, active_form, prompt…) by model name. Its blockers, dependents and parent
    must exist on the board; a new edge that closes a cycle rolls the whole creation back.
    The outcome carries the new task's view (``Outcome.view``), built from the rows in
    hand at no cost in queries.
    """
    _plain_only("task_create", plain, CREATABLE)
    with unit_of_work(board, actor) as work:
        task = _create(
            work,
            **plain,
            metadata=metadata,
            requires_approval=requires_approval,
            priority=priority,
            labels=labels,
        )
        graph.link(work, task, blocked_by=blocked_by, blocks=blocks, parent_id=parent_id)
        work.answer = task  # as stored: the answer is built from it (``Work.answer``)
    return Outcome(task.number, work.changes, view=work.view)


def _check_version(work: Work, task: Task, expected: int | None) -> None:
    if expected is not None and expected != task.version:
        raise refuse(
            "stale_version",
            number=task.number,
            version=task.version,
            seen=expected,
            task=task_to_dict(task_view(work.board, task.number)),
        )


def _update(
    work: Work,
    task: Task,
    fields: Mapping[str, Any],
    *,
    refs: Mapping[str, int] | None = None,
    kind: str | None = None,
) -> list[str]:
    """Apply a partial update to a locked task; returns the public names of changed fields."""
    lifecycle.check_lease(work, task)
    _check_version(work, task, fields.get("expected_version"))
    diff: dict[str, Any] = {}
    was_status, was_owner = task.status, task.owner
    # Usage counts against the attempt it was spent in: added before any status change.
    usage = costs.add_usage(work, task, fields["usage"]) if fields.get("usage") else None

    if fields.get("priority") is not None:
        priority = priority_value(fields["priority"])
        if priority != task.priority:
            diff["priority"] = {"from": task.get_priority_display(), "to": fields["priority"]}
            task.priority = priority

    for row in UPDATABLE:
        name, public = row.model, row.wire
        if name in fields and fields[name] is not None:
            value = text(public, fields[name], row.limit, required=row.required)
            if name == "owner" and value != task.owner:
                value = agents.owner_name(work.board, value.strip())
                lifecycle.check_takeover(work, task, value)
            if value != getattr(task, name):
                diff[public] = {"from": shown(getattr(task, name)), "to": shown(value)}
                setattr(task, name, value)

    diff.update(
        task_labels.apply(
            work,
            task,
            set_to=fields.get("labels"),
            add=fields.get("add_labels") or (),
            remove=fields.get("remove_labels") or (),
        )
    )

    if fields.get("metadata") is not None:
        merged = merge_metadata(task.metadata, fields["metadata"])
        if merged != task.metadata:
            diff["metadata"] = {"from": task.metadata, "to": merged}
            task.metadata = merged

    if "parent_id" in fields:
        parent_ref = fields["parent_id"]
        parent = (
            None
            if parent_ref in (None, "")
            else graph.resolve(work, parent_ref, owner=task, field_name="parent_id", refs=refs)
        )
        if (parent.pk if parent else None) != task.parent_id:
            old_number = task.parent.number if task.parent is not None else None
            graph.set_parent(work, task, parent)
            diff["parentId"] = {
                "from": str(old_number) if old_number else None,
                "to": str(parent.number) if parent else None,
            }

    removed = graph.resolve_all(
        work, fields.get("remove_blocked_by") or (), owner=task, field_name="blocked_by", refs=refs
    )
    for blocker in removed:
        lifecycle.check_unlink(work, task, blocker)
    if graph.remove_blockers(work, task, removed):
        diff["removeBlockedBy"] = {"to": [str(t.number) for t in removed]}
    added = graph.resolve_all(
        work, fields.get("add_blocked_by") or (), owner=task, field_name="blocked_by", refs=refs
    )
    dependents = graph.resolve_all(
        work, fields.get("add_blocks") or (), owner=task, field_name="blocks", refs=refs
    )
    graph.add_edges(work, task, added, dependents)
    if added:
        diff["addBlockedBy"] = {"to": [str(t.number) for t in added]}
    if dependents:
        diff["addBlocks"] = {"to": [str(t.number) for t in dependents]}

    diff.update(lifecycle.content_changed(work, task, set(diff)))
    status = fields.get("status")
    if status is not None and status != task.status:
        diff.update(lifecycle.set_status(work, task, status))

    if not diff:
        if usage:
            costs.save_usage_only(work, task)
            return ["usage"]
        return []
    if usage:
        diff["usage"] = {"to": usage}
    lifecycle.settle(work, task, was_status, was_owner)
    work.save_task(
        task, kind or (EventKind.STATUS if "status" in diff else EventKind.UPDATED), fields=diff
    )
    return list(diff)


def _delete(work: Work, task: Task) -> None:
    lifecycle.check_lease(work, task)
    lifecycle.check_delete(work, task)
    work.uncount(task)
    for child in Task.objects.filter(parent=task):
        Task.objects.filter(pk=child.pk).update(
            parent=None, version=F("version") + 1, updated_at=work.now
        )
        work.record(
            EventKind.UPDATED,
            child.number,
            fields={"parentId": {"from": str(task.number), "to": None}},
        )
        work.change("updated", child.number, fields=["parentId"])
    _hand_down_blockers(work, task)
    dependents = work.status_changed(task)  # they lose a blocker
    blockers = list(task.blocked_by.values_list("number", flat=True))
    task.delete()
    work.deleted.add(task.number)
    work.touched.update(dependents + blockers)
    work.record(EventKind.DELETED, task.number, subject=task.subject)
    work.change("deleted", task.number)


def _hand_down_blockers(work: Work, task: Task) -> None:
    """Before ``task`` is deleted: its unfinished dependents inherit its open blockers
    (not completed), so deleting planned work never releases what waits on it past a
    blocker still open; each is a change of theirs the answer names."""
    open_numbers = graph.open_blockers(task)
    if not open_numbers:
        return
    blockers = list(Task.objects.filter(board=work.board, number__in=open_numbers))
    for dependent in Task.objects.filter(blocker_links__blocker=task).unfinished():
        own = set(Dependency.objects.filter(task=dependent).values_list("blocker_id", flat=True))
        new = sorted((b for b in blockers if b.pk not in own), key=lambda b: b.number)
        if not new:
            continue
        graph.add_edges(work, dependent, new, [])
        inherited = [str(b.number) for b in new]
        Task.objects.filter(pk=dependent.pk).update(version=F("version") + 1, updated_at=work.now)
        work.record(
            EventKind.UPDATED,
            dependent.number,
            fields={"addBlockedBy": {"to": inherited}},
            inheritedFrom=str(task.number),
        )
        work.change(
            "updated",
            dependent.number,
            fields=["addBlockedBy"],
            inheritedBlockedBy=inherited,
            inheritedFrom=str(task.number),
        )


def task_update(
    *,
    board: Board,
    actor: str,
    task_id: str | int,
    person: bool = False,
    approver: bool = True,
    status: str | None = None,
    add_blocked_by: Sequence[str | int] = (),
    remove_blocked_by: Sequence[str | int] = (),
    add_blocks: Sequence[str | int] = (),
    parent_id: Any = UNSET,
    metadata: Mapping[str, Any] | None = None,
    priority: str | None = None,
    expected_version: int | None = None,
    usage: Mapping[str, Any] | None = None,
    labels: Sequence[str] | None = None,
    add_labels: Sequence[str] = (),
    remove_labels: Sequence[str] = (),
    view: bool = False,
    **plain: str | None,
) -> Outcome:
    """Change any of a task's fields; ``status="deleted"`` deletes it. ``plain``: the text
    fields an update may set (``UPDATABLE``: subject, description, owner…) by model name;
    None leaves one as it is. ``view``: the outcome carries the task's view as the write
    left it (``Outcome.view``), for a door that answers with it (it reads the task's
    labels and children).

    Status changes go through the task state machine (``lifecycle``): going to
    ``in_progress`` fails like a claim would, and agents (``person=False``) are
    held to the approval gate. Completing a task unblocks its dependents
    (``auto_unblock`` changes); re-opening a completed one blocks them again
    (``auto_block``). A stale ``expected_version`` fails with 409 and the
    current task.
    """
    _plain_only("task_update", plain, UPDATABLE)
    fields: dict[str, Any] = {
        **plain,
        "status": status,
        "add_blocked_by": add_blocked_by,
        "remove_blocked_by": remove_blocked_by,
        "add_blocks": add_blocks,
        "metadata": metadata,
        "priority": priority,
        "expected_version": expected_version,
        "usage": usage,
        "labels": labels,
        "add_labels": add_labels,
        "remove_labels": remove_labels,
    }
    if parent_id is not UNSET:
        fields["parent_id"] = parent_id
    with unit_of_work(board, actor, person=person, approver=approver) as work:
        task = work.task(task_id)
        if status == "deleted":
            _check_version(work, task, expected_version)
            _delete(work, task)
            return_number = None
        else:
            _update(work, task, fields)
            return_number = task.number
            # Saved whole by ``_update`` (or unchanged): the row as stored, the answer's.
            work.answer, work.viewed = task, view
    return Outcome(return_number, work.changes, view=work.view)


def task_delete(*, board: Board, actor: str, task_id: str | int, person: bool = False) -> Outcome:
    """Delete a task and its edges; its number is never given out again (until a reset)."""
    with unit_of_work(board, actor, person=person) as work:
        _delete(work, work.task(task_id))
    return Outcome(None, work.changes)


def task_claim(
    *, board: Board, agent: str, task_id: str | int, lease_seconds: int | None = None
) -> Outcome:
    """Atomically make ``agent`` the owner of a task and start it (``lifecycle.claim``).

    A task that requires approval is not started: the claim records an
    approval request instead (``awaiting_approval``).
    """
    with unit_of_work(board, agent) as work:
        outcome = lifecycle.claim(work, work.task(task_id), lease_seconds=lease_seconds)
    return outcome


def task_claim_next(*, board: Board, agent: str, lease_seconds: int | None = None) -> Outcome:
    """Claim the ready task of highest priority, then lowest number, atomically.

    ``task_number`` is None when none is ready. Tasks that failed or timed out
    ``maxAttempts`` times wait for a person (needs attention) and are not offered.
    """
    with unit_of_work(board, agent) as work:
        candidates = (
            Task.objects.filter(board=work.board)
            .ready(work.board.max_attempts)
            .filter(owner__in=["", agent])
            # work assigned to this agent first, then the most urgent, then the oldest
            .order_by(Case(When(owner=agent, then=0), default=1), "priority", "number")
        )
        task = candidates.first()
        if task is not None:
            return lifecycle.claim(work, task, lease_seconds=lease_seconds)
    return Outcome(None, [])


def task_reassign(
    *, board: Board, actor: str, task_id: str | int, owner: str, person: bool = False
) -> Outcome:
    """Give a task to another owner (empty = unassigned); not for blocked or terminal tasks."""
    owner = text("owner", owner, NAME_MAX).strip()
    with unit_of_work(board, actor, person=person) as work:
        task = work.task(task_id)
        lifecycle.check_reassign(work, task)
        owner = agents.owner_name(work.board, owner)
        if owner == task.owner:
            return Outcome(task.number, work.changes)
        # Given to another: "assigned, not started" until it claims it (SPEC §12).
        task.assigned_at = work.now if owner and owner != actor else None
        if task.status == Status.IN_PROGRESS and owner:
            lifecycle.check_lease(work, task)
            lifecycle.check_takeover(work, task, owner)
            work.save_task(
                task, EventKind.REASSIGNED, fields=lifecycle.hand_over(work, task, owner)
            )
        else:
            _update(work, task, {"owner": owner}, kind=EventKind.REASSIGNED)
        if owner and owner != actor:
            _tell_assigned(work, task, owner)
    return Outcome(task.number, work.changes)


def _tell_assigned(work: Work, task: Task, owner: str) -> None:
    """The new owner hears of its task in its inbox (``unread`` on its next call)."""
    body = (
        f"#{task.number} “{task.subject}” was assigned to you by {work.actor}; "
        "start it with TaskClaim (claim-next offers it to you first)."
    )
    Message.objects.create(
        board=work.board, recipient=owner, sender=work.actor, task_number=task.number, body=body
    )
    work.record(EventKind.MESSAGE, task.number, to=owner, body=shown(body))


def _batch_create(work: Work, index: int, op: Mapping[str, Any], refs: dict[str, int]) -> Task:
    task = _create(
        work,
        **{row.model: op.get(row.model) or "" for row in CREATABLE},
        metadata=op.get("metadata"),
        requires_approval=bool(op.get("requires_approval")),
        priority=op.get("priority"),
        labels=op.get("labels") or (),
    )
    ref = op.get("ref")
    if ref:
        if ref in refs:
            raise InvalidInput(
                f"ops[{index}].ref: {ref!r} is used by an earlier operation",
                details=[
                    {"field": f"ops.{index}.ref", "message": "is used by an earlier operation"}
                ],
            )
        refs[ref] = task.number
    return task


# Edges one batch may name: each costs about half a millisecond under SQLite's write
# lock, so this keeps a batch's hold on the board near a second.
BATCH_MAX_EDGES = 2_000
EDGE_FIELDS = ("blocked_by", "blocks", "add_blocked_by", "remove_blocked_by", "add_blocks")


def task_batch(*, board: Board, actor: str, ops: Sequence[Mapping[str, Any]]) -> Outcome:
    """Apply create / update / delete operations all or nothing.

    Creates are numbered first, in order, so any operation may reference a
    created task by its ``ref``; the whole graph is checked for unknown
    references and cycles before anything is committed. At most
    ``BATCH_MAX_EDGES`` dependency references in all.
    """
    edges = sum(len(op.get(name) or ()) for op in ops for name in EDGE_FIELDS)
    if edges > BATCH_MAX_EDGES:
        raise InvalidInput(
            f"ops: at most {BATCH_MAX_EDGES} dependency references in one batch (got {edges}); "
            "split the plan into several batches",
            details=[{"field": "ops", "message": "too many dependencies"}],
        )
    with unit_of_work(board, actor) as work:
        refs: dict[str, int] = {}
        created = {
            index: _batch_create(work, index, op, refs)
            for index, op in enumerate(ops)
            if op["op"] == "create"
        }
        operations: list[dict[str, Any]] = []
        for index, op in enumerate(ops):
            entry: dict[str, Any]
            if op["op"] == "create":
                task = created[index]
                graph.link(
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
            else:
                task = work.task(op["task_id"], refs)
                fields = {k: v for k, v in op.items() if k not in ("op", "task_id")}
                if op["op"] == "delete" or fields.get("status") == "deleted":
                    _check_version(work, task, fields.get("expected_version"))
                    _delete(work, task)
                    entry = {"op": "delete", "taskId": str(task.number)}
                else:
                    changed = _update(work, task, fields, refs=refs)
                    entry = {"op": "update", "taskId": str(task.number), "fields": changed}
            operations.append(entry)
    return Outcome(None, work.changes, operations=operations)

"""The dependency graph and the hierarchy: references, edges, parents.

Every rule of SPEC §3.2 lives here: a referenced id exists on the same board, a
task never references itself, the graph stays acyclic, and errors say exactly
what is wrong (``Cycle detected: 3 → 5 → 3``,
``Task #2: blocked_by references unknown task #99``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from boards.core import numbers
from boards.core.errors import InvalidInput
from boards.core.services.work import Work
from boards.models import Dependency, Status, Task


def open_blockers(task: Task) -> list[int]:
    """Numbers of the task's blockers that are not completed, in order."""
    return sorted(
        Dependency.objects.filter(task=task)
        .exclude(blocker__status=Status.COMPLETED)
        .values_list("blocker__number", flat=True)
    )


def resolve(
    work: Work,
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
        number = numbers.id_number(ident, field=field_name)
    found = (
        Task.objects.filter(board=work.board, number=number).first() if number is not None else None
    )
    if found is None:
        raise InvalidInput(
            f"Task #{owner.number}: {field_name} references unknown task "
            f"#{str(numbers.task_text(ident))[:40]}",
            code="unknown_reference",
            details=[
                {
                    "field": field_name,
                    "message": "references an unknown task",
                    "taskId": str(owner.number),
                    "reference": str(ident),
                }
            ],
        )
    if found.pk == owner.pk:
        raise InvalidInput(
            f"Task #{owner.number}: {field_name} cannot reference the task itself",
            code="self_reference",
            details=[
                {
                    "field": field_name,
                    "message": "cannot reference the task itself",
                    "taskId": str(owner.number),
                }
            ],
        )
    return found


def resolve_all(
    work: Work,
    idents: Sequence[str | int],
    *,
    owner: Task,
    field_name: str,
    refs: Mapping[str, int] | None = None,
) -> list[Task]:
    return [resolve(work, i, owner=owner, field_name=field_name, refs=refs) for i in idents]


def add_edges(work: Work, task: Task, blockers: Sequence[Task], dependents: Sequence[Task]) -> None:
    """``task`` waits for ``blockers``; ``dependents`` wait for ``task``. Cycles are
    checked when the unit of work ends, so a batch may add edges in any order."""
    rows = [Dependency(board=work.board, task=task, blocker=b) for b in blockers]
    rows += [Dependency(board=work.board, task=d, blocker=task) for d in dependents]
    if rows:
        Dependency.objects.bulk_create(rows, ignore_conflicts=True)
        work.new_edges.extend((row.task.pk, row.blocker.pk) for row in rows)
        # Both ends: a dependent's flags, and whether its blocker is now waited on.
        work.recheck.update(pk for row in rows for pk in (row.task.pk, row.blocker.pk))
        work.touched.update(t.number for t in [*blockers, *dependents])


def remove_blockers(work: Work, task: Task, blockers: Sequence[Task]) -> bool:
    """Drop edges ``task`` → ``blockers``; whether any existed."""
    if not blockers:
        return False
    count, _ = Dependency.objects.filter(task=task, blocker__in=blockers).delete()
    if count:
        work.recheck.add(task.pk)
        work.recheck.update(b.pk for b in blockers)
        work.touched.update(t.number for t in blockers)
    return bool(count)


def set_parent(work: Work, task: Task, parent: Task | None) -> None:
    """Make ``parent`` the task's parent (None clears it); a loop in the hierarchy is refused."""
    if parent is not None:
        chain = [task.number, parent.number]
        cursor = parent
        while cursor.parent_id is not None:
            cursor = Task.objects.get(pk=cursor.parent_id)
            chain.append(cursor.number)
            if cursor.pk == task.pk:
                raise InvalidInput(
                    "Cycle detected in parentId: " + " → ".join(str(n) for n in chain),
                    field="parentId",
                    code="cycle",
                    cycle=[str(n) for n in chain],
                )
    old = task.parent
    task.parent = parent
    work.touched.update(t.number for t in (old, parent) if t is not None)


def link(
    work: Work,
    task: Task,
    *,
    blocked_by: Sequence[str | int] = (),
    blocks: Sequence[str | int] = (),
    parent_id: str | int | None = None,
    refs: Mapping[str, int] | None = None,
) -> None:
    """Wire a new task into the graph: its blockers, its dependents and its parent."""
    blockers = resolve_all(work, blocked_by, owner=task, field_name="blocked_by", refs=refs)
    dependents = resolve_all(work, blocks, owner=task, field_name="blocks", refs=refs)
    add_edges(work, task, blockers, dependents)
    if parent_id is not None:
        set_parent(
            work, task, resolve(work, parent_id, owner=task, field_name="parent_id", refs=refs)
        )
        task.save(update_fields=["parent"])

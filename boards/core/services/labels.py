"""A task's labels: checked (the agent-name character rules, case-insensitive: stored
lower-case), at most ``LABELS_MAX`` a task, set, added and removed in the unit of work."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from boards.core.errors import InvalidInput
from boards.core.services.work import Work
from boards.models import LABELS_MAX, Label, Task, agent_name_problem


def clean(values: Iterable[str], *, field: str) -> list[str]:
    """Labels as stored: each checked, lower-case, in the order given, without repeats."""
    names: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidInput(f"{field}: each label is a string", field=field)
        problem = agent_name_problem(value)
        if problem:
            raise InvalidInput(f"{field}: label {value[:64]!r}: {problem}", field=field)
        name = value.lower()
        if name not in names:
            names.append(name)
    return names


def of(task: Task) -> list[str]:
    return sorted(Label.objects.filter(task=task).values_list("name", flat=True))


def apply(
    work: Work,
    task: Task,
    *,
    set_to: Sequence[str] | None = None,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
    field: str = "labels",
) -> dict[str, Any]:
    """Change the task's labels; returns the diff (``{"labels": {"from", "to"}}``) or {}."""
    if set_to is None and not add and not remove:
        return {}
    before = of(task)
    after = clean(set_to, field=field) if set_to is not None else list(before)
    after += [n for n in clean(add, field="addLabels") if n not in after]
    gone = set(clean(remove, field="removeLabels"))
    after = sorted(n for n in after if n not in gone)
    if len(after) > LABELS_MAX:
        raise InvalidInput(
            f"{field}: at most {LABELS_MAX} labels a task (this would make {len(after)})",
            field=field,
        )
    work.labels[task.pk] = after
    if after == before:
        return {}
    Label.objects.filter(task=task).exclude(name__in=after).delete()
    Label.objects.bulk_create(
        [Label(board=work.board, task=task, name=n) for n in after if n not in before]
    )
    return {"labels": {"from": before, "to": after}}

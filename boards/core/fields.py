"""A task's public fields, one row each: the model field, the name agents send and read,
its limit, who may set it, and where the panel shows it.

The services' updates, the public task shape (``present.task_to_dict``) and the board's
panel read this table; a new plain field is a row here, the model field with its
migration, the tool input model's field (``boards.agents.schemas``) and a test
(docs/recipes.md). Fields with rules of their own (status, blockers, parent, approval,
labels, priority, usage) are kept by their services and are not rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from boards.core.limits import LONG_TEXT_MAX, NAME_MAX, SUBJECT_MAX


@dataclass(frozen=True)
class TaskField:
    model: str  # the Task model's field
    wire: str  # the name in tool inputs and answers (camelCase)
    limit: int  # at most this many characters
    # Who may set it after creation: anyone who may update the task, or nobody
    # (it is set when the task is created, or by its own service).
    updatable: bool = True
    required: bool = False
    # How the task's panel shows it: a heading over wrapped text, preformatted text,
    # or not at all (shown elsewhere, like the subject in the header).
    panel: Literal["text", "pre", ""] = ""
    label: str = ""


TASK_FIELDS: tuple[TaskField, ...] = (
    TaskField("subject", "subject", SUBJECT_MAX, required=True),
    TaskField("description", "description", LONG_TEXT_MAX, panel="text", label="Description"),
    TaskField("active_form", "activeForm", SUBJECT_MAX),
    TaskField("prompt", "prompt", LONG_TEXT_MAX, panel="pre", label="Prompt"),
    TaskField("result", "result", LONG_TEXT_MAX, panel="pre", label="Result"),
    TaskField("notes", "notes", LONG_TEXT_MAX, panel="text", label="Notes"),
    TaskField("owner", "owner", NAME_MAX),
)

UPDATABLE = tuple(f for f in TASK_FIELDS if f.updatable)
PANEL = tuple(f for f in TASK_FIELDS if f.panel)

"""A task's public fields, one row each: the model field, the name agents send and read,
its limit, who may set it, what the tool inputs say of it, and where the panel shows it.

The services (create and update), the tool inputs (``boards.agents.schemas``), the answer
model (``boards.agents.answers.Task``), the public task shape (``present.task_to_dict``)
and the board's panel read this table; a new plain text field is a row here, the model
field with its migration, and a test (docs/recipes.md). Fields with rules of their own
(status, blockers, parent, approval, labels, priority, usage, metadata) are kept by their
services and are not rows.
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
    # Whether agents may set it when they create a task (TaskCreate, TaskBatch's creates);
    # else it starts empty and an update sets it (a result, notes, the owner).
    creatable: bool = True
    # Required: never empty, surrounding spaces stripped (the subject).
    required: bool = False
    # What the tool inputs' JSON Schema says of it: on the create inputs; on the update
    # inputs only ``update_help`` (most fields need none there: the create's says it).
    help: str = ""
    update_help: str = ""
    # How the task's panel shows it: a heading over wrapped text, preformatted text,
    # or not at all (shown elsewhere, like the subject in the header).
    panel: Literal["text", "pre", ""] = ""
    label: str = ""
    # A change to it alone leaves the board's header (counts, approvals, roster) as it
    # was, so the header is not rendered again (``events.changes_header``).
    quiet: bool = False


TASK_FIELDS: tuple[TaskField, ...] = (
    TaskField(
        "subject",
        "subject",
        SUBJECT_MAX,
        required=True,
        help='Short imperative title, e.g. "Fix auth bug".',
    ),
    TaskField(
        "description",
        "description",
        LONG_TEXT_MAX,
        help="What needs to be done, in detail.",
        panel="text",
        label="Description",
        quiet=True,
    ),
    TaskField(
        "active_form",
        "activeForm",
        SUBJECT_MAX,
        help='Present participle shown while in progress, e.g. "Fixing auth bug".',
        quiet=True,
    ),
    TaskField(
        "prompt",
        "prompt",
        LONG_TEXT_MAX,
        help="Full instructions for the agent that will do the task.",
        panel="pre",
        label="Prompt",
        quiet=True,
    ),
    TaskField(
        "result",
        "result",
        LONG_TEXT_MAX,
        creatable=False,
        update_help="The task's output; set it when completing.",
        panel="pre",
        label="Result",
        quiet=True,
    ),
    TaskField(
        "notes", "notes", LONG_TEXT_MAX, creatable=False, panel="text", label="Notes", quiet=True
    ),
    TaskField(
        "owner",
        "owner",
        NAME_MAX,
        creatable=False,
        update_help="Agent name (or empty to unassign). Prefer TaskClaim / TaskReassign.",
    ),
)

UPDATABLE = tuple(f for f in TASK_FIELDS if f.updatable)
CREATABLE = tuple(f for f in TASK_FIELDS if f.creatable)
PANEL = tuple(f for f in TASK_FIELDS if f.panel)

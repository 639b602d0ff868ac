"""The tools' answers as pydantic models: the one source of their output schemas (MCP
``outputSchema``, the HTTP tool listing's ``output_schema``); each canonical tool names
its own in its ``@tool`` declaration (``boards.agents.handlers``).

The answers themselves are built as plain dicts by ``boards.agents.handlers``; the tests
validate every answer against these schemas, and MCP clients validate what they
receive. Objects allow properties beyond the ones listed (answers grow; a client
must not break on a new field), but every listed field is always present unless it
has a default here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from boards.core.fields import TASK_FIELDS


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


Status = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
Stamp = str | None  # ISO 8601, UTC, or null


class Usage(_Open):
    inputTokens: int
    outputTokens: int
    costUsd: float


class Approval(_Open):
    required: bool
    state: Literal["none", "requested", "approved", "denied"]
    requestedBy: str | None
    requestedAt: Stamp
    reason: str | None
    decidedBy: str | None
    decidedAt: Stamp
    note: str | None
    version: int | None


class Lease(_Open):
    expiresAt: Stamp


class Attempt(_Open):
    n: int
    agent: str | None
    startedAt: Stamp
    endedAt: Stamp
    outcome: str | None
    result: str | None
    notes: str | None
    usage: Usage


class ReadinessStep(_Open):
    id: str
    status: Status
    owner: str
    waitsOn: list[str]
    canMove: bool
    waitsForPerson: bool = Field(
        False, description="Only a person can move it on: an approval asked, a dead end."
    )


class Readiness(_Open):
    ready: bool
    reason: str
    chain: list[ReadinessStep]
    movable: list[str]
    waitsForPerson: list[str] = Field(
        default_factory=list, description="The tasks (this one too) that wait for a person."
    )


class TaskSummary(_Open):
    """A task as lists show it (``detail: false``)."""

    id: str
    subject: str
    status: Status
    blocked: bool
    owner: str
    blockedBy: list[str]
    activeForm: str | None = None
    parentId: str | None = None
    approval: Any = Field(None, description="The approval state (summaries) or object (full).")
    labels: list[str] | None = Field(None, description="Its labels (lower-case), when it has any.")
    priority: Literal["urgent", "high", "normal", "low"] | None = Field(
        None, description="Summaries name it when it is not normal."
    )
    stuckOn: list[str] | None = None
    needsAttention: bool | None = None
    depth: int | None = Field(None, description="Its depth in a tree view (``view: tree``).")
    session: str | None = Field(
        None, description="The coding client's session whose own plan holds it (SPEC §11)."
    )
    clientTaskId: str | None = Field(None, description="That client's own id for the task.")


# A whole task carries every plain field (``TASK_FIELDS``) as text, always: the summary
# declares those lists show (subject, owner, activeForm), the rest are made from the table.
# mypy cannot see fields made at run time: it is shown the base they are made on.
if TYPE_CHECKING:
    _TaskText = TaskSummary
else:
    _TaskText = create_model(
        "_TaskText",
        __base__=TaskSummary,
        **{f.wire: (str, ...) for f in TASK_FIELDS if f.wire not in TaskSummary.model_fields},
    )


class Task(_TaskText):
    """A whole task (TaskGet, written tasks, ``detail: true``)."""

    createdBy: str
    blocks: list[str]
    metadata: dict[str, Any]
    priority: Literal["urgent", "high", "normal", "low"]
    stuck: bool
    stuckOn: list[str]
    attempt: int
    lease: Lease | None
    needsAttention: bool
    attention: str | None
    needs: str | None = Field(
        None,
        description="Why a person must decide (approval, failed, stranded, not_started, "
        "no_progress), or null.",
    )
    usage: Usage
    version: int
    createdAt: str
    updatedAt: str
    completedAt: Stamp
    children: list[str] | None = Field(None, description="Its subtasks (TaskGet).")


class FullTask(Task):
    """TaskGet's task: with its attempts, approval history and readiness."""

    attempts: list[Attempt]
    readiness: Readiness


class Change(_Open):
    type: str
    taskId: str | None = None


class Written(_Open):
    """A write's answer: the task as it now is, and every change the write made."""

    task: Task | None
    changes: list[Change]
    awaitingApproval: bool = False
    message: str | None = None


class TaskGetAnswer(_Open):
    task: FullTask


class TaskListAnswer(_Open):
    total: int = Field(description="Tasks matching the filters, over every page.")
    counts: dict[str, int]
    nextCursor: str | None
    tasks: list[TaskSummary] | None = None
    text: str | None = None


class BatchAnswer(_Open):
    operations: list[dict[str, Any]]
    changes: list[Change]
    counts: dict[str, int]


class WatchAnswer(_Open):
    task: Task | None
    timedOut: bool
    deleted: bool = False


class Message(_Open):
    id: int
    from_: str = Field(alias="from")
    taskId: str | None
    body: str
    sentAt: str


class InboxAnswer(_Open):
    messages: list[Message]
    acknowledged: bool


class HeldLease(_Open):
    taskId: str
    lease: Lease


class HeartbeatAnswer(_Open):
    leases: list[HeldLease]

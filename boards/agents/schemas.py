"""Tool inputs as strict pydantic models: the one source of validation, of the tool
definitions agents read (Anthropic and OpenAI formats) and of the OpenAPI document.

The registry the inputs are declared in (``@tool``, ``Tool``, ``TOOLS``, ``Hints``) is
``boards.agents.registry`` and the OpenAPI document ``boards.agents.openapi``; their names are
re-exported here, so ``schemas.X`` stays the one place a door looks a tool up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    create_model,
)
from pydantic.alias_generators import to_camel

from boards.agents.openapi import openapi_document
from boards.agents.registry import (
    TOOLS,
    Handler,
    Hints,
    Tool,
    ToolInput,
    definition,
    one_paragraph,
    strict_schema,
    tool,
    tool_definitions,
)
from boards.core import limits, numbers
from boards.core.fields import CREATABLE, UPDATABLE, TaskField

# The registry's names, re-exported for the doors that read them as ``schemas.X``.
__all__ = [
    "TOOLS",
    "Handler",
    "Hints",
    "Tool",
    "ToolInput",
    "definition",
    "one_paragraph",
    "openapi_document",
    "strict_schema",
    "tool",
    "tool_definitions",
]


# StringConstraints first, so its pattern shows in the published JSON Schema.
TaskId = Annotated[
    str,
    StringConstraints(pattern=f"^{numbers.ID_PATTERN}$"),
    BeforeValidator(numbers.task_text),
    Field(description='A task id, e.g. "3".', json_schema_extra={"examples": ["3"]}),
]
# In a batch an operation may name a task created earlier in the same batch by its ref.
TaskRef = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.REF_MAX),
    BeforeValidator(numbers.task_text),
    Field(description='A task id ("3") or the ref of a create in the same batch ("api").'),
]
Ref = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=limits.REF_MAX,
        pattern=r"^[A-Za-z0-9_.:-]*[A-Za-z_.:-][A-Za-z0-9_.:-]*$",
    ),
    Field(description='Your name for a task created in this batch, e.g. "db"; not all digits.'),
]
Subject = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.SUBJECT_MAX, strip_whitespace=True)
]
Long = Annotated[str, StringConstraints(max_length=limits.LONG_TEXT_MAX)]
Name = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.NAME_MAX, strip_whitespace=True)
]
OwnerName = Annotated[str, StringConstraints(max_length=limits.NAME_MAX)]
MetaKey = Annotated[str, StringConstraints(min_length=1, max_length=limits.METADATA_KEY_MAX)]
MetaValue = (
    Annotated[str, StringConstraints(max_length=limits.METADATA_VALUE_MAX)]
    | StrictInt
    | StrictFloat
    | StrictBool
    | None
)
Metadata = Annotated[
    dict[MetaKey, MetaValue],
    Field(
        max_length=limits.METADATA_KEYS_MAX,
        description="Flat JSON object of strings, numbers and booleans. On update, keys are "
        "merged into the existing metadata and a key set to null is removed.",
    ),
]
IdList = Annotated[list[TaskId], Field(max_length=limits.IDS_MAX)]
RefList = Annotated[list[TaskRef], Field(max_length=limits.IDS_MAX)]
Status = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
PriorityName = Literal["urgent", "high", "normal", "low"]
PRIORITY_HELP = "urgent, high, normal (the default) or low; claim-next takes the highest first."


class CanonicalInput(ToolInput):
    """A canonical tool's input: snake_case fields for the services, camelCase on the wire.

    Agents send (and the JSON Schemas publish) only the camelCase aliases (``activeForm``);
    ``model_dump()`` gives the services their keyword arguments (``active_form``).
    """

    model_config = ConfigDict(alias_generator=to_camel)


LabelName = Annotated[str, StringConstraints(min_length=1, max_length=limits.LABEL_MAX)]
LabelList = Annotated[list[LabelName], Field(max_length=limits.LABELS_MAX)]
LABELS_HELP = (
    f"Labels (at most {limits.LABELS_MAX}; letters, digits, '.', '_', '-' and spaces; case does not matter), "
    "to group and find tasks."
)


def _text(row: TaskField) -> Any:
    """A plain field's type: text within its limit; a required one stripped and not empty."""
    if row.required:
        return Annotated[
            str, StringConstraints(min_length=1, max_length=row.limit, strip_whitespace=True)
        ]
    return Annotated[str, StringConstraints(max_length=row.limit)]


def _text_fields(*, update: bool, described: bool = True) -> dict[str, Any]:
    """The plain fields (``TASK_FIELDS``) as pydantic field definitions, in the table's order:
    on a create input the rows agents may set (empty unless sent; a required one must be
    sent), on an update input the rows an update may set (None: left as it is)."""
    fields: dict[str, Any] = {}
    for row in UPDATABLE if update else CREATABLE:
        said = (row.update_help if update else row.help) if described else ""
        if update:
            fields[row.model] = (_text(row) | None, Field(None, description=said or None))
        else:
            default = ... if row.required else ""
            fields[row.model] = (_text(row), Field(default, description=said or None))
    return fields


class _BatchCreateHead(CanonicalInput):
    # A batch's operation says first what it is.
    op: Literal["create"]
    ref: Ref | None = None


# The plain fields come first in the inputs, generated from the table, and the models below
# add the fields with rules of their own. mypy cannot see fields made at run time: it is
# shown the base they are made on.
if TYPE_CHECKING:
    _CreateText = CanonicalInput
    _UpdateText = CanonicalInput
    _BatchCreateText = _BatchCreateHead
else:
    _CreateText = create_model("_CreateText", __base__=CanonicalInput, **_text_fields(update=False))
    _UpdateText = create_model("_UpdateText", __base__=CanonicalInput, **_text_fields(update=True))
    # A batch's creates are not described one by one: TaskCreate's descriptions say it.
    _BatchCreateText = create_model(
        "_BatchCreateText", __base__=_BatchCreateHead, **_text_fields(update=False, described=False)
    )


class TaskCreateInput(_CreateText):
    """Create a task on the shared board. Use it to plan: one task per concrete step,
    with an imperative subject and, for work someone else will do, a prompt.
    Express ordering with blockedBy (ids that must complete first) instead of
    writing it in the text; use parentId for sub-steps of a bigger task.
    Returns {task, changes}; the new id is task.id. New tasks are pending and
    unassigned: claim one with TaskClaim to start it. To create several related
    tasks at once, prefer TaskBatch (atomic, with refs). Set requiresApproval for
    risky steps a person must approve first."""

    blocked_by: IdList = Field([], description="Ids of tasks that must complete before this one.")
    blocks: IdList = Field(
        [], description="Ids of tasks that cannot start until this one completes."
    )
    parent_id: TaskId | None = Field(None, description="Id of the parent task (hierarchy).")
    metadata: Metadata | None = None
    requires_approval: StrictBool = Field(
        False, description="When true, a person must approve before anyone can start the task."
    )
    priority: PriorityName = Field("normal", description=PRIORITY_HELP)
    labels: LabelList = Field([], description=LABELS_HELP)


class TaskGetInput(CanonicalInput):
    """Read one task in full: description, prompt, result, notes, metadata, owner,
    blockedBy / blocks, children, approval and version. Use it before working on a
    task you did not create, or to read another agent's result."""

    task_id: TaskId


class UsageInput(CanonicalInput):
    """What the work cost the agent since its last report (added up by the board)."""

    # The services take usage as the mapping agents send: dumped by its camelCase names.
    model_config = ConfigDict(serialize_by_alias=True)

    input_tokens: StrictInt = Field(0, ge=0, le=limits.TOKENS_MAX, description="Input tokens used.")
    output_tokens: StrictInt = Field(
        0, ge=0, le=limits.TOKENS_MAX, description="Output tokens used."
    )
    cost_usd: float = Field(0, ge=0, le=int(limits.COST_MAX), description="Cost in US dollars.")
    model: Annotated[str, StringConstraints(max_length=limits.MODEL_MAX)] = Field(
        "", description="The model that did the work."
    )


USAGE_HELP = (
    "Usage since your last report on this task (added up per task, attempt and agent; "
    "counts against the board's budget)."
)


class _UpdateFields(_UpdateText):
    status: (
        Literal["pending", "in_progress", "completed", "failed", "cancelled", "deleted"] | None
    ) = Field(None, description='New status; "deleted" deletes the task.')
    add_blocked_by: IdList = Field([], description="Add blockers: tasks that must complete first.")
    remove_blocked_by: IdList = Field([], description="Remove blockers.")
    add_blocks: IdList = Field([], description="Add dependents: tasks waiting for this one.")
    parent_id: TaskId | None = Field(None, description="New parent id, or null to clear it.")
    metadata: Metadata | None = None
    priority: PriorityName | None = Field(None, description=PRIORITY_HELP)
    expected_version: Annotated[StrictInt, Field(ge=1)] | None = Field(
        None, description="Fail with 409 unless the task is still at this version."
    )
    usage: UsageInput | None = Field(None, description=USAGE_HELP)
    labels: LabelList | None = Field(None, description="Replace the labels. " + LABELS_HELP)
    add_labels: LabelList = Field([], description="Labels to add.")
    remove_labels: LabelList = Field([], description="Labels to remove.")


class TaskUpdateInput(_UpdateFields):
    """Change a task. Mark progress with status (in_progress → completed, or failed / cancelled);
    set result when you complete; 'deleted' removes the task. Completing a task unblocks its
    dependents automatically (listed as auto_unblock changes). Only fields you send change;
    metadata is merged key by key and null removes a key. Moving a blocked task or one awaiting
    approval to in_progress fails with 409, as does finishing or deleting a task that is still
    blocked, or changing the status of another agent's live task. Pass expectedVersion to make
    sure you do not overwrite someone else's change. To start work on a task prefer TaskClaim,
    which also sets you as owner atomically."""

    task_id: TaskId


class TaskListInput(CanonicalInput):
    """List the board's tasks with counts. Use view 'ready' to find work you can claim now, 'open'
    for everything unfinished, 'blocked' / 'in_progress' / 'done' for the rest; filter by
    status, owner, blocked or parentId; tree: true orders sub-tasks under their parent with a
    depth. query searches the tasks' text (subject, description, notes, result, prompt) and
    composes with every filter: results come best match first, each with a match snippet
    (matched words in **bold**). format 'text' gives one compact line per task ('#2. [ ] Write
    tests  blocked by: #1'), cheaper to read than JSON. Tasks are summaries (id, subject,
    status, blocked, owner, blockedBy…; detail: true for full tasks, or TaskGet) in pages of
    limit (default 100), in id order (a search: in rank order, paged by position): when
    nextCursor is not null, call again with the same input and cursor: nextCursor for the
    rest. total counts every match; counts are the whole board's."""

    view: Literal[
        "all", "open", "ready", "blocked", "stuck", "in_progress", "done", "needs_person"
    ] = Field(
        "all",
        description="open = pending or in progress; ready = pending, unblocked, not awaiting "
        "approval (work you can claim now); stuck = waiting on a blocker that failed or was "
        "cancelled (a person must decide); done = completed, failed or cancelled; "
        "needs_person = waiting for a person's decision (approval, failed, stranded, not "
        "started).",
    )
    status: Status | None = None
    owner: OwnerName | None = None
    blocked: StrictBool | None = None
    parent_id: TaskId | None = None
    label: LabelName | None = Field(None, description="Only tasks with this label.")
    query: Annotated[str, StringConstraints(max_length=limits.QUERY_MAX)] | None = Field(
        None,
        description="Words to find in the tasks' text; each word also matches longer words "
        'it starts ("migr" finds "migration"), every word must be found. Operators and '
        f"punctuation are ignored. At most {limits.QUERY_MAX} characters.",
    )
    tree: StrictBool = Field(False, description="Order depth-first by parent, with a depth field.")
    format: Literal["json", "text"] = Field(
        "json",
        description='"text" answers compact lines like "#2. [ ] Write tests  blocked by: #1".',
    )
    limit: StrictInt = Field(
        limits.LIST_PAGE,
        ge=1,
        le=limits.LIST_MAX,
        description=f"Tasks per page (1 to {limits.LIST_MAX}, default {limits.LIST_PAGE}).",
    )
    cursor: Annotated[str, StringConstraints(max_length=100)] | None = Field(
        None, description="nextCursor from the previous page, to read the next one."
    )
    detail: StrictBool = Field(
        False,
        description="Full tasks (description, prompt, result…) instead of summaries; "
        "prefer TaskGet for the few you need.",
    )


class TaskClaimInput(CanonicalInput):
    """Take a task and start it: atomically sets you as owner and status in_progress, with a lease
    (task.lease.expiresAt) that your tool calls renew; if you go silent past it the task returns
    to pending. Omit taskId to claim the ready task of highest priority (returns task: null when
    nothing is ready). Fails with 409 when the task is blocked, owned by another agent,
    finished, or awaiting someone else's approval; claiming your own task again is a no-op. When
    the task requires approval, the claim asks a person instead and answers 202 with
    awaitingApproval: true; call TaskWatch to wait for the decision before doing the work."""

    task_id: TaskId | None = Field(
        None,
        description="The task to claim. Omit it to claim the ready task of highest priority "
        "(then lowest number).",
    )
    lease_seconds: StrictInt | None = Field(
        None,
        ge=limits.LEASE_MIN,
        le=limits.LEASE_MAX,
        description="How long your claim lasts without a tool call from you "
        f"({limits.LEASE_MIN} to {limits.LEASE_MAX}; "
        "default: the board's setting). Any call renews it; TaskHeartbeat during long work.",
    )


class TaskHeartbeatInput(CanonicalInput):
    """Keep your claims alive during long silent work. Every claim has a lease
    (task.lease.expiresAt); any tool call of yours renews all of them, and when one lapses the
    task goes back to pending for another agent and your next write to it fails with 409
    lease_lost. Call this when you work for a long time without other calls. Returns {leases:
    [{taskId, lease: {expiresAt}}]}."""

    task_id: TaskId | None = Field(
        None, description="Renew the lease on this task only (default: all your leases)."
    )
    usage: UsageInput | None = Field(None, description=USAGE_HELP + " Needs taskId.")


class TaskReassignInput(CanonicalInput):
    """Hand a task over to another agent (overrides the owner). Not allowed for blocked or finished
    tasks. The new owner starts it with TaskClaim."""

    task_id: TaskId
    owner: Name = Field(description="The agent that takes the task over.")


class BatchCreate(_BatchCreateText):
    blocked_by: RefList = []
    blocks: RefList = []
    parent_id: TaskRef | None = None
    metadata: Metadata | None = None
    requires_approval: StrictBool = False
    priority: PriorityName = "normal"
    labels: LabelList = []


class BatchUpdate(_UpdateFields):
    op: Literal["update"]
    task_id: TaskRef
    add_blocked_by: RefList = []
    remove_blocked_by: RefList = []
    add_blocks: RefList = []
    parent_id: TaskRef | None = None


class BatchDelete(CanonicalInput):
    op: Literal["delete"]
    task_id: TaskRef


BatchOp = Annotated[BatchCreate | BatchUpdate | BatchDelete, Field(discriminator="op")]


class TaskBatchInput(CanonicalInput):
    """Apply many create / update / delete operations atomically: all succeed or none do. Give
    creates a ref (e.g. 'db') and use that ref in later blockedBy, blocks, parentId or taskId
    fields of the same batch. The whole dependency graph is checked first: an unknown reference
    or a cycle rejects the batch with a message like 'Cycle detected: 3 → 5 → 3'. Returns
    {operations, changes, counts}."""

    ops: Annotated[list[BatchOp], Field(min_length=1, max_length=limits.BATCH_OPS_MAX)]


WATCH_DEFAULT_SECONDS = limits.WATCH_DEFAULT_SECONDS


class TaskWatchInput(CanonicalInput):
    """Wait until a task finishes (completed, failed or cancelled) or a person decides its pending
    approval, then return the task; or return at timeoutSeconds (default 45, at most 300) with
    timedOut: true: then call it again to keep waiting. Use it to wait for another agent's
    result or for approval instead of polling TaskGet."""

    task_id: TaskId
    timeout_seconds: Annotated[float, Field(ge=0, le=limits.WATCH_MAX_SECONDS)] = Field(
        WATCH_DEFAULT_SECONDS,
        description=f"Give up after this many seconds (default {WATCH_DEFAULT_SECONDS}, at most "
        f"{limits.WATCH_MAX_SECONDS}) with timedOut: true; then call again to keep waiting.",
    )


class TaskRequestApprovalInput(CanonicalInput):
    """Ask a person to approve before you do something risky on a task ('about to run the migration
    — ok?'). The request shows on the board; wait for the answer with TaskWatch. If denied, the
    task is cancelled with the person's note."""

    task_id: TaskId
    reason: Annotated[
        str,
        StringConstraints(
            min_length=1, max_length=limits.APPROVAL_REASON_MAX, strip_whitespace=True
        ),
    ]


class InboxReadInput(CanonicalInput):
    """Read messages people sent you (oldest first). Every tool answer carries unreadMessages: when
    it is above 0, call InboxRead with ack: true and follow the instructions before going on."""

    ack: StrictBool = Field(False, description="Mark the returned messages as read.")


def _subclasses(model: type[BaseModel]) -> list[type[BaseModel]]:
    return [model, *(m for sub in model.__subclasses__() for m in _subclasses(sub))]


# The services name a field as Python does (blocked_by); agents of a canonical tool sent it
# by its name on the wire (blockedBy).
WIRE_NAMES = {
    name: to_camel(name)
    for model in _subclasses(CanonicalInput)
    for name in model.model_fields
    if to_camel(name) != name
}


def wire_path(path: str) -> str:
    """A field path as a canonical tool's agent spells it (``ops.0.blocked_by`` →
    ``ops.0.blockedBy``); the agent's own keys inside ``metadata`` stay as they are."""
    parts = path.split(".")
    for index, part in enumerate(parts):
        if part == "metadata":
            break
        parts[index] = WIRE_NAMES.get(part, part)
    return ".".join(parts)

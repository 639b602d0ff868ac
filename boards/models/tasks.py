"""A board and its tasks: the task rows, their attempts, dependencies and labels, the event
log, and what the unit of work keeps per day (flow) and per report (usage)."""

from django.db import models

from boards.core import limits, states
from boards.core.rules import TaskQuerySet

# The vocabulary of states lives in boards.core.states; the names are read from here too.
GONE_FACTOR = states.GONE_FACTOR
PRIORITY_BY_NAME = states.PRIORITY_BY_NAME
TERMINAL_STATUSES = states.TERMINAL_STATUSES
UNFINISHED = states.UNFINISHED
AgentState = states.AgentState
ApprovalState = states.ApprovalState
EventKind = states.EventKind
Priority = states.Priority
Reason = states.Reason
Status = states.Status
agent_state = states.agent_state


class Board(models.Model):
    slug = models.SlugField(max_length=limits.SLUG_MAX, unique=True)
    name = models.CharField(max_length=limits.BOARD_NAME_MAX)
    # Work settings (the board's settings page; None means the server's default / no limit).
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    max_in_progress_per_agent = models.PositiveIntegerField(null=True, blank=True)
    max_in_progress = models.PositiveIntegerField(null=True, blank=True)
    # An agent with no call for this long is silent, for ten times as long gone (SPEC §12);
    # a failed blocker may be retried by its agents for failure_grace_seconds first.
    silent_after_seconds = models.PositiveIntegerField(default=120)
    failure_grace_seconds = models.PositiveIntegerField(default=60)
    # Approving its gated tasks needs a passkey assertion, from a person who has one (§14).
    step_up_approvals = models.BooleanField(default=False)
    # High-water mark of task numbers: only goes up, so a deleted task's id is never reused.
    task_counter = models.PositiveIntegerField(default=0)
    # Sequence number of the last Event; a reconnecting browser asks for what came after it.
    last_seq = models.PositiveBigIntegerField(default=0)
    # Finished tasks by status, kept by the unit of work: the counts of a board with a long
    # history come from here, never from counting its rows.
    completed_count = models.PositiveIntegerField(default=0)
    failed_count = models.PositiveIntegerField(default=0)
    cancelled_count = models.PositiveIntegerField(default=0)
    # Open tasks by what they show (``rules.KEPT_COUNTS``), kept the same way: a backlog of
    # thousands costs its counts no more than a small board does.
    pending_count = models.PositiveIntegerField(default=0)
    blocked_count = models.PositiveIntegerField(default=0)
    in_progress_count = models.PositiveIntegerField(default=0)
    ready_count = models.PositiveIntegerField(default=0)
    stuck_count = models.PositiveIntegerField(default=0)
    needs_person_count = models.PositiveIntegerField(default=0)
    # What agents reported spending (TaskUpdate/TaskHeartbeat ``usage``), and the optional
    # budget: once spent reaches it, claims are refused until a person raises it.
    spent_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    budget_usd = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Task(models.Model):
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="tasks")
    number = models.PositiveIntegerField()
    subject = models.CharField(max_length=limits.SUBJECT_MAX)
    description = models.TextField(blank=True)
    active_form = models.CharField(max_length=limits.SUBJECT_MAX, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    owner = models.CharField(max_length=limits.NAME_MAX, blank=True)
    created_by = models.CharField(max_length=limits.NAME_MAX, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    blocked_by: "models.ManyToManyField[Task, Dependency]" = models.ManyToManyField(
        "self",
        through="Dependency",
        through_fields=("task", "blocker"),
        symmetrical=False,
        related_name="blocks",
        blank=True,
    )
    metadata = models.JSONField(default=dict, blank=True)
    prompt = models.TextField(blank=True)
    result = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    # A card from a coding client's own plan (SPEC §11): the session that made it, the
    # plan it is in (the shared task list, else the session) and the client's own id.
    session = models.CharField(max_length=128, blank=True)
    client_plan = models.CharField(max_length=128, blank=True)
    client_task_id = models.CharField(max_length=128, blank=True)

    approval_required = models.BooleanField(default=False)
    approval_state = models.CharField(
        max_length=16, choices=ApprovalState.choices, default=ApprovalState.NONE
    )
    approval_requested_by = models.CharField(max_length=limits.NAME_MAX, blank=True)
    approval_requested_at = models.DateTimeField(null=True, blank=True)
    approval_reason = models.TextField(blank=True)
    approval_decided_by = models.CharField(max_length=limits.PERSON_NAME_MAX, blank=True)
    approval_decided_at = models.DateTimeField(null=True, blank=True)
    approval_note = models.TextField(blank=True)
    # The task version a decision was given for: an approval covers the task as it was then.
    approval_version = models.PositiveIntegerField(null=True, blank=True)

    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    # Derived from the blockers, kept by the unit of work for the tasks a write affects (so
    # lists, counts and claim-next filter in SQL): an unfinished task waiting on a blocker
    # that is not completed is blocked; on one that failed or was cancelled, also stuck.
    blocked = models.BooleanField(default=False)
    stuck = models.BooleanField(default=False)
    # Why it waits for a person (a Reason, SPEC §12), and since when; "" when nothing does.
    # Stored by the unit of work (and the sweeper, for reasons that come with time).
    needs = models.CharField(max_length=16, choices=Reason.choices, blank=True, default="")
    needs_since = models.DateTimeField(null=True, blank=True)
    # What it adds to the board's kept counts as last counted (``rules.counted_bits``).
    counted = models.PositiveSmallIntegerField(default=0)
    # When a person (or orchestrator) gave it, pending, to its owner: "assigned, not started".
    assigned_at = models.DateTimeField(null=True, blank=True)
    # When its current (or last) attempt started: a hold far past the board's usual cycle
    # reads as no progress (``rules.needs_of``).
    started_at = models.DateTimeField(null=True, blank=True)
    # The owner's lease on in-progress work: renewed by the owner's calls, reclaimed when it
    # lapses (services.leases). ``lease_seconds`` is the length the claim asked for.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    # The agent whose lapsed lease returned this task: its next write is refused (lease_lost).
    lease_lost_by = models.CharField(max_length=limits.NAME_MAX, blank=True)
    # Attempts started, and how many of them failed or timed out (maxAttempts counts these).
    attempts = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    # Usage its agents reported, summed (each report is a Usage row too).
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    # Created → completed, kept when it completes: lead-time figures read one number a task.
    lead_seconds = models.FloatField(null=True, blank=True)

    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = TaskQuerySet.as_manager()

    class Meta:
        # board_id, not board: ordering by the relation would join the boards on every query.
        ordering = ["board_id", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["board", "number"], name="task_number_unique_per_board"
            ),
            # A client's task is one card however often its events are replayed.
            models.UniqueConstraint(
                fields=["board", "client_plan", "client_task_id"],
                condition=~models.Q(client_task_id=""),
                name="task_client_task_unique",
            ),
        ]
        indexes = [
            # a list filtered by status (or a view of one status), paged in number order:
            # without the number here SQLite walks the (board, number) index through the
            # whole history to find the few open tasks
            models.Index(fields=["board", "status", "number"], name="task_status_number"),
            # claim-next: the ready task of highest priority, then lowest number
            models.Index(
                fields=["board", "status", "blocked", "priority", "number"], name="task_claim_next"
            ),
            # the sweeper: in-progress leases that lapsed, on every board
            models.Index(fields=["status", "lease_expires_at"], name="task_lease_expiry"),
            # renewing an agent's leases, WIP counts
            models.Index(fields=["board", "owner", "status"], name="task_owner_status"),
            # the Completed column: the most recently finished first
            models.Index(fields=["board", "completed_at", "number"], name="task_completed"),
            # "Needs you": the few tasks that wait for a person, on one board or on all
            models.Index(
                fields=["board", "needs", "needs_since"],
                name="task_needs_person",
                condition=~models.Q(needs=""),
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.number} {self.subject}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class AttemptOutcome(models.TextChoices):
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    RELEASED = "released"
    REASSIGNED = "reassigned"
    CANCELLED = "cancelled"


class Attempt(models.Model):
    """One go at a task by one owner: from entering in progress to leaving it (or the owner
    changing). Result and notes are the task's as they were when the attempt ended."""

    task = models.ForeignKey("Task", on_delete=models.CASCADE, related_name="attempt_rows")
    n = models.PositiveIntegerField()
    agent = models.CharField(max_length=limits.NAME_MAX, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices, blank=True)
    result = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    # Started → ended, kept when it ends (cycle time).
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["task", "n"]
        constraints = [models.UniqueConstraint(fields=["task", "n"], name="attempt_unique")]

    def __str__(self) -> str:
        return f"{self.task_id} attempt {self.n}: {self.outcome or 'open'}"


class Dependency(models.Model):
    """``task`` is blocked by ``blocker``; read backwards it is ``blocker`` blocks ``task``."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="dependencies")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="blocker_links")
    blocker = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="dependent_links")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "blocker"], name="dependency_unique"),
            models.CheckConstraint(
                condition=~models.Q(task=models.F("blocker")), name="dependency_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} blocked by {self.blocker_id}"


class Label(models.Model):
    """A task's label (SPEC §2): a lower-case name, at most ``LABELS_MAX`` per task; the
    rows are the index that label filters use."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="labels")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="label_rows")
    name = models.CharField(max_length=limits.LABEL_MAX)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "name"], name="label_unique")]
        indexes = [models.Index(fields=["board", "name", "task"], name="label_board_name")]

    def __str__(self) -> str:
        return self.name


LABELS_MAX = limits.LABELS_MAX


class Event(models.Model):
    """Append-only log of every change on a board, numbered per board."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    # The task's public number, kept after the task itself is deleted.
    task_number = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=limits.PERSON_NAME_MAX)
    kind = models.CharField(max_length=limits.EVENT_KIND_MAX, choices=EventKind.choices)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["board_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["board", "seq"], name="event_seq_unique_per_board")
        ]
        indexes = [
            models.Index(fields=["board", "task_number", "seq"]),
            # The activity feed's filters, newest first, whatever the log's length.
            models.Index(fields=["board", "actor", "seq"], name="event_by_actor"),
            models.Index(fields=["board", "kind", "seq"], name="event_by_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.board_id}:{self.seq} {self.kind}"


class Usage(models.Model):
    """One usage report of an agent on a task: tokens, cost and model, as reported."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="usage")
    task_number = models.PositiveIntegerField()
    parent_number = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    agent = models.CharField(max_length=limits.NAME_MAX)
    model = models.CharField(max_length=limits.MODEL_MAX, blank=True)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=6, default=0)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["board", "created_at"], name="usage_by_time"),
            models.Index(fields=["board", "agent"], name="usage_by_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} on {self.task_number}: ${self.cost_usd}"


class FlowDay(models.Model):
    """Arrivals into each status (and creations) per board and day (UTC): the cumulative
    flow and throughput, kept by the unit of work so metrics never scan the event log."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="flow_days")
    day = models.DateField()
    status = models.CharField(max_length=16)  # a Status, or "created"
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["board", "day", "status"], name="flow_day_unique")
        ]

    def __str__(self) -> str:
        return f"{self.board_id} {self.day} {self.status}: {self.count}"

"""The task store: boards, tasks, their dependencies, the event log, tokens, messages.

Models hold fields, constraints and small derived properties only. Every write
goes through ``boards.services``.
"""

import hashlib

from django.conf import settings
from django.db import models

from . import states
from .rules import TaskQuerySet

# The vocabulary of states lives in boards.states; the names are read from here too.
GONE_FACTOR = states.GONE_FACTOR
PRIORITY_BY_NAME = states.PRIORITY_BY_NAME
TERMINAL_STATUSES = states.TERMINAL_STATUSES
UNFINISHED = states.UNFINISHED
AgentState = states.AgentState
ApprovalState = states.ApprovalState
Priority = states.Priority
Reason = states.Reason
Status = states.Status
agent_state = states.agent_state


class Board(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # Work settings (the board's settings page; None means the server's default / no limit).
    lease_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    max_in_progress_per_agent = models.PositiveIntegerField(null=True, blank=True)
    max_in_progress = models.PositiveIntegerField(null=True, blank=True)
    # An agent with no call for this long is silent, for ten times as long gone (SPEC §12);
    # a failed blocker may be retried by its agents for failure_grace_seconds first.
    silent_after_seconds = models.PositiveIntegerField(default=120)
    failure_grace_seconds = models.PositiveIntegerField(default=60)
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
    subject = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    active_form = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    owner = models.CharField(max_length=100, blank=True)
    created_by = models.CharField(max_length=100, blank=True)
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

    approval_required = models.BooleanField(default=False)
    approval_state = models.CharField(
        max_length=16, choices=ApprovalState.choices, default=ApprovalState.NONE
    )
    approval_requested_by = models.CharField(max_length=100, blank=True)
    approval_requested_at = models.DateTimeField(null=True, blank=True)
    approval_reason = models.TextField(blank=True)
    approval_decided_by = models.CharField(max_length=150, blank=True)
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
    lease_lost_by = models.CharField(max_length=100, blank=True)
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
            models.UniqueConstraint(fields=["board", "number"], name="task_number_unique_per_board")
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
    agent = models.CharField(max_length=100, blank=True)
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
    name = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "name"], name="label_unique")]
        indexes = [models.Index(fields=["board", "name", "task"], name="label_board_name")]

    def __str__(self) -> str:
        return self.name


LABELS_MAX = 10


class Event(models.Model):
    """Append-only log of every change on a board, numbered per board."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    # The task's public number, kept after the task itself is deleted.
    task_number = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    kind = models.CharField(max_length=32)
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


AGENT_NAME_MAX = 64
AGENT_NAME_PUNCTUATION = frozenset("._- ")


def agent_name_problem(name: str) -> str | None:
    """Why ``name`` is not a plain agent name, or None: letters, digits, ``._-`` and
    spaces, 1 to 64 characters. Control, format (zero-width) and bidi characters are
    not letters, so a name cannot hide or reorder what a person reads."""
    if not 1 <= len(name) <= AGENT_NAME_MAX:
        return f"1 to {AGENT_NAME_MAX} characters"
    if name != name.strip():
        return "no leading or trailing spaces"
    if not all(ch.isalnum() or ch in AGENT_NAME_PUNCTUATION for ch in name):
        return "letters, digits, '.', '_', '-' and spaces only"
    return None


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class AgentToken(models.Model):
    """An API token of one board. Only its SHA-256 is stored.

    A token is bound to ``agent``, or is a team token (``agent`` empty) whose
    requests name their agent in the ``X-Agent`` header.
    """

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="tokens")
    agent = models.CharField(max_length=100, blank=True)
    is_team = models.BooleanField(default=False)
    # "agent": the tool API; "admin": reads the board's event log (integrations), no tools.
    scope = models.CharField(max_length=16, default="agent")
    # An orchestrator's token may take over in-progress work its own agents do not hold
    # (reassign, change owner), as people may; other tokens only their own agents' work.
    orchestrator = models.BooleanField(default=False)
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "created_at"]
        indexes = [models.Index(fields=["board", "agent"])]

    def __str__(self) -> str:
        return f"{self.prefix}… ({'team' if self.is_team else self.agent})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Agent(models.Model):
    """An agent that has called a board's API: the roster's row."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    # The team token whose X-Agent header put this name on the roster (None: a bound token).
    token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    # The quiet state the sweeper last announced ("silent", "gone"; empty: none), so each
    # change is recorded once, as an event people see and browsers catch up from.
    announced = models.CharField(max_length=8, blank=True)

    class Meta:
        ordering = ["board_id", "name"]
        constraints = [models.UniqueConstraint(fields=["board", "name"], name="agent_unique")]

    def __str__(self) -> str:
        return self.name


class Message(models.Model):
    """A person's message to an agent, queued until the agent reads its inbox."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="messages")
    recipient = models.CharField(max_length=100)
    sender = models.CharField(max_length=150)
    task_number = models.PositiveIntegerField(null=True, blank=True)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "created_at", "id"]
        indexes = [models.Index(fields=["board", "recipient", "read_at"])]

    def __str__(self) -> str:
        return f"to {self.recipient}: {self.body[:40]}"


class Role(models.TextChoices):
    """A person's role on one board; each includes the ones before it."""

    VIEWER = "viewer", "Viewer"
    OPERATOR = "operator", "Operator"
    APPROVER = "approver", "Approver"
    ADMIN = "admin", "Admin"


class Membership(models.Model):
    """A person's role on a board. Superusers are admins of every board without one."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="board_memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["board_id", "user"]
        constraints = [models.UniqueConstraint(fields=["board", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} on {self.board}: {self.role}"


class Invite(models.Model):
    """A one-time link that signs a person up as a member of a board with ``role``.

    Only the SHA-256 of its token is stored (the link is shown once); it is used once
    (``used_at``), until ``expires_at``, unless an admin revokes it first.
    """

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="invites")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.CharField(max_length=150, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.role} on {self.board})"


class Subscription(models.Model):
    """Which signals (boards.activity.SIGNALS) notify one person in their browser, per board."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="subscriptions")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="board_subscriptions"
    )
    kinds = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["board", "user"], name="subscription_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} on {self.board}: {', '.join(self.kinds)}"


class Webhook(models.Model):
    """An outbound endpoint of a board: the signals it gets, signed with its own secret."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    # Signals (boards.activity.SIGNALS) sent; empty: all of them.
    kinds = models.JSONField(default=list, blank=True)
    slack = models.BooleanField(default=False)
    secret = models.CharField(max_length=64)
    active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # One sender at a time per endpoint keeps its deliveries in order; a sender that died
    # holds it until this time only.
    busy_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "id"]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Gave up"


class Delivery(models.Model):
    """One event for one endpoint (the outbox): recorded in the write's transaction,
    sent after commit by a worker, retried with backoff until delivered or given up."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    seq = models.PositiveBigIntegerField(null=True, blank=True)  # the event's; None: a test
    signal = models.CharField(max_length=32)
    payload = models.JSONField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["webhook_id", "id"]
        indexes = [
            models.Index(fields=["webhook", "status", "id"], name="delivery_queue"),
            models.Index(fields=["status", "next_attempt_at"], name="delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.webhook_id}:{self.id} {self.signal} {self.status}"


class Usage(models.Model):
    """One usage report of an agent on a task: tokens, cost and model, as reported."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="usage")
    task_number = models.PositiveIntegerField()
    parent_number = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    agent = models.CharField(max_length=100)
    model = models.CharField(max_length=100, blank=True)
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


# -- agents in their own clients (SPEC §11) ------------------------------------------------


class SessionState(models.TextChoices):
    WORKING = "working", "Working"
    WAITING = "waiting", "Waiting for a person"
    IDLE = "idle", "Idle"
    ENDED = "ended", "Ended"


class ClientSession(models.Model):
    """A coding client's session (Claude Code) seen through its hooks: an agent on the
    roster, what it is doing now, and its last few tool calls (a bounded list, kept
    here rather than in the event log)."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="client_sessions")
    agent = models.CharField(max_length=100)
    client = models.CharField(max_length=32, default="claude-code")
    session_id = models.CharField(max_length=128)
    cwd = models.CharField(max_length=1000, blank=True)
    model = models.CharField(max_length=100, blank=True)
    permission_mode = models.CharField(max_length=32, blank=True)
    state = models.CharField(max_length=16, choices=SessionState.choices, default=SessionState.IDLE)
    doing = models.CharField(max_length=300, blank=True)
    # The last few tool calls: {"id", "tool", "doing", "outcome", "ms", "at"}, newest last.
    calls = models.JSONField(default=list, blank=True)
    subagents = models.PositiveIntegerField(default=0)
    # The last tool call (a digest of its name and input) and how many times in a row it
    # was sent: ``rules.REPEATS_NO_PROGRESS`` of the same is a loop a person should see.
    last_call_key = models.CharField(max_length=64, blank=True)
    repeats = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    last_event_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "-last_event_at"]
        constraints = [
            models.UniqueConstraint(fields=["board", "session_id"], name="client_session_unique")
        ]
        indexes = [models.Index(fields=["board", "agent", "state"], name="client_session_agent")]

    def __str__(self) -> str:
        return f"{self.agent} ({self.session_id[:8]}): {self.state}"


class GateRule(models.Model):
    """One of a board's gate rules (boards.gates): which tool calls need a person."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="gate_rules")
    position = models.PositiveIntegerField(default=0)
    tool = models.CharField(max_length=200)
    pattern = models.CharField(max_length=300, blank=True)
    outside_cwd = models.BooleanField(default=False)
    decision = models.CharField(max_length=8, default="ask")
    wait_seconds = models.PositiveIntegerField(default=300)
    fallback = models.CharField(max_length=8, default="deny")
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["board_id", "position", "id"]

    def __str__(self) -> str:
        return f"{self.tool} {self.pattern} → {self.decision}"


class CallState(models.TextChoices):
    REQUESTED = "requested", "Waiting for a person"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "No answer"


class ToolCall(models.Model):
    """A client's tool call that a gate rule held for a person's decision (seed 001's
    awaiting approval, for the agent's real tools)."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="tool_calls")
    session = models.ForeignKey(
        ClientSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="held"
    )
    agent = models.CharField(max_length=100)
    tool_name = models.CharField(max_length=200)
    tool_use_id = models.CharField(max_length=128, blank=True)
    input_kind = models.CharField(max_length=16, blank=True)
    summary = models.TextField(blank=True)  # the command, path or URL, as sent
    tool_input = models.JSONField(default=dict, blank=True)
    cwd = models.CharField(max_length=1000, blank=True)
    rule = models.CharField(max_length=400, blank=True)  # the rule as it read then
    wait_seconds = models.PositiveIntegerField(default=300)
    fallback = models.CharField(max_length=8, default="deny")
    state = models.CharField(max_length=16, choices=CallState.choices, default=CallState.REQUESTED)
    requested_at = models.DateTimeField()
    deadline = models.DateTimeField()
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["board_id", "requested_at", "id"]
        indexes = [
            models.Index(fields=["board", "state", "requested_at"], name="tool_call_waiting"),
            models.Index(fields=["state", "deadline"], name="tool_call_deadline"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} {self.tool_name}: {self.state}"

"""Agents in their own clients (SPEC §11): coding clients' sessions seen through their
hooks, the board's gate rules, and the tool calls a rule held for a person."""

from datetime import datetime

from django.db import models

from boards.core import limits
from boards.core.states import SessionState
from boards.models.tasks import Board


class ClientSession(models.Model):
    """A coding client's session (Claude Code) seen through its hooks: an agent on the
    roster, what it is doing now, and its last few tool calls (a bounded list, kept
    here rather than in the event log)."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="client_sessions")
    agent = models.CharField(max_length=100)
    client = models.CharField(max_length=32, default="claude-code")  # the hook door's name
    client_version = models.CharField(max_length=100, blank=True)
    host = models.CharField(max_length=100, blank=True)  # the machine, as the forwarder says
    session_id = models.CharField(max_length=128)
    cwd = models.CharField(max_length=1000, blank=True)
    model = models.CharField(max_length=100, blank=True)
    permission_mode = models.CharField(max_length=32, blank=True)
    state = models.CharField(max_length=16, choices=SessionState.choices, default=SessionState.IDLE)
    doing = models.CharField(max_length=300, blank=True)
    # The person's latest prompt (``UserPromptSubmit``), shortened: what the session is
    # for, which a person deciding one of its held calls needs to see.
    goal = models.CharField(max_length=limits.SESSION_GOAL_MAX, blank=True)
    # The last few tool calls: {"id", "tool", "doing", "outcome", "ms", "at"}, newest last.
    calls = models.JSONField(default=list, blank=True)
    subagents = models.PositiveIntegerField(default=0)
    # The subagents running now ({"id", "type"}): a SubagentStop with no start is ignored.
    running_subagents = models.JSONField(default=list, blank=True)
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

    def shown_state(self, silent_after: int, now: datetime) -> str:
        """Its state as a person reads it: a working session with no call running, no
        subagent and no event for ``silent_after`` seconds stopped without a Stop (an API
        error, an interrupt), and reads as stopped (SPEC §11)."""
        if self.state != SessionState.WORKING or self.running_subagents:
            return self.state
        if any(c.get("outcome") in ("running", "waiting", "approved") for c in self.calls):
            return self.state
        if (now - self.last_event_at).total_seconds() < silent_after:
            return self.state
        return SessionState.STOPPED


class GateRule(models.Model):
    """One of a board's gate rules (boards.gates.matching): which tool calls need a person."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="gate_rules")
    position = models.PositiveIntegerField(default=0)
    tool = models.CharField(max_length=200)
    pattern = models.CharField(max_length=300, blank=True)
    outside_cwd = models.BooleanField(default=False)
    decision = models.CharField(max_length=8, default="ask")
    wait_seconds = models.PositiveIntegerField(default=300)
    fallback = models.CharField(max_length=8, default="deny")
    note = models.CharField(max_length=200, blank=True)
    # Approving what it holds needs a passkey assertion, from a person who has one (§14).
    step_up = models.BooleanField(default=False)
    # A standing approval for one client session (its ``ClientSession.session_id``) applies
    # to that session's calls only; empty: to every call of the board's agents.
    session_id = models.CharField(max_length=128, blank=True)
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
    # Its client reported it ran, though the board denied it, still held it, let it end
    # by its fallback deny, or never saw it asked: its hook was stopped (issue #42).
    RAN = "ran", "Ran without the board's verdict"


class ToolCall(models.Model):
    """A client's tool call that a gate rule held for a person's decision (seed 001's
    awaiting approval, for the agent's real tools), or that ran without the board's
    verdict (``CallState.RAN``: a person clears it)."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="tool_calls")
    session = models.ForeignKey(
        ClientSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="held"
    )
    agent = models.CharField(max_length=100)
    # The token its hook came with: the held calls a token may have waiting are counted
    # by it, and a call that ran ungated suspends it.
    token = models.ForeignKey(
        "boards.AgentToken",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_calls",
    )
    tool_name = models.CharField(max_length=200)
    tool_use_id = models.CharField(max_length=128, blank=True)
    input_kind = models.CharField(max_length=16, blank=True)
    summary = models.TextField(blank=True)  # the command, path or URL, as sent
    tool_input = models.JSONField(default=dict, blank=True)
    cwd = models.CharField(max_length=1000, blank=True)
    rule = models.CharField(max_length=400, blank=True)  # the rule as it read then
    # The rule itself, while it exists: whether approving needs a passkey is its step-up
    # flag at decision time (``step_up`` below is kept for a rule deleted since).
    gate_rule = models.ForeignKey(
        GateRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    wait_seconds = models.PositiveIntegerField(default=300)
    fallback = models.CharField(max_length=8, default="deny")
    step_up = models.BooleanField(default=False)  # its rule's, as it was then
    state = models.CharField(max_length=16, choices=CallState.choices, default=CallState.REQUESTED)
    requested_at = models.DateTimeField()
    deadline = models.DateTimeField()
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    # When its client said it ran without the board's verdict, and the person who looked.
    ran_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.CharField(max_length=150, blank=True)
    cleared_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["board_id", "requested_at", "id"]
        indexes = [
            models.Index(fields=["board", "state", "requested_at"], name="tool_call_waiting"),
            models.Index(fields=["state", "deadline"], name="tool_call_deadline"),
            models.Index(fields=["token", "state"], name="tool_call_token_state"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} {self.tool_name}: {self.state}"

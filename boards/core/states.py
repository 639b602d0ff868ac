"""The states a task, an approval and an agent can be in, and what needs a person.

Plain choices and constants, below the models: the models, the board rules
(``boards.core.rules``) and every layer above read them from here.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models


class Status(models.TextChoices):
    PENDING = "pending", "Pending"
    IN_PROGRESS = "in_progress", "In progress"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
# The unfinished statuses named (not "not terminal"), so an index on status finds them.
UNFINISHED = (Status.PENDING, Status.IN_PROGRESS)
# A blocker that ended like this will not complete by itself.
DEAD_ENDS = frozenset({Status.FAILED, Status.CANCELLED})


class ApprovalState(models.TextChoices):
    NONE = "none", "None"
    REQUESTED = "requested", "Requested"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"


class Priority(models.IntegerChoices):
    """Claim-next takes the ready task of highest priority (lowest value), then lowest number."""

    URGENT = 0, "urgent"
    HIGH = 1, "high"
    NORMAL = 2, "normal"
    LOW = 3, "low"


PRIORITY_BY_NAME = {label: value for value, label in Priority.choices}


class Reason(models.TextChoices):
    """Why something waits for a person (SPEC §12); a task stores its own (``Task.needs``)."""

    APPROVAL = "approval", "Waits for approval"
    FAILED = "failed", "Failed"
    STRANDED = "stranded", "Stranded"
    NOT_STARTED = "not_started", "Not started"
    NO_PROGRESS = "no_progress", "No progress"
    SESSION_WAITING = "session_waiting", "Session waiting"
    UNATTENDED = "unattended", "Unattended"
    # A coding session ran a tool call without the board's verdict (its hook stopped).
    TAMPERING = "tampering", "Ran without the board's verdict"


class SessionState(models.TextChoices):
    """A coding client's session as its hooks tell it (SPEC §11)."""

    WORKING = "working", "Working"
    WAITING = "waiting", "Waiting for a person"
    IDLE = "idle", "Idle"
    # A turn that ended in an API error or an interrupt (StopFailure), not at a Stop.
    STOPPED = "stopped", "Stopped"
    ENDED = "ended", "Ended"


class AgentState(models.TextChoices):
    """How an agent looks to a person (SPEC §12): computed, never stored."""

    WORKING = "working", "Working"
    IDLE = "idle", "Idle"
    SILENT = "silent", "Silent"
    GONE = "gone", "Gone"


# An agent silent for this many times the board's silentAfterSeconds is gone.
GONE_FACTOR = 10


def agent_state(
    *,
    last_seen: datetime,
    holding: int,
    session_state: str | None,
    silent_after: int,
    now: datetime,
) -> str:
    """The one rule of an agent's state: a session that ended, or no call for ten times
    ``silent_after`` seconds, is gone; no call for ``silent_after`` is silent; holding
    in-progress work (or a session at work) is working; else idle."""
    quiet = (now - last_seen).total_seconds()
    if session_state == SessionState.ENDED or quiet >= GONE_FACTOR * silent_after:
        return AgentState.GONE
    if quiet >= silent_after:
        return AgentState.SILENT
    if holding or session_state in (SessionState.WORKING, SessionState.WAITING):
        return AgentState.WORKING
    return AgentState.IDLE


class EventKind(models.TextChoices):
    """What an ``Event`` records: its ``kind`` in the event log, the activity feed, the
    socket's catch-up and webhooks (the values are the wire's). Every place that records
    or matches a kind names it here."""

    # A task's life.
    CREATED = "created", "Task created"
    UPDATED = "updated", "Task updated"
    STATUS = "status", "Status changed"
    CLAIMED = "claimed", "Claimed"
    REASSIGNED = "reassigned", "Reassigned"
    DELETED = "deleted", "Deleted"
    BLOCKED = "blocked", "Blocked"
    UNBLOCKED = "unblocked", "Unblocked"
    RECLAIMED = "reclaimed", "Lease lapsed, reclaimed"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    MESSAGE = "message", "Message to an agent"
    # Approvals of a task.
    APPROVAL_REQUESTED = "approval_requested", "Approval requested"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    APPROVAL_CLEARED = "approval_cleared", "Approval cleared"
    APPROVAL_CANCELLED = "approval_cancelled", "Approval request cancelled"
    # The board and who may use it.
    BOARD_CREATED = "board_created", "Board created"
    RESET = "reset", "Board reset"
    SETTINGS = "settings", "Settings changed"
    RECOUNTED = "recounted", "Counts repaired"
    MEMBER = "member", "Member changed"
    INVITE = "invite", "Invite"
    WEBHOOK = "webhook", "Webhook changed"
    WEBHOOK_TEST = "webhook_test", "Webhook test"
    GATE_RULE = "gate_rule", "Gate rule changed"
    # Agents, their sessions and the tool calls a gate held.
    AGENT_REMOVED = "agent_removed", "Agent removed"
    AGENT_SILENT = "agent_silent", "Agent went silent"
    AGENT_GONE = "agent_gone", "Agent gone"
    SESSION_STARTED = "session_started", "Session started"
    SESSION_ENDED = "session_ended", "Session ended"
    TOOL_CALL_REQUESTED = "tool_call_requested", "Tool call held for a person"
    TOOL_CALL_APPROVED = "tool_call_approved", "Tool call approved"
    TOOL_CALL_DENIED = "tool_call_denied", "Tool call denied"
    TOOL_CALL_EXPIRED = "tool_call_expired", "Tool call unanswered"
    TOOL_CALL_RAN = "tool_call_ran", "Tool call ran without the board's verdict"
    TOOL_CALL_CLEARED = "tool_call_cleared", "Ungated call cleared"
    # Runners: the programs that start agents on cards (SPEC §16).
    RUNNER_SEEN = "runner_seen", "Runner connected"
    RUNNER_GONE = "runner_gone", "Runner gone"
    RUNNER_COMMAND = "runner_command", "Command sent to a runner"
    # Reaching a person away from the board (SPEC §14).
    PUSHED = "pushed", "Pushed to devices"
    PUSH_WITHDRAWN = "push_withdrawn", "Push withdrawn"
    PUSH_ACTED = "push_acted", "Decided from a push"
    STEP_UP = "step_up", "Confirmed with a passkey"


# Signals: the kinds of event a person can ask to be reached about (notifications,
# webhooks). Each event raises at most one; each Needs-you reason notifies as one
# (``reasons.ReasonRow.signal``).
APPROVAL_REQUESTED = "approval_requested"
APPROVAL_DECIDED = "approval_decided"
FAILED = "failed"
RECLAIMED = "reclaimed"
NEEDS_ATTENTION = "needs_attention"
COMPLETED = "completed"

"""The states a task, an approval and an agent can be in, and what needs a person.

Plain choices and constants, below the models: the models, the board rules
(``boards.rules``) and every layer above read them from here.
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
    if session_state == "ended" or quiet >= GONE_FACTOR * silent_after:
        return AgentState.GONE
    if quiet >= silent_after:
        return AgentState.SILENT
    if holding or session_state in ("working", "waiting"):
        return AgentState.WORKING
    return AgentState.IDLE

"""Runners (SPEC §16): the programs people start where code lives, their presence, and
the commands the board queues for them (each delivered once, or refused as stale)."""

from django.db import models

from boards.core import limits
from boards.models.access import AgentToken
from boards.models.tasks import Board


class Runner(models.Model):
    """A runner of a board, as its last hello and poll told it.

    Its repositories are kept by name and an opaque id the runner makes: their paths stay
    on the runner's machine, and the board never names one back (SPEC §16, Trust).
    """

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="runners")
    name = models.CharField(max_length=limits.AGENT_NAME_MAX)
    # The runner token it registered with; a runner's token names one runner.
    token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="runners"
    )
    host = models.CharField(max_length=100, blank=True)
    version = models.CharField(max_length=100, blank=True)  # the runner program's own
    # [{"client", "version", "gate": bool, "why"}]: the coding clients it may start, and
    # whether each one's gate would run (why not, when it would not).
    clients = models.JSONField(default=list, blank=True)
    # [{"name", "id", "branch"}]: its repositories, by name and opaque id, never a path.
    repos = models.JSONField(default=list, blank=True)
    max_sessions = models.PositiveSmallIntegerField(default=2)
    running = models.PositiveSmallIntegerField(default=0)
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    # Said online when it last came (``runner_seen``) until the sweeper found it silent
    # past two poll periods (``runner_gone``): each change recorded once.
    connected = models.BooleanField(default=False)

    class Meta:
        ordering = ["board_id", "name"]
        constraints = [models.UniqueConstraint(fields=["board", "name"], name="runner_unique")]

    def __str__(self) -> str:
        return self.name


class CommandState(models.TextChoices):
    """Where a command to a runner is: queued, delivered (once, on a poll), answered by
    the runner (done, or refused with its reason), or stale (its TTL passed before any
    poll took it: never delivered)."""

    QUEUED = "queued", "Queued"
    DELIVERED = "delivered", "Delivered"
    DONE = "done", "Done"
    REFUSED = "refused", "Refused by the runner"
    STALE = "stale", "Stale"


class RunnerCommand(models.Model):
    """One command the board sends a runner: a kind the runner knows and ids, never a
    command line or a path."""

    runner = models.ForeignKey(Runner, on_delete=models.CASCADE, related_name="commands")
    kind = models.CharField(max_length=32)
    args = models.JSONField(default=dict, blank=True)
    sent_by = models.CharField(max_length=limits.PERSON_NAME_MAX, blank=True)
    sent_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=CommandState.choices, default="queued")
    # The runner's report ({"pong": true, …}) or, refused or stale, {"why": …}.
    answer = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["runner_id", "id"]
        indexes = [models.Index(fields=["runner", "state"])]

    def __str__(self) -> str:
        return f"{self.kind} → {self.runner_id} ({self.state})"

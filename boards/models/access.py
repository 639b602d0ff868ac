"""Who acts on a board: agents (their names, tokens and roster rows), people (roles,
invites, notification choices), and the messages people send agents."""

import hashlib

from django.conf import settings
from django.db import models

from boards.core import limits
from boards.models.tasks import Board

AGENT_NAME_MAX = limits.AGENT_NAME_MAX
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
    agent = models.CharField(max_length=limits.NAME_MAX, blank=True)
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
    # Set when one of its sessions ran a call without the board's verdict (its hook was
    # stopped): every door refuses it until a person clears the item (issue #42).
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspended_reason = models.CharField(max_length=300, blank=True)

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
    name = models.CharField(max_length=limits.NAME_MAX)
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
    recipient = models.CharField(max_length=limits.NAME_MAX)
    sender = models.CharField(max_length=limits.PERSON_NAME_MAX)
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
    """Which signals (boards.core.activity.SIGNALS) notify one person in their browser, per board."""

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

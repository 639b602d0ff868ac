"""Reaching a person away from the board (SPEC §14): the VAPID key, a person's devices
(push subscriptions), what each device was told, the one-time action links, passkeys and
the step-up assertions they made."""

from django.conf import settings
from django.db import models

from boards.core.states import Reason
from boards.models.clients import ToolCall
from boards.models.tasks import Board

# What a new device is told of: approvals (gated tasks and held tool calls) and failures.
DEFAULT_PUSH_KINDS = (Reason.APPROVAL.value, Reason.FAILED.value)


def default_push_kinds() -> list[str]:
    return list(DEFAULT_PUSH_KINDS)


class VapidKey(models.Model):
    """The board's VAPID key pair (RFC 8292), made once: every process signs with it, and
    a restart keeps it (browsers' subscriptions are bound to the public key)."""

    private_pem = models.TextField()
    public_key = models.CharField(max_length=100)  # base64url, the uncompressed P-256 point
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.public_key


class PushDevice(models.Model):
    """One browser's push subscription, for one person."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_devices"
    )
    endpoint = models.URLField(max_length=1000, unique=True)
    p256dh = models.CharField(max_length=200)
    auth = models.CharField(max_length=100)
    name = models.CharField(max_length=100, blank=True)
    # Reasons (``Reason``) pushed to this device.
    kinds = models.JSONField(default=default_push_kinds)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id", "id"]

    def __str__(self) -> str:
        return self.name or self.endpoint[:60]


class PushNotice(models.Model):
    """That a device was told of one Needs-you item in one exact state (``item``): sent
    once, pushed once more with fresh links when they lapse, withdrawn when it leaves."""

    device = models.ForeignKey(PushDevice, on_delete=models.CASCADE, related_name="notices")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="push_notices")
    item = models.CharField(max_length=64)  # "call-12", or "task-3@7" (number @ version)
    tag = models.CharField(max_length=100)  # the notification's tag on the device
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    repushed = models.BooleanField(default=False)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["device_id", "id"]
        constraints = [models.UniqueConstraint(fields=["device", "item"], name="push_notice_once")]
        indexes = [models.Index(fields=["board", "withdrawn_at"], name="push_notice_open")]

    def __str__(self) -> str:
        return f"{self.device_id}:{self.item}"


class PushLink(models.Model):
    """A one-time Approve or Deny link of a push: bound to the person, the item's exact
    state (the held call, or the task and its version) and a deadline."""

    token_hash = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+")
    action = models.CharField(max_length=8)  # approve | deny
    call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.CASCADE)
    task_number = models.PositiveIntegerField(null=True, blank=True)
    task_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.action} {self.call_id or self.task_number}"


class Passkey(models.Model):
    """A person's WebAuthn credential, for step-up approvals."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="passkeys"
    )
    credential_id = models.CharField(max_length=700, unique=True)  # base64url
    public_key = models.BinaryField()
    sign_count = models.PositiveBigIntegerField(default=0)
    name = models.CharField(max_length=100, blank=True)
    transports = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id", "id"]

    def __str__(self) -> str:
        return self.name or self.credential_id[:16]


class StepUp(models.Model):
    """A passkey assertion a person made for one item (its exact state, as ``PushNotice``
    names it): approving a step-up item needs one made within KANBAN_STEP_UP_SECONDS."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+")
    item = models.CharField(max_length=64)
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["user", "board", "item", "at"], name="step_up_recent")]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.item}"

"""A board's outbound webhooks and their deliveries (the outbox)."""

from django.db import models

from boards.models.tasks import Board


class Webhook(models.Model):
    """An outbound endpoint of a board: the signals it gets, signed with its own secret."""

    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    # Signals (boards.core.activity.SIGNALS) sent; empty: all of them.
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

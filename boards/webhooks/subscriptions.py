"""Board admins' webhook endpoints, and each person's notification choices.

Recording deliveries is ``outbox``'s, sending them ``boards.webhooks.delivery``'s; these are
the decisions people make about it. Adding, changing and removing an endpoint are
events of the board (the activity feed shows who did it); the secret itself never
enters the event log.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from boards.core import numbers
from boards.core.activity import SIGNALS
from boards.core.errors import BODY, InvalidInput, NotFound
from boards.core.services import outbox
from boards.core.services.work import unit_of_work
from boards.core.states import EventKind
from boards.models import Board, Delivery, Event, Subscription, Webhook
from boards.webhooks import egress

WEBHOOKS_PER_BOARD = 20
TEST_SIGNAL = "test"


def shown_url(url: str) -> str:
    """An endpoint as the event log (read by every member) shows it: scheme and host only.
    The path of many endpoints is their credential (a Slack incoming-webhook URL is)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}/…"


def _kinds(kinds: Iterable[str], field: str = "kinds") -> list[str]:
    chosen = sorted(set(kinds))
    unknown = [k for k in chosen if k not in SIGNALS]
    if unknown:
        raise InvalidInput(
            f"{field}: unknown kind(s) {', '.join(unknown)}; choose from {', '.join(SIGNALS)}",
            field=field,
        )
    return chosen


def webhook_add(
    *, board: Board, actor: str, url: str, kinds: Iterable[str] = (), slack: bool = False
) -> tuple[Webhook, str]:
    """A new endpoint; returns it with its secret (shown to the admin once)."""
    url = url.strip() if isinstance(url, str) else url
    problem = egress.endpoint_problem(url)
    if problem:
        raise InvalidInput(f"url: {problem}", field="url")
    chosen = _kinds(kinds)
    secret = secrets.token_hex(32)
    with unit_of_work(board, actor, person=True) as work:
        if Webhook.objects.filter(board=work.board).count() >= WEBHOOKS_PER_BOARD:
            raise InvalidInput(f"a board has at most {WEBHOOKS_PER_BOARD} webhooks", field=BODY)
        hook = Webhook.objects.create(
            board=work.board, url=url, kinds=chosen, slack=slack, secret=secret, created_by=actor
        )
        work.record(
            EventKind.WEBHOOK, None, action="added", url=shown_url(url), kinds=chosen or ["all"]
        )
    return hook, secret


def _hook(board: Board, webhook_id: Any) -> Webhook:
    pk = numbers.id_number(webhook_id, field="webhook")
    hook = Webhook.objects.filter(board=board, pk=pk).first() if pk is not None else None
    if hook is None:
        raise NotFound(f"Webhook {str(webhook_id)[:40]} not found", code="webhook_not_found")
    return hook


def webhook_change(
    *,
    board: Board,
    actor: str,
    webhook_id: Any,
    active: bool | None = None,
    rotate_secret: bool = False,
) -> str | None:
    """Pause or resume an endpoint, or give it a new secret (returned, shown once)."""
    secret = secrets.token_hex(32) if rotate_secret else None
    with unit_of_work(board, actor, person=True) as work:
        hook = _hook(work.board, webhook_id)
        changes: dict[str, Any] = {}
        if active is not None and active != hook.active:
            changes["active"] = active
        if secret:
            changes["secret"] = secret
        if not changes:
            return None
        Webhook.objects.filter(pk=hook.pk).update(**changes)
        what = "secret rotated" if secret else ("resumed" if active else "paused")
        work.record(EventKind.WEBHOOK, None, action=what, url=shown_url(hook.url))
    if active:
        outbox.wake([hook.pk])
    return secret


def webhook_remove(*, board: Board, actor: str, webhook_id: Any) -> None:
    with unit_of_work(board, actor, person=True) as work:
        hook = _hook(work.board, webhook_id)
        hook.delete()
        work.record(EventKind.WEBHOOK, None, action="removed", url=shown_url(hook.url))


def webhook_test(*, board: Board, actor: str, webhook_id: Any) -> Delivery:
    """Queue a test event for one endpoint (whatever kinds it subscribes to)."""
    with transaction.atomic():
        hook = _hook(board, webhook_id)
        now = timezone.now()
        event = Event(
            board=board, seq=0, task_number=None, actor=actor, kind=EventKind.WEBHOOK_TEST
        )
        event.created_at = now
        payload = outbox.event_payload(board, event, TEST_SIGNAL, None)
        payload["event"]["seq"] = None  # not in the board's log
        return outbox.queue(hook.pk, None, TEST_SIGNAL, payload)


def delivery_redeliver(*, board: Board, actor: str, delivery_id: Any) -> Delivery:
    """Send a delivery again, as a new delivery at the end of its endpoint's queue."""
    pk = numbers.id_number(delivery_id, field="delivery")
    with transaction.atomic():
        original = (
            Delivery.objects.filter(pk=pk, webhook__board=board).first() if pk is not None else None
        )
        if original is None:
            raise NotFound(f"Delivery {str(delivery_id)[:40]} not found", code="delivery_not_found")
        return outbox.queue(original.webhook_id, original.seq, original.signal, original.payload)


def subscription_set(*, board: Board, user: Any, kinds: Iterable[str]) -> list[str]:
    """Which signals notify this person on this board (their own choice: no event)."""
    chosen = _kinds(kinds)
    Subscription.objects.update_or_create(board=board, user=user, defaults={"kinds": chosen})
    return chosen

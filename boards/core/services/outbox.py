"""Outbound webhooks, the write's side: the outbox a write fills.

A write that raises signals (``boards.core.activity``) records one ``Delivery`` per
subscribed endpoint in its own transaction (``record``, called by the unit of work),
and after commit wakes each endpoint's sender. Sending, retrying and the workers are
``boards.webhooks.delivery``'s, above the services: it installs itself here at startup
(``send_with``, from ``BoardsConfig.ready``). A write never waits for an endpoint; a
wake-up that is lost (nothing installed, an enqueue that failed) is caught by the
sweeper, which wakes overdue deliveries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boards.core.activity import describe, signal_of
from boards.core.selectors import iso, task_summary, task_views
from boards.models import Board, Delivery, Event, Webhook

logger = logging.getLogger(__name__)

# Enqueues a sender for each of the endpoints given (boards.webhooks.delivery.enqueue, installed
# at startup); None until then.
_send: Callable[[list[int]], None] | None = None


def send_with(send: Callable[[list[int]], None]) -> None:
    """Name what sends an endpoint's deliveries once the write that queued them commits."""
    global _send
    _send = send


def board_url(board: Board) -> str:
    return f"{settings.KANBAN_PUBLIC_URL}/boards/{board.slug}/"


def task_url(board: Board, number: int) -> str:
    return f"{board_url(board)}tasks/{number}/"


def record(board: Board, events: Iterable[Event]) -> None:
    """Put the signalled events in the outbox of every endpoint that wants them."""
    signalled = [(e, s) for e in events if (s := signal_of(e.kind, e.data))]
    if not signalled:
        return
    hooks = list(Webhook.objects.filter(board=board, active=True))
    if not hooks:
        return
    views = task_views(
        board, {e.task_number for e, _ in signalled if e.task_number}, with_children=False
    )
    now = timezone.now()
    rows: list[Delivery] = []
    for event, signal in signalled:
        view = views.get(event.task_number) if event.task_number else None
        try:
            payload = event_payload(board, event, signal, task_summary(view) if view else None)
        except Exception:  # a webhook's trouble must not undo the write, nor stop the others
            logger.exception("board %s event %s: no webhook payload", board.pk, event.seq)
            continue
        rows.extend(
            delivery(hook.pk, event.seq, signal, payload, now)
            for hook in hooks
            if wants(hook, signal)
        )
    if rows:
        Delivery.objects.bulk_create(rows)
        wake({row.webhook_id for row in rows})


def wants(hook: Webhook, signal: str) -> bool:
    """Whether ``hook`` subscribes to ``signal`` (no kinds: every signal). A row whose
    kinds are not a list (edited by hand) gets nothing rather than breaking the write."""
    if not hook.kinds:
        return True
    return isinstance(hook.kinds, list) and signal in hook.kinds


def delivery(
    webhook_id: int, seq: int | None, signal: str, payload: dict[str, Any], now: datetime
) -> Delivery:
    """A new delivery, due now (unsaved)."""
    return Delivery(
        webhook_id=webhook_id,
        seq=seq,
        signal=signal,
        payload=payload,
        next_attempt_at=now,
        created_at=now,
    )


def queue(webhook_id: int, seq: int | None, signal: str, payload: dict[str, Any]) -> Delivery:
    """Queue one delivery at the end of its endpoint's queue (a test, a redelivery)."""
    row = delivery(webhook_id, seq, signal, payload, timezone.now())
    row.save()
    wake([webhook_id])
    return row


def event_payload(board: Board, event: Event, signal: str, task: dict | None) -> dict[str, Any]:
    number = event.task_number
    return {
        "event": {
            "seq": event.seq,
            "kind": event.kind,
            "signal": signal,
            "taskId": str(number) if number is not None else None,
            "actor": event.actor,
            "at": iso(event.created_at or timezone.now()),
            "text": describe(event.kind, number, event.actor, event.data),
        },
        "task": task,
        "taskUrl": task_url(board, number) if number is not None else None,
        "board": {"slug": board.slug, "name": board.name, "url": board_url(board)},
    }


def wake(webhook_ids: Iterable[int]) -> None:
    """After commit, have a sender enqueued for each endpoint (a lost wake-up is caught by
    the sweeper)."""
    transaction.on_commit(partial(_wake, sorted(set(webhook_ids))), robust=True)


def _wake(webhook_ids: list[int]) -> None:
    if _send is None:
        logger.warning("no webhook sender installed; the sweeper will send %s", webhook_ids)
        return
    _send(webhook_ids)

"""Webhook delivery: the worker task that empties the outbox, retries, and the workers.

A write records its deliveries inside its own transaction (``services.outbox``, called
by the unit of work) and, after commit, wakes each endpoint's sender: ``install``
(run by ``BoardsConfig.ready``) tells the outbox to enqueue this module's ``deliver``
task of Django's tasks framework (the django-tasks backport, database backend). A
worker runs it: it takes the endpoint (one sender at a time, so each endpoint gets its
events in order), posts the oldest due delivery, signed (``signed_request``; Slack
endpoints get a Slack message), through ``egress``, and records the outcome; failures
are retried with exponential backoff until the event is
``KANBAN_WEBHOOK_GIVE_UP_SECONDS`` old. A write never waits for an endpoint. An endpoint
that hangs holds one worker for at most one attempt's deadline (``egress``) at a time,
and a board's endpoints hold at most ``KANBAN_WEBHOOK_SENDERS_PER_BOARD`` workers at
once, so other boards' deliveries go on; a sender that lets go hands the board's places
to its waiting endpoints.

At least once: a worker killed mid-delivery leaves the delivery due and the endpoint
taken only until ``busy_until``; the sweeper (``kick``, run by ``boards.boot``) enqueues
it again. The workers run inside each server process (``start_workers``, from
``boards.boot``) unless a scale-out deployment runs
``manage.py db_worker --queue-name webhooks`` instead.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Min
from django.utils import timezone
from django_tasks import TaskResultStatus, task
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from boards.core.services import outbox
from boards.models import Delivery, DeliveryStatus, Webhook
from boards.webhooks import egress

logger = logging.getLogger(__name__)

QUEUE = "webhooks"
USER_AGENT = "AgentKanban-Webhook/1"
BACKOFF_MAX_SECONDS = 3600
# One task run sends at most this many deliveries of its endpoint, for at most this
# long, then hands the rest to a fresh run: endpoints share the workers fairly.
RUN_MAX_DELIVERIES = 20
RUN_MAX_SECONDS = 2.0
ERROR_MAX = 500


def install() -> None:
    """Have the outbox wake this module's senders after each commit that fills it."""
    outbox.send_with(enqueue)


def hold_seconds() -> float:
    """How long a sender holds its endpoint: longer than any one attempt can take."""
    return 2 * settings.KANBAN_WEBHOOK_DEADLINE_SECONDS + 5


def enqueue(webhook_ids: list[int], run_after: Any = None) -> None:
    """Enqueue a sender for each endpoint (a failure is left to the sweeper's ``kick``)."""
    for webhook_id in webhook_ids:
        try:
            runner = deliver.using(run_after=run_after) if run_after else deliver
            runner.enqueue(webhook_id)
        except Exception:
            logger.exception("enqueueing webhook %s failed; the sweeper will retry", webhook_id)


# -- sending (a worker) -------------------------------------------------------------------


@task(queue_name=QUEUE)
def deliver(webhook_id: int) -> int:
    """The worker's task: send the endpoint's due deliveries in order; returns how many."""
    return drain(webhook_id)


def drain(webhook_id: int) -> int:
    """Send ``webhook_id``'s due deliveries, oldest first, while they succeed.

    Takes the endpoint first (see ``take``); re-reads it before each attempt, so a
    removed or paused endpoint gets no further attempt, and a rotated secret signs the
    next one. A run ends after ``RUN_MAX_DELIVERIES`` or ``RUN_MAX_SECONDS``; then the
    board's waiting endpoints are woken before this one again.
    """
    hook = take(webhook_id)
    if hook is None:
        return 0  # another sender has it, its board's places are taken, or it is gone
    board_id = hook.board_id
    sent = 0
    started = time.monotonic()
    again_at = None
    try:
        while True:
            head = (
                Delivery.objects.filter(webhook_id=webhook_id, status=DeliveryStatus.PENDING)
                .order_by("id")
                .first()
            )
            if head is None:
                break
            if head.next_attempt_at > timezone.now():
                again_at = head.next_attempt_at  # ordered: later events wait for the head
                break
            if sent >= RUN_MAX_DELIVERIES or time.monotonic() - started > RUN_MAX_SECONDS:
                break  # the rest go when the board's other waiting endpoints had a turn
            if sent:
                hook = Webhook.objects.filter(pk=webhook_id, active=True).first()
                if hook is None:
                    break  # removed or paused meanwhile: its retries stop here
            try:
                delivered = attempt(hook, head)
            except Exception:  # this row's trouble: it waits its backoff, the worker goes on
                logger.exception("webhook %s delivery %s: the attempt broke", webhook_id, head.pk)
                again_at = _postpone(head)
                break
            if not delivered and head.status == DeliveryStatus.PENDING:
                again_at = head.next_attempt_at  # it failed: it retries, the rest wait
                break
            sent += 1
            # Still ours: each attempt extends the hold by one attempt's length.
            Webhook.objects.filter(pk=webhook_id).update(
                busy_until=timezone.now() + timedelta(seconds=hold_seconds())
            )
    finally:
        Webhook.objects.filter(pk=webhook_id).update(busy_until=None)
    if again_at is not None and again_at > timezone.now():
        enqueue([webhook_id], run_after=again_at)
    # This endpoint's due rest (run limits, or recorded while it ran) and the board's
    # other waiting endpoints: as many as the board may run, the others first.
    hand_over(board_id, last=webhook_id)
    return sent


def take(webhook_id: int) -> Webhook | None:
    """Hold the endpoint for one sender, if it is active, no sender holds it, and its
    board's endpoints hold fewer than ``KANBAN_WEBHOOK_SENDERS_PER_BOARD`` workers;
    the endpoint, or None."""
    now = timezone.now()
    with transaction.atomic():
        hook = Webhook.objects.filter(pk=webhook_id, active=True).first()
        if hook is None:
            return None
        # The board's endpoints, locked (SQLite: the IMMEDIATE transaction), so two
        # senders cannot both take the board's last place.
        holds = (
            Webhook.objects.select_for_update()
            .filter(board_id=hook.board_id)
            .order_by("pk")
            .values_list("pk", "busy_until")
        )
        busy = {pk for pk, until in holds if until is not None and until >= now}
        if webhook_id in busy or len(busy) >= settings.KANBAN_WEBHOOK_SENDERS_PER_BOARD:
            return None
        Webhook.objects.filter(pk=webhook_id).update(
            busy_until=now + timedelta(seconds=hold_seconds())
        )
    return hook


def hand_over(board_id: int, last: int | None = None) -> list[int]:
    """Enqueue senders for the board's endpoints that wait with a due head delivery,
    longest waiting first (``last``, the one that just ran, after the others), as many
    as the board has free places; returns their ids."""
    now = timezone.now()
    hooks = list(
        Webhook.objects.filter(board_id=board_id).values_list("pk", "active", "busy_until")
    )
    # A paused endpoint's attempt under way holds its place too (as ``take`` counts).
    held = sum(1 for _, _, until in hooks if until is not None and until >= now)
    free = settings.KANBAN_WEBHOOK_SENDERS_PER_BOARD - held
    idle = [pk for pk, active, until in hooks if active and (until is None or until < now)]
    if free <= 0 or not idle:
        return []
    heads = (
        Delivery.objects.filter(webhook_id__in=idle, status=DeliveryStatus.PENDING)
        .values("webhook_id")
        .annotate(head=Min("id"))
        .values_list("head", flat=True)
    )
    due = list(
        Delivery.objects.filter(pk__in=list(heads), next_attempt_at__lte=now)
        .order_by("next_attempt_at", "id")
        .values_list("webhook_id", flat=True)
    )
    chosen = [pk for pk in due if pk != last] + [pk for pk in due if pk == last]
    enqueue(chosen[:free])
    return chosen[:free]


def _postpone(delivery: Delivery) -> datetime:
    """After an attempt that broke (not one that failed): the head waits its backoff."""
    at = timezone.now() + timedelta(seconds=backoff(delivery.attempts))
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=at, last_status=None, last_error=egress.NOT_SENT
    )
    return at


def attempt(hook: Webhook, delivery: Delivery) -> bool:
    """One attempt at one delivery; records the outcome and returns whether it arrived.

    A delivery that cannot be made into a request (its payload broken) is given up at
    once: no retry could send it, and the endpoint's later events would wait behind it
    until it is given up.
    """
    delivery.attempts += 1
    # Counted before sending: an attempt a killed worker made is not made "again" unseen.
    Delivery.objects.filter(pk=delivery.pk).update(attempts=delivery.attempts)
    try:
        body, headers = signed_request(hook, delivery)
    except Exception:
        logger.exception(
            "webhook %s delivery %s: no request from its payload", hook.pk, delivery.pk
        )
        status, error, broken = None, "invalid payload", True
    else:
        status, error = egress.post(hook.url, body, headers)
        broken = False
    now = timezone.now()
    fields: dict[str, Any] = {"last_status": status, "last_error": error[:ERROR_MAX]}
    if status is not None and 200 <= status < 300:
        fields.update(status=DeliveryStatus.DELIVERED, delivered_at=now, last_error="")
    elif broken or (now - delivery.created_at).total_seconds() >= (
        settings.KANBAN_WEBHOOK_GIVE_UP_SECONDS
    ):
        fields.update(status=DeliveryStatus.FAILED)
    else:
        fields.update(next_attempt_at=now + timedelta(seconds=backoff(delivery.attempts)))
    # An update, not a save: the endpoint (and this row with it) may have been removed
    # while the attempt ran.
    Delivery.objects.filter(pk=delivery.pk).update(**fields)
    for name, value in fields.items():
        setattr(delivery, name, value)
    return delivery.status == DeliveryStatus.DELIVERED


def backoff(attempts: int) -> float:
    """Seconds before the next try: base × 2^(attempts-1), at most an hour."""
    base = settings.KANBAN_WEBHOOK_BACKOFF_SECONDS
    return min(base * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS)


def signed_request(hook: Webhook, delivery: Delivery) -> tuple[bytes, dict[str, str]]:
    """The exact body and headers of one attempt.

    The signature is HMAC-SHA256 of the body with the endpoint's secret. The JSON body
    carries the same ``timestamp`` as the header, so the signature covers it: a
    receiver refuses old timestamps to stop replays.
    """
    stamp = int(time.time())
    if hook.slack:
        data: dict[str, Any] = {"text": slack_text(delivery.payload)}
    else:
        data = {
            "id": delivery.pk,
            "attempt": delivery.attempts,
            "timestamp": stamp,
            **delivery.payload,
        }
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    digest = hmac.new(hook.secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Kanban-Event": delivery.signal,
        "X-Kanban-Delivery": str(delivery.pk),
        "X-Kanban-Timestamp": str(stamp),
        "X-Kanban-Signature": f"sha256={digest}",
    }
    return body, headers


def _slack_escape(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_text(payload: dict[str, Any]) -> str:
    """A Slack incoming-webhook message: the sentence, linked to the task."""
    event, board = payload["event"], payload["board"]
    line = f"*{_slack_escape(board['name'])}*: {_slack_escape(event['text'])}"
    task = payload.get("task")
    if payload.get("taskUrl") and task:
        line += f" <{payload['taskUrl']}|#{task['id']} {_slack_escape(task['subject'])}>"
    return line


# -- the safety net (the sweeper) -----------------------------------------------------------


def kick() -> int:
    """Wake the endpoints whose head delivery is overdue and that no live sender holds
    (a wake-up was lost, or a worker died), as many per board as the board may run;
    returns how many. One board's trouble does not stop the others'."""
    overdue = timezone.now() - timedelta(seconds=hold_seconds())
    boards = set(
        Delivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lt=overdue, webhook__active=True
        )
        .order_by()
        .values_list("webhook__board_id", flat=True)
        .distinct()
    )
    if not boards:
        return 0
    if DBTaskResult.objects.ready().filter(queue_name=QUEUE).exists():
        return 0  # senders are queued and no worker has taken them yet: more would not help
    woken = 0
    for board_id in sorted(boards):
        try:
            woken += len(hand_over(board_id))
        except Exception:
            logger.exception("board %s: waking its webhook senders failed", board_id)
    return woken


def prune(older_than: timedelta = timedelta(hours=1)) -> int:
    """Forget finished sender runs (the deliveries keep the record people read)."""
    deleted, _ = DBTaskResult.objects.filter(
        queue_name=QUEUE,
        status__in=(TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED),
        finished_at__lt=timezone.now() - older_than,
    ).delete()
    return deleted


# -- the workers inside a server process ---------------------------------------------------


def start_workers(count: int) -> None:
    """Start ``count`` webhook workers in this process: threads of the library's own
    database worker, each restarted after a failure (``boards.boot`` starts them once)."""
    for n in range(count):
        worker = Worker(
            queue_names=[QUEUE],
            interval=settings.KANBAN_WORKER_POLL_SECONDS,
            batch=False,
            backend_name="default",
            startup_delay=False,
            max_tasks=None,
            worker_id=f"{socket.gethostname()}-{os.getpid()}-{n}"[:64],
            excluded_queue_names=[],
        )
        threading.Thread(
            target=_work, args=(worker,), name=f"webhook-worker-{n}", daemon=True
        ).start()


def _work(worker: Worker) -> None:
    while True:
        try:
            worker.run()
        except Exception:  # a database hiccup must not end the worker
            logger.exception("webhook worker stopped; restarting")
        finally:
            close_old_connections()
        threading.Event().wait(1)

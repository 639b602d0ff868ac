"""Telling a person's devices what waits for them (SPEC §14), and taking it back.

Every change that can alter what waits for a person (``events.on_needs_change``, after
commit, in whichever process wrote) enqueues ``push_board`` on the webhooks' background
queue. A worker compares the board's Needs-you items with what each device was told
(``PushNotice``): a new item (or an item in a new state: the task's version is part of
its name) is pushed with fresh one-time links; an item that left is withdrawn (same
``tag``, ``withdraw: true``); an item whose links lapsed while it still waits is pushed
once more. The comparison is idempotent and claims each row before sending, so two
workers never send one push twice. Pushes go through ``egress`` like webhooks: the same
address rules, the same deadline.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Min, Q
from django.urls import reverse
from django.utils import timezone
from django_tasks import task
from pywebpush import WebPusher

from boards.core.permissions import may
from boards.core.services import pushes, stepup
from boards.models import Board, Membership, PushDevice, PushNotice, Reason, Role
from boards.needs import reads
from boards.push import keys, links
from boards.webhooks import egress
from boards.webhooks.delivery import QUEUE

logger = logging.getLogger(__name__)

# RFC 8030 allows 4096 bytes of body; aes128gcm spends 86 on its header, 16 on the tag
# and one on the padding delimiter.
BODY_MAX = 4096
PLAINTEXT_MAX = BODY_MAX - 86 - 16 - 1
TEXT_MAX = 600


def wake(board_id: int) -> None:
    """After a change on the board: have a worker bring its devices up to date (nothing
    when nobody has a device)."""
    try:
        if PushDevice.objects.exists():
            push_board.enqueue(board_id)
    except Exception:
        logger.exception("enqueueing the pushes of board %s failed", board_id)


@task(queue_name=QUEUE)
def push_board(board_id: int) -> int:
    """The worker's task: bring the board's devices up to date; returns pushes sent."""
    return board_sync(board_id)


def item_key(item: reads.Item) -> str:
    """An item's exact state: a task's number and version, a call's or a session's id."""
    if item.task is not None:
        return stepup.task_key(item.task)
    if item.call is not None:
        return stepup.call_key(item.call)
    return item.id


@dataclass
class Wanted:
    device: PushDevice
    item: reads.Item
    key: str


def _roles(board: Board) -> dict[int, Role]:
    """Who may act on the board's items, by user id: its members and the superusers."""
    roles = {
        user_id: Role(role)
        for user_id, role in Membership.objects.filter(
            board=board, user__is_active=True
        ).values_list("user_id", "role")
    }
    for user_id in (
        get_user_model()
        .objects.filter(is_superuser=True, is_active=True)
        .values_list("pk", flat=True)
    ):
        roles[user_id] = Role.ADMIN
    return roles


def wanted(board: Board) -> dict[tuple[int, str], Wanted]:
    """Which device should show which item now: every device of every person who may
    decide it, for the kinds each device chose."""
    roles = _roles(board)
    devices = list(PushDevice.objects.filter(user_id__in=roles).select_related("user"))
    if not devices:
        return {}
    out: dict[tuple[int, str], Wanted] = {}
    for item in reads.needs_you([board]):
        key = item_key(item)
        for device in devices:
            role = roles[device.user_id]
            kinds = device.kinds if isinstance(device.kinds, list) else []
            # A call that ran without the board's verdict reaches whoever is pushed
            # approvals, as its approval did (a device may also choose it alone).
            if item.reason not in kinds and not (
                item.reason == Reason.TAMPERING and Reason.APPROVAL in kinds
            ):
                continue
            if item.reason in (Reason.APPROVAL, Reason.TAMPERING) and not may(role, "approve"):
                continue
            mine = item.allowed(lambda action, role=role: may(role, action))
            if mine.recommended is None and not mine.actions:
                continue
            out[(device.pk, key)] = Wanted(device, mine, key)
    return out


def board_sync(board_id: int) -> int:
    """Push what is new, withdraw what left, push again what lapsed; the pushes sent."""
    board = Board.objects.filter(pk=board_id).first()
    if board is None:
        return 0
    now = timezone.now()
    want = wanted(board)
    sent = 0
    # For the event log: one event per item, with how many devices took it.
    pushed: dict[str, pushes.Sent] = {}
    again: dict[str, pushes.Sent] = {}
    withdrawn: dict[str, pushes.Sent] = {}
    open_notices = list(PushNotice.objects.filter(board=board, withdrawn_at__isnull=True))
    for notice in open_notices:
        if (notice.device_id, notice.item) in want:
            continue
        # Claimed first: only the worker whose update took it sends the withdrawal.
        if PushNotice.objects.filter(pk=notice.pk, withdrawn_at__isnull=True).update(
            withdrawn_at=now
        ):
            took = _send(notice.device_id, {"tag": notice.tag, "withdraw": True})
            _count(withdrawn, notice.item, took)
            sent += took
    told = set(
        PushNotice.objects.filter(board=board, device_id__in={d for d, _ in want}).values_list(
            "device_id", "item"
        )
    )
    expires = now + timedelta(seconds=settings.KANBAN_PUSH_LINK_SECONDS)
    for (device_id, key), one in want.items():
        if (device_id, key) in told:
            continue
        try:
            with transaction.atomic():
                notice = PushNotice.objects.create(
                    device=one.device,
                    board=board,
                    item=key,
                    tag=f"{board.slug}:{key}",
                    expires_at=expires,
                )
        except IntegrityError:
            continue  # another worker told this device of it
        took = _send(device_id, payload(one, notice.tag, expires))
        _count(pushed, key, took)
        sent += took
    # Links lapsed while the item still waits: once more, with fresh links.
    for notice in PushNotice.objects.filter(
        board=board, withdrawn_at__isnull=True, repushed=False, expires_at__lte=now
    ):
        lapsed = want.get((notice.device_id, notice.item))
        if lapsed is None:
            continue
        if PushNotice.objects.filter(pk=notice.pk, repushed=False).update(
            repushed=True, expires_at=expires
        ):
            took = _send(notice.device_id, payload(lapsed, notice.tag, expires))
            _count(again, notice.item, took)
            sent += took
    pushes.pushes_record(board=board, pushed=pushed, again=again, withdrawn=withdrawn)
    _again_when_links_lapse(board)
    return sent


def _count(tally: dict[str, pushes.Sent], key: str, took: int) -> None:
    was = tally.get(key, pushes.Sent())
    tally[key] = pushes.Sent(was.devices + took, was.failed + (1 - took))


def _again_when_links_lapse(board: Board) -> None:
    """Have the board looked at again when its earliest unrepeated links lapse."""
    first = PushNotice.objects.filter(
        board=board, withdrawn_at__isnull=True, repushed=False
    ).aggregate(at=Min("expires_at"))["at"]
    if first is None:
        return
    try:
        push_board.using(run_after=first + timedelta(seconds=1)).enqueue(board.pk)
    except Exception:
        logger.exception("scheduling board %s's repush failed", board.pk)


def _public(path: str) -> str:
    return f"{settings.KANBAN_PUBLIC_URL}{path}"


def title_of(item: reads.Item) -> str:
    """Who asks, from where, and what: the agent, its client and machine, the command or
    the task."""
    who = item.agent or "An agent"
    session = item.source_session
    if session is not None:
        where = " on ".join(p for p in (session.client, session.host) if p)
        if where:
            who = f"{who} ({where})"
    if item.call is not None and item.reason == Reason.TAMPERING:
        ran = f"{who} ran {item.call.tool_name} without the board's verdict"
        return f"{ran}: {item.call.summary}"[:TEXT_MAX]
    if item.call is not None:
        return f"{who} asks to run {item.call.tool_name}: {item.call.summary}"[:TEXT_MAX]
    return f"{who}: {item.subject}"[:TEXT_MAX]


def payload(one: Wanted, tag: str, expires: datetime) -> dict[str, Any]:
    """What the device shows: SPEC §14's JSON, the action links made for its person."""
    item = one.item
    url = _public(_item_path(item))
    actions: list[dict[str, str]] = []
    user = one.device.user
    approvable = item.reason == Reason.APPROVAL and (item.call is not None or item.task)
    if approvable:
        needs_passkey = stepup.step_up_needed(
            user=user,
            board=item.board,
            item_key=one.key,
            step_up=stepup.is_step_up(item.board, call=item.call, task=item.task),
        )
        for action, label in (("approve", "Approve"), ("deny", "Deny")):
            if action == "approve" and needs_passkey:
                continue  # approving it needs a passkey: on the page, not from a tap
            raw = links.link_make(
                user=user, board=item.board, item=item, action=action, expires_at=expires
            )
            actions.append(
                {"action": action, "title": label, "url": _public(links.link_url(action, raw))}
            )
    body = f"{item.board.name}: {item.question}"[:TEXT_MAX]
    data: dict[str, Any] = {
        "title": title_of(item),
        "body": body,
        "tag": tag,
        "url": url,
        "actions": actions,
    }
    while len(_encoded(data)) > PLAINTEXT_MAX and len(data["title"]) > 40:
        data["title"] = data["title"][: len(data["title"]) // 2] + "…"
    return data


def _item_path(item: reads.Item) -> str:
    if item.task is not None:
        return reverse("task", args=[item.board.slug, item.task.number])
    return reverse("board", args=[item.board.slug]) + "#roster"


def _encoded(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _send(device_id: int, data: dict[str, Any]) -> int:
    """Push ``data`` to the device, once; 1 when the push service took it. A device whose
    endpoint is gone (404, 410) is forgotten."""
    device = PushDevice.objects.filter(pk=device_id).first()
    if device is None:
        return 0
    try:
        body, headers = encrypted(device, _encoded(data))
    except Exception:
        logger.exception("push to device %s: could not encrypt", device_id)
        return 0
    status, error = egress.post(device.endpoint, body, headers)
    if status in (404, 410):
        PushDevice.objects.filter(pk=device_id).delete()
        return 0
    ok = status is not None and 200 <= status < 300
    fields: dict[str, Any] = {"last_status": status, "last_error": error[:200]}
    if ok:
        PushDevice.objects.filter(pk=device_id).update(last_used_at=timezone.now())
    else:
        logger.warning("push to device %s: %s", device_id, error or status)
    tag = data.get("tag", "")
    PushNotice.objects.filter(Q(device_id=device_id) & Q(tag=tag)).update(**fields)
    return 1 if ok else 0


def encrypted(device: PushDevice, plaintext: bytes) -> tuple[bytes, dict[str, str]]:
    """The push's body (aes128gcm, RFC 8291, for the device's keys) and its headers
    (VAPID, and a TTL no shorter than the links' life: pywebpush's default is 0, which a
    sleeping phone never gets)."""
    subscription = {
        "endpoint": device.endpoint,
        "keys": {"p256dh": device.p256dh, "auth": device.auth},
    }
    body = WebPusher(subscription).encode(plaintext, content_encoding="aes128gcm")["body"]
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Encoding": "aes128gcm",
        "TTL": str(settings.KANBAN_PUSH_LINK_SECONDS + 60),
        "Urgency": "high",
        "Authorization": keys.authorization(device.endpoint),
    }
    return body, headers

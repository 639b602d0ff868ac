"""Publishing a board's changes: after commit, rendered once, to every open board and watcher.

A change is sent to the channel-layer group ``board_<id>`` as one message::

    {"type": "board.update", "seq": 42, "events": [...], "cards": {"3": "<html>"},
     "header": {"board-summary": "<html>", "approvals": "<html>", ...}, "full": None}

``seq`` labels the state the fragments were rendered from: it is read before the
tasks, so the fragments are at least that new. Consumers use it to drop a
fragment that arrives after a newer one of the same card, and browsers send the
last one they saw when they reconnect, to catch up.

A board's socket also joins two groups that only ever tell it to stop: its login
session's (``session.ended`` on logout) and its person's, ``user_<id>``
(``access.changed`` when they are taken off a board, or their account is
deactivated or deleted: the socket checks it may stay open).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from functools import partial
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import close_old_connections, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest

from boards.core.activity import describe, signal_of
from boards.core.fields import TASK_FIELDS
from boards.core.states import EventKind
from boards.models import Board, Event, Status, Task

logger = logging.getLogger(__name__)

# Catching up more cards than this re-renders the whole board instead.
CATCH_UP_MAX_CARDS = 300


def group_name(board_id: int) -> str:
    return f"board_{board_id}"


def session_group(session_key: str) -> str:
    """The group of one login session's sockets (hashed: group names travel through Redis)."""
    return "session_" + hashlib.sha256(session_key.encode()).hexdigest()[:32]


def user_group(user_id: int) -> str:
    """The group of one person's sockets, on every board they have open."""
    return f"user_{user_id}"


@receiver(user_logged_out, dispatch_uid="boards.core.events.end_session")
def _on_logout(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # A board's socket outlives its page: when its person logs out, it must stop too.
    if request is not None and request.session.session_key:
        end_session(request.session.session_key)


def end_session(session_key: str) -> None:
    """Close every socket of a login session that just ended (logout), in every process."""
    _control(session_group(session_key), {"type": "session.ended"})


# A save that writes only these fields cannot change what its person may see
# (``last_login`` is saved on every login).
ACCESS_FIELDS = frozenset({"is_active", "is_superuser"})


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="boards.core.events.user_saved")
def _on_user_saved(
    sender: Any, instance: Any, created: bool, update_fields: Any = None, **kwargs: Any
) -> None:
    # A person deactivated, or no longer a superuser, in the admin site (or anywhere
    # else the user model is saved): their open boards must check they may stay open.
    if not created and (update_fields is None or ACCESS_FIELDS & set(update_fields)):
        access_changed(user_id=instance.pk)


@receiver(
    post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="boards.core.events.user_deleted"
)
def _on_user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    access_changed(user_id=instance.pk)


def access_changed(*, user_id: int, board_id: int | None = None) -> None:
    """Once the current transaction commits, have the person's open sockets on the board
    (``board_id``), or on every board (None), check that their person may still see it,
    and close if not; in every process. Nothing is sent if the transaction rolls back.
    """
    message = {"type": "access.changed", "board": board_id}
    transaction.on_commit(partial(_control, user_group(user_id), message), robust=True)


# Every inbox socket: told which board's header changed (``_deliver``), it re-reads what
# waits for its person when the board is theirs, or newer than any it knew.
INBOXES_GROUP = "inboxes"


def _control(group: str, message: dict) -> None:
    """Send a message that tells sockets to stop; a failure is logged (its write stands)."""
    try:
        layer = get_channel_layer()
        if layer is not None and _may_have_listeners(layer, group):
            async_to_sync(_bounded_group_send)(layer, group, message)
    except Exception:
        logger.exception("telling the sockets of %s to stop failed", group)


def event_to_dict(event: Event) -> dict:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "taskId": str(event.task_number) if event.task_number is not None else None,
        "actor": event.actor,
        "text": describe(event.kind, event.task_number, event.actor, event.data),
        "signal": signal_of(event.kind, event.data),
    }


# Changes to these fields alone leave the header (counts, approvals, roster) as it was:
# the quiet rows of ``TASK_FIELDS``, and the fields kept by services of their own
# ((un)blocking has its own events).
QUIET_FIELDS = frozenset(
    {row.wire for row in TASK_FIELDS if row.quiet}
    | {"metadata", "parentId", "usage", "addBlockedBy", "removeBlockedBy", "addBlocks"}
)


# Kinds that change nothing the header shows (nor what waits for a person: a push's own
# record must not wake the pushes again).
QUIET_KINDS = frozenset(
    {
        EventKind.MESSAGE,
        EventKind.PUSHED,
        EventKind.PUSH_WITHDRAWN,
        EventKind.PUSH_ACTED,
        EventKind.STEP_UP,
        # A command on its way to a runner: its runner's poll wakes on it, no page changes.
        EventKind.RUNNER_COMMAND,
    }
)


def changes_header(events: Iterable[Event]) -> bool:
    """Whether these events can change the board's header, so it must be re-rendered."""
    for event in events:
        if event.kind in QUIET_KINDS:
            continue
        if event.kind != EventKind.UPDATED or set(event.data.get("fields", {})) - QUIET_FIELDS:
            return True
    return False


def publish(
    board: Board,
    events: Iterable[Event],
    touched: Iterable[int],
    *,
    reset: bool = False,
    header: bool = True,
) -> None:
    """Send the board's update once the current transaction commits.

    A failed send is logged and swallowed: the write has already committed and a
    reconnecting browser catches up from the event log.
    """
    payload_events = [event_to_dict(e) for e in events]
    callback = partial(_send, board.pk, payload_events, sorted(set(touched)), reset, header)
    transaction.on_commit(callback, robust=True)


# Told, after commit, of each change that can alter what waits for a person (a change to
# the header): Web Push (boards.push) listens, installed at startup, so the write path
# never imports it.
_needs_listeners: list[Callable[[int], None]] = []


def on_needs_change(listener: Callable[[int], None]) -> None:
    """Call ``listener(board_id)`` after each commit that may change what waits there."""
    if listener not in _needs_listeners:
        _needs_listeners.append(listener)


def _tell_needs(board_id: int) -> None:
    for listener in _needs_listeners:
        try:
            listener(board_id)
        except Exception:  # a listener's trouble is its own: the write stands
            logger.exception("telling %s of board %s's change failed", listener, board_id)


def _send(
    board_id: int, events: list[dict], touched: list[int], reset: bool, header: bool = True
) -> None:
    """After commit: hand the update to this process's publisher, so the write's answer
    does not wait for the HTML (``KANBAN_PUSH_IN_BACKGROUND``; off, it is sent here)."""
    job = (board_id, events, touched, reset, header)
    if header:
        _tell_needs(board_id)
    if settings.KANBAN_PUSH_IN_BACKGROUND:
        _publisher().put((job, _server_loop()))
    else:
        _deliver(*job)


def publish_later(board_id: int, agent: str) -> None:
    """After commit, re-render the board's roster and the cards ``agent`` holds, at most
    once per ``KANBAN_SESSION_PUSH_SECONDS`` a board: a client session's routine activity
    (ten tool calls a second) is coalesced into a few pushes, none of them lost (the last
    change of a burst is always sent)."""
    transaction.on_commit(partial(_coalesce, board_id, agent), robust=True)


_later: dict[int, set[str]] = {}
_last_flush: dict[int, float] = {}
_later_lock = threading.Lock()


def _coalesce(board_id: int, agent: str) -> None:
    loop = _server_loop()
    window = float(settings.KANBAN_SESSION_PUSH_SECONDS)
    with _later_lock:
        if board_id in _later:
            _later[board_id].add(agent)  # a flush is already due: it will carry this too
            return
        _later[board_id] = {agent}
        wait = _last_flush.get(board_id, -window) + window - time.monotonic()
    if wait <= 0:
        _flush(board_id, loop)
    else:
        timer = threading.Timer(wait, _flush, args=(board_id, loop, True))
        timer.daemon = True
        timer.start()


def _flush(board_id: int, loop: asyncio.AbstractEventLoop | None, own_thread: bool = False) -> None:
    with _later_lock:
        agents = _later.pop(board_id, set())
        _last_flush[board_id] = time.monotonic()
    try:
        held = Task.objects.filter(
            board_id=board_id, status=Status.IN_PROGRESS, owner__in=sorted(agents)
        ).order_by("number")
        touched = list(held.values_list("number", flat=True)[:20])
    except Exception:
        logger.exception("reading the cards of board %s's sessions failed", board_id)
        touched = []
    finally:
        if own_thread:  # the timer's thread: its connection is its own to close
            close_old_connections()
    job: tuple[int, list[dict], list[int], bool, bool] = (board_id, [], touched, False, True)
    if settings.KANBAN_PUSH_IN_BACKGROUND:
        _publisher().put((job, loop))
    else:
        _deliver(*job)


def _server_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop serving this request, when the write runs in one of its sync threads.

    The channel layer (the in-memory one above all) belongs to that loop: the publisher
    thread sends on it rather than on a loop of its own.
    """
    loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    pid = getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None)
    if loop is not None and pid == os.getpid() and loop.is_running():
        return loop
    return None


def _deliver(
    board_id: int,
    events: list[dict],
    touched: list[int],
    reset: bool,
    header: bool = True,
    loop: asyncio.AbstractEventLoop | None = None,
) -> None:
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        if header and _may_have_listeners(layer, INBOXES_GROUP):
            # What waits for a person may have changed: open inboxes re-read it.
            _group_send(layer, INBOXES_GROUP, {"type": "board.changed", "board": board_id}, loop)
        if not _may_have_listeners(layer, group_name(board_id)):
            return
        # A change to very many cards (a big batch) is sent as the board's first page.
        full = reset or len(touched) > CATCH_UP_MAX_CARDS
        message = render_update(board_id, touched, full=full, header=header)
        message["events"] = events
        _group_send(layer, group_name(board_id), message, loop)
    except TimeoutError:
        logger.warning("broadcast of board %s update timed out", board_id)
    except Exception:
        logger.exception("broadcast of board %s update failed", board_id)


def _group_send(
    layer: Any, group: str, message: dict, loop: asyncio.AbstractEventLoop | None
) -> None:
    """Send on the server's loop when there is one (the publisher thread), else here."""
    if loop is not None and loop.is_running():
        send = _bounded_group_send(layer, group, message)
        future = asyncio.run_coroutine_threadsafe(send, loop)
        future.result(settings.KANBAN_BROADCAST_TIMEOUT_SECONDS + 1)
    else:
        async_to_sync(_bounded_group_send)(layer, group, message)


def _may_have_listeners(layer: Any, group: str) -> bool:
    """False only when nobody can receive a message sent to the group: for a board's
    update, no open board and no waiting TaskWatch.

    Rendering a write's fragments costs more CPU than the write itself; a board nobody
    watches should not pay it. Only the in-memory layer (one process) can tell for sure;
    with Redis, another server's browsers may be listening, so the update is always sent.
    A browser that opens the board later loads it, or catches up from the event log.
    """
    if isinstance(layer, InMemoryChannelLayer):
        return bool(layer.groups.get(group))
    return True


_queue: queue.SimpleQueue[tuple] | None = None
_queue_lock = threading.Lock()


def _publisher() -> queue.SimpleQueue[tuple]:
    """The process's one publisher thread: updates leave in commit order (one queue,
    one thread), each rendered once for every open board of this process's layer."""
    global _queue
    with _queue_lock:
        if _queue is None:
            _queue = queue.SimpleQueue()
            threading.Thread(
                target=_publish_forever, args=(_queue,), name="board-publisher", daemon=True
            ).start()
        return _queue


def _publish_forever(jobs: queue.SimpleQueue[tuple]) -> None:
    while True:
        (board_id, events, touched, reset, header), loop = jobs.get()
        try:
            _deliver(board_id, events, touched, reset, header, loop)
        finally:
            close_old_connections()


async def _bounded_group_send(layer: Any, group: str, message: dict) -> None:
    # The write has committed and its answer is waiting: an unresponsive Redis may
    # delay it by this much at most (browsers catch up from the event log).
    await asyncio.wait_for(
        layer.group_send(group, message), settings.KANBAN_BROADCAST_TIMEOUT_SECONDS
    )


# What a board's update carries is the web's to render (boards.web.rendering): it installs
# its renderer when the app is ready (boards.apps), so the write path never imports pages.
Renderer = Callable[..., dict]
_renderer: Renderer | None = None


def install_renderer(render: Renderer) -> None:
    """Set the function that renders a board's update: ``render(board_id, numbers, *,
    full, header)`` → the ``board.update`` message without its events."""
    global _renderer
    _renderer = render


def render_update(board_id: int, numbers: Iterable[int], *, full: bool, header: bool) -> dict:
    if _renderer is None:
        raise RuntimeError("no board renderer installed (boards.apps installs the web's)")
    return _renderer(board_id, numbers, full=full, header=header)


def missed_numbers(board: Board, since: int) -> tuple[set[int], bool]:
    """Tasks changed after event ``since``, and whether a full re-render is needed instead."""
    rows = list(
        Event.objects.filter(board=board, seq__gt=since)
        .order_by("seq")
        .values_list("task_number", "kind")[: CATCH_UP_MAX_CARDS * 4]
    )
    numbers = {n for n, _ in rows if n is not None}
    full = (
        any(kind == EventKind.RESET for _, kind in rows)
        or len(numbers) > CATCH_UP_MAX_CARDS
        or len(rows) >= CATCH_UP_MAX_CARDS * 4
    )
    return numbers, full


@contextlib.asynccontextmanager
async def listening(board_id: int, who: str) -> AsyncIterator[tuple[Any, str]]:
    """Join the board's stream for a waiter (a TaskWatch, a held tool call): yields the
    layer and a channel to ``receive`` on, or an empty channel when the layer cannot be
    reached (the waiter then polls). Join before reading the state it waits on, so a
    change landing in between is not missed; leaves the group on the way out."""
    layer = get_channel_layer()
    group = group_name(board_id)
    channel = ""
    try:
        channel = await layer.new_channel()
        await asyncio.wait_for(layer.group_add(group, channel), 2)
    except Exception:
        logger.warning("%s on board %s: channel layer unavailable, polling", who, group)
        channel = ""
    try:
        yield layer, channel
    finally:
        if channel:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

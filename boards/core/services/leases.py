"""Leases on in-progress work: renewed while the owner calls, reclaimed when they lapse.

An agent that calls tools is alive: every call renews its leases (``renew``, from
``boards.core.auth``), and ``heartbeat`` (TaskHeartbeat) does it explicitly during long
silent work. A lease that lapses is reclaimed by ``sweep``, which every server
process runs about once a second in a background thread (``boards.boot``):
the task goes back to pending through the state machine (``lifecycle.reclaim``)
in the board's unit of work, re-checked under the board's lock, so when several
processes sweep at once each lapse is reclaimed exactly once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from boards.core import events
from boards.core.errors import Conflict
from boards.core.selectors import iso
from boards.core.services import costs, lifecycle
from boards.core.services.work import Work, unit_of_work
from boards.models import Board, Status, Task

logger = logging.getLogger(__name__)

SWEEPER_ACTOR = "system"


def _slack(seconds: int) -> float:
    """How stale a lease may get before a call renews it: renewals write (and re-render
    the card) at most every minute for long leases, often enough for short ones."""
    return max(0.5, min(60.0, seconds / 10))


def renew(*, board: Board, agent: str, task_number: int | None = None, force: bool = False) -> int:
    """Renew ``agent``'s unexpired leases on the board (or one task's); returns how many.

    Cheap when nothing is due: one indexed read. A renewal re-renders the card (its
    time left) on open boards, but records no event: nothing happened to the task.
    """
    now = timezone.now()
    held = Task.objects.filter(
        board=board, owner=agent, status=Status.IN_PROGRESS, lease_expires_at__gt=now
    )
    if task_number is not None:
        held = held.filter(number=task_number)
    due: dict[int, list[int]] = defaultdict(list)
    rows = held.order_by().values_list("number", "lease_seconds", "lease_expires_at")
    for number, seconds, expires in rows:
        seconds = seconds or 0
        stale = expires is not None and expires < now + timedelta(seconds=seconds - _slack(seconds))
        if seconds and (force or stale):
            due[seconds].append(number)
    renewed = 0
    for seconds, numbers in due.items():
        renewed += Task.objects.filter(
            board=board, number__in=numbers, owner=agent, lease_expires_at__gt=now
        ).update(lease_expires_at=now + timedelta(seconds=seconds))
    if renewed:
        events.publish(board, [], {n for numbers in due.values() for n in numbers})
    return renewed


def heartbeat(
    *,
    board: Board,
    agent: str,
    task_id: str | int | None = None,
    usage: Mapping[str, Any] | None = None,
) -> list[dict]:
    """TaskHeartbeat: renew now; with a task, refuse (409) when the agent does not hold it.
    With ``usage`` (and a task), add it to the task's (costs.add_usage)."""
    number = None
    if task_id is not None and usage:
        with unit_of_work(board, agent) as work:
            task = work.task(task_id)
            _check_held(work, task, agent)
            if costs.add_usage(work, task, usage):
                costs.save_usage_only(work, task)
        task_id = task.number
    if task_id is not None:
        # A read and a check, no write of the task: no unit of work (and no board lock).
        work = Work(board, agent, person=False)
        task = work.task(task_id)
        _check_held(work, task, agent)
        number = task.number
    renew(board=board, agent=agent, task_number=number, force=True)
    held = Task.objects.filter(
        board=board, owner=agent, status=Status.IN_PROGRESS, lease_expires_at__isnull=False
    )
    if number is not None:
        held = held.filter(number=number)
    return [
        {"taskId": str(n), "lease": {"expiresAt": iso(expires)}}
        for n, expires in held.order_by("number").values_list("number", "lease_expires_at")
    ]


def _check_held(work: Work, task: Task, agent: str) -> None:
    lifecycle.check_lease(work, task)
    if task.owner != agent or task.status != Status.IN_PROGRESS:
        raise Conflict(
            f"Task #{task.number} is not in progress under your name "
            f"(status {task.status}, owner {task.owner or 'nobody'})",
            code="not_owner",
        )


def sweep(*, now: datetime | None = None, limit: int = 200) -> int:
    """Reclaim lapsed leases (up to ``limit`` a board); returns how many this call reclaimed.

    Each board is swept on its own: a board that cannot be read or written (a failure
    logged here) never stops another board's reclaims.
    """
    now = now or timezone.now()
    # No ordering: the model's default (board, number) would join and sort the boards.
    lapsed = Task.objects.filter(status=Status.IN_PROGRESS, lease_expires_at__lt=now).order_by()
    reclaimed = 0
    for board_id in set(lapsed.values_list("board_id", flat=True)):
        try:
            reclaimed += _sweep_board(board_id, now, limit)
        except Exception:
            logger.exception("lease sweep of board %s failed", board_id)
    return reclaimed


def _sweep_board(board_id: int, now: datetime, limit: int) -> int:
    board = Board.objects.get(pk=board_id)
    reclaimed = 0
    with unit_of_work(board, SWEEPER_ACTOR, person=True) as work:
        # Under the board's lock: another process may have reclaimed it, or the owner
        # renewed it, since the read above.
        for task in Task.objects.filter(
            board=work.board, status=Status.IN_PROGRESS, lease_expires_at__lt=now
        ).order_by("number")[:limit]:
            lifecycle.reclaim(work, task)
            reclaimed += 1
    return reclaimed

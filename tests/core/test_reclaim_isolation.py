"""The sweeper's reclaims go on across boards: one board that cannot be read stops none of
the others'."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from boards.core import services
from boards.models import Task
from tests.support.factories import make_task


def test_one_board_that_cannot_be_read_does_not_stop_reclaims_on_another(board, other_board):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL refuses to store the unreadable value this test plants")
    make_task(board, "Here")
    make_task(other_board, "There")
    services.task_claim(board=board, agent="alice", task_id=1, lease_seconds=5)
    services.task_claim(board=other_board, agent="bob", task_id=1, lease_seconds=5)
    past = timezone.now() - timedelta(seconds=10)
    Task.objects.filter(number=1).update(lease_expires_at=past)
    # A value the decimal converter cannot read back (what an overflow once left behind).
    with connection.cursor() as cursor:
        cursor.execute("UPDATE boards_board SET spent_usd = %s WHERE id = %s", ["1e30", board.pk])

    services.leases_sweep()

    assert Task.objects.get(board=other_board, number=1).status == "pending"
    assert Task.objects.get(board=board, number=1).status == "in_progress"

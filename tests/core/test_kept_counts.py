"""The board's kept open counts (issue #24) never drift from a count of its tasks: after a
random mix of every kind of write, one after another and from many threads at once."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from boards.core import selectors, services
from boards.core.errors import ServiceError
from boards.core.services.counts import recount
from boards.models import Task
from boards.needs import decisions
from tests.support.factories import make_board, make_task

from .test_concurrency import run_in_threads

AGENTS = ("ann", "ben", "cat")


def one_write(board, rng: random.Random) -> None:
    """A random write, as agents and people make them; refusals are part of the mix."""
    numbers = list(Task.objects.filter(board=board).values_list("number", flat=True))
    agent = rng.choice(AGENTS)
    pick = rng.choice(numbers) if numbers else None
    kind = rng.choice(
        ["create", "create", "claim", "complete", "fail", "retry", "delete", "reclaim",
         "gate", "decide", "block", "reassign", "settings", "claim_next"]
    )  # fmt: skip
    try:
        if kind == "create" or pick is None:
            blockers = rng.sample(numbers, k=min(len(numbers), rng.randint(0, 2)))
            services.task_create(
                board=board,
                actor=agent,
                subject=f"t{len(numbers)}",
                blocked_by=blockers,
                requires_approval=rng.random() < 0.15,
            )
        elif kind == "claim":
            services.task_claim(board=board, agent=agent, task_id=pick)
        elif kind == "claim_next":
            services.task_claim_next(board=board, agent=agent)
        elif kind in ("complete", "fail"):
            owner = Task.objects.get(board=board, number=pick).owner or agent
            status = "completed" if kind == "complete" else "failed"
            services.task_update(board=board, actor=owner, task_id=pick, status=status)
        elif kind == "retry":
            decisions.reopen(board=board, person="pat", task_id=pick)
        elif kind == "delete":
            services.task_delete(board=board, actor="pat", person=True, task_id=pick)
        elif kind == "reclaim":
            Task.objects.filter(board=board, status="in_progress").update(
                lease_expires_at=timezone.now() - timedelta(seconds=1)
            )
            services.leases_sweep()
        elif kind == "gate":
            services.approval_require(board=board, person="pat", task_id=pick, required=True)
        elif kind == "decide":
            services.approval_decide(
                board=board, person="pat", task_id=pick, approve=rng.random() < 0.5, note=""
            )
        elif kind == "block":
            other = rng.choice(numbers)
            services.task_update(board=board, actor="pat", person=True, task_id=pick,
                                 add_blocked_by=[other])  # fmt: skip
        elif kind == "reassign":
            services.task_reassign(board=board, actor="pat", person=True, task_id=pick, owner="")
        elif kind == "settings":
            services.board_settings(board=board, actor="pat", maxAttempts=rng.randint(1, 3))
    except ServiceError:
        pass  # refused (blocked, gated, terminal, a cycle…): nothing may have changed


def test_counts_stay_exact_through_a_random_mix_of_writes(db):
    board = make_board("mix")
    rng = random.Random(2411)
    for step in range(300):
        one_write(board, rng)
        if step % 25 == 24:
            decisions.needs_sweep(now=timezone.now() + timedelta(hours=1))
            assert recount(board) == {}, f"drift after step {step}"
    board.refresh_from_db()
    counts = selectors.board_counts(board)
    open_tasks = Task.objects.filter(board=board).unfinished().count()
    assert counts["pending"] + counts["blocked"] + counts["in_progress"] == open_tasks


def test_a_reset_zeroes_the_counts_and_recount_reports_and_fixes_drift(db):
    board = make_board("drift")
    for n in range(3):
        make_task(board, f"t{n}")
    assert selectors.board_counts(board)["ready"] == 3
    type(board).objects.filter(pk=board.pk).update(ready_count=7)  # drift, planted
    assert recount(board) == {"ready": (7, 3)}
    assert recount(board, fix=True) == {"ready": (7, 3)}
    assert recount(board) == {}
    services.board_reset(board=board, actor="pat")
    assert set(selectors.board_counts(board).values()) == {0}
    assert recount(board) == {}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_counts_stay_exact_under_concurrent_writers():
    board = make_board("race")
    for n in range(10):
        make_task(board, f"seed {n}")

    def writer(index: int) -> None:
        rng = random.Random(index)
        for _ in range(40):
            one_write(type(board).objects.get(pk=board.pk), rng)

    run_in_threads(6, writer)
    assert recount(board) == {}

"""Webhooks from real server processes (issues 15, 23): the workers inside daphne, and the
task library's own worker processes (``db_worker``) as a scale-out deployment runs them.

The endpoints are real HTTP servers on loopback (``tests.support.receiver``), allowed by
``KANBAN_WEBHOOK_ALLOW_LOOPBACK``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.liveserver import Agent, Cluster, postgres_admin_url, wait_until
from tests.support.receiver import Dripper, Receiver

pytestmark = pytest.mark.slow

TIMEOUT = 2  # seconds: KANBAN_WEBHOOK_DEADLINE_SECONDS of the servers and workers
ENV = {
    "KANBAN_WEBHOOK_ALLOW_LOOPBACK": "1",
    "KANBAN_WEBHOOK_DEADLINE_SECONDS": str(TIMEOUT),
    "KANBAN_WEBHOOK_BACKOFF_SECONDS": "0.5",
    "KANBAN_WORKER_POLL_SECONDS": "0.1",
}
BACKENDS = [
    "sqlite",
    pytest.param(
        "postgresql",
        marks=pytest.mark.skipif(
            postgres_admin_url() is None,
            reason="runs in the PostgreSQL + Redis pass (DATABASE_URL=postgres://…)",
        ),
    ),
]


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for receiver in made:
        receiver.close()


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.stop()


def finish(agent: Agent, subject: str) -> float:
    """Create and complete a task; the seconds the completing TaskUpdate took."""
    status, body = agent.call("TaskCreate", {"subject": subject})
    assert status == 200, body
    started = time.monotonic()
    status, body = agent.call("TaskUpdate", {"taskId": body["task"]["id"], "status": "completed"})
    assert status == 200, body
    return time.monotonic() - started


def test_a_hanging_endpoint_delays_neither_a_write_nor_another_endpoint(
    tmp_path: Path, clusters, receivers
):
    cluster = Cluster(tmp_path, backend="sqlite", env=ENV)
    clusters.append(cluster)
    base = cluster.start()
    cluster.board("hooks")
    agent = Agent(base, "hooks", cluster.token("hooks", "worker-1"))
    hanging, healthy = Receiver(), Receiver()
    receivers.extend([hanging, healthy])
    hanging.hang.set()
    baseline = sorted(finish(agent, f"Before {n}") for n in range(5))[2]
    cluster.webhook("hooks", hanging.url, "completed")
    cluster.webhook("hooks", healthy.url, "completed")

    took = [finish(agent, f"Task {n}") for n in range(5)]

    # The writes never waited for the endpoint that hangs (each attempt may hang TIMEOUT s).
    assert max(took) < baseline + 1.0, (baseline, took)
    got = healthy.wait_for(5, timeout=TIMEOUT + 5)
    assert [r.json["task"]["subject"] for r in got] == [f"Task {n}" for n in range(5)]
    assert hanging.received, "the hanging endpoint was tried"
    hanging.hang.clear()
    # Once it answers, the hanging endpoint gets all five, in order (the first one again).
    wait_until(
        lambda: (
            {r.json["task"]["subject"] for r in hanging.received} >= {f"Task {n}" for n in range(5)}
        ),
        timeout=30,
        what="the endpoint that hung catches up",
    )
    subjects = [r.json["task"]["subject"] for r in hanging.received]
    assert subjects == sorted(subjects, key=lambda s: int(s.split()[1]))


def test_a_board_whose_endpoints_drip_holds_one_worker_and_other_boards_get_theirs(
    tmp_path: Path, clusters, receivers
):
    # Issue 23's case: two endpoints of one board that answer a byte at a time held both
    # worker threads of the server, and another board's events waited. The board may hold
    # one (KANBAN_WEBHOOK_SENDERS_PER_BOARD); the deadline is long here so that only that
    # rule lets the other board's event through.
    env = {**ENV, "KANBAN_WEBHOOK_DEADLINE_SECONDS": "120", "KANBAN_WORKER_THREADS": "2"}
    cluster = Cluster(tmp_path, backend="sqlite", env=env)
    clusters.append(cluster)
    base = cluster.start()
    drippers = [Dripper(every=1), Dripper(every=1)]
    healthy = Receiver()
    receivers.append(healthy)
    try:
        for slug in ("slow", "fine"):
            cluster.board(slug)
        for dripper in drippers:
            cluster.webhook("slow", dripper.url, "completed")
        cluster.webhook("fine", healthy.url, "completed")
        slow = Agent(base, "slow", cluster.token("slow", "worker-1"))
        fine = Agent(base, "fine", cluster.token("fine", "worker-1"))

        finish(slow, "Slow 0")
        wait_until(lambda: drippers[0].open + drippers[1].open, timeout=10, what="a drip")
        # Both senders were taken by the server's two workers (one drips, one let go).
        wait_until(
            lambda: cluster.manage(
                "shell",
                "-c",
                "from django_tasks_db.models import DBTaskResult; "
                "print(DBTaskResult.objects.ready().count())",
            ).endswith("0"),
            timeout=30,
            what="no sender waits for a worker",
        )
        finish(fine, "Fine 0")
        got = healthy.wait_for(1, timeout=10)
        assert [r.json["task"]["subject"] for r in got] == ["Fine 0"]
        assert drippers[0].open + drippers[1].open == 1
    finally:
        for dripper in drippers:
            dripper.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_worker_processes_deliver_each_attempt_once_and_a_killed_one_loses_nothing(
    tmp_path: Path, clusters, receivers, backend
):
    # The servers run no workers: the library's worker processes do (scale-out). The hung
    # attempt must outlast a `manage.py shell` start (seconds on a loaded machine) that
    # finds the worker holding it.
    deadline = 10
    env = {**ENV, "KANBAN_WORKER": "0", "KANBAN_WEBHOOK_DEADLINE_SECONDS": str(deadline)}
    cluster = Cluster(tmp_path, backend=backend, env=env)
    clusters.append(cluster)
    base = cluster.start()
    cluster.board("hooks")
    agent = Agent(base, "hooks", cluster.token("hooks", "worker-1"))
    receiver = Receiver()
    receivers.append(receiver)
    hook, secret = cluster.webhook("hooks", receiver.url)
    cluster.worker("w1", "--interval", "0.1")
    cluster.worker("w2", "--interval", "0.1")

    receiver.hang.set()  # the first delivery hangs in whichever worker takes it
    finish(agent, "Task 0")
    receiver.wait_for(1, timeout=15)
    holder = cluster.manage(
        "shell",
        "-c",
        "from django_tasks_db.models import DBTaskResult; "
        "print(DBTaskResult.objects.filter(status='RUNNING').get().worker_ids[-1])",
    ).split()[-1]
    cluster.kill_worker(holder)
    receiver.hang.clear()
    for n in range(1, 6):
        finish(agent, f"Task {n}")

    # The survivor sends the rest once the dead worker's hold on the endpoint lapses.
    def all_arrived() -> bool:
        return {r.json["task"]["subject"] for r in receiver.received} >= {
            f"Task {n}" for n in range(6)
        }

    wait_until(all_arrived, timeout=4 * deadline + 30, what="every event delivered")

    def states() -> str:
        return cluster.manage(
            "shell",
            "-c",
            "from boards.models import Delivery; "
            f"print(sorted(set(Delivery.objects.filter(webhook_id={hook}).values_list('status', flat=True))))",
        )

    # Every delivery is recorded as delivered: no attempt is left to make, none arrives later.
    wait_until(lambda: states().endswith("['delivered']"), timeout=30, what="deliveries settled")
    got = list(receiver.received)
    attempts = Counter((r.json["id"], r.json["attempt"]) for r in got)
    assert set(attempts.values()) == {1}, attempts  # every attempt made exactly once
    assert [r.json["task"]["subject"] for r in got] == ["Task 0"] + [f"Task {n}" for n in range(6)]
    assert [r.json["attempt"] for r in got[:2]] == [1, 2]  # the killed one's, then again
    assert all(r.verifies(secret) for r in got)

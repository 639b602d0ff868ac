"""Leases lapse in real server processes with nobody calling (the sweeper thread).

One daphne on SQLite: claimed work whose agent went silent is back in pending
within the lease plus a few seconds, and no request was needed for it. Two
daphne processes on PostgreSQL: each lapse is reclaimed exactly once although
both sweep. The tests wait by reading the servers' database, never by calling them.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.liveserver import Cluster, call, postgres_admin_url, wait_until

pytestmark = pytest.mark.slow

LEASE = 2  # seconds: the servers' KANBAN_LEASE_SECONDS
RECLAIMED = (
    "SELECT count(*), count(DISTINCT task_number) FROM boards_event WHERE kind = 'reclaimed'"
)


# The board and both agents' tokens in one manage.py process (each costs Django's start).
SETUP = """
import io, json
from django.core.management import call_command

def run(*args):
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]

run("createboard", "leases")
print(json.dumps([run("issuetoken", "leases", agent) for agent in ("silent", "observer")]))
"""


def _board_and_tokens(cluster: Cluster) -> tuple[str, str]:
    """Board ``leases``, and the tokens of ``silent`` and ``observer`` on it."""
    silent, observer = json.loads(cluster.manage("shell", "-c", SETUP).splitlines()[-1])
    return silent, observer


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.stop()


def _claim_all(base: str, token: str, count: int) -> None:
    for _ in range(count):
        status, body = call(base, "leases", token, "TaskCreate", {"subject": "Silent work"})
        assert status == 200, body
        status, body = call(base, "leases", token, "TaskClaim", {"taskId": body["task"]["id"]})
        assert status == 200, body
        assert body["task"]["lease"]["expiresAt"]


def _reclaimed(cluster: Cluster) -> tuple[int, int]:
    """The reclaims recorded in the cluster's database (all, and of distinct tasks), read
    directly: a request would be a call, and the scenario is that nobody calls."""
    if cluster.backend == "sqlite":
        path = cluster.workdir / "cluster.db"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return conn.execute(RECLAIMED).fetchone()
    import psycopg

    with psycopg.connect(cluster.env["DATABASE_URL"]) as conn:
        return conn.execute(RECLAIMED).fetchone()


def _attempt_outcomes(base: str, token: str, count: int) -> list[list[str]]:
    outcomes = []
    for number in range(1, count + 1):
        status, body = call(base, "leases", token, "TaskGet", {"taskId": str(number)})
        assert status == 200, body
        outcomes.append([a["outcome"] for a in body["task"]["attempts"]])
    return outcomes


def test_a_silent_agents_work_returns_to_pending_with_no_request(tmp_path, clusters):
    cluster = Cluster(tmp_path, backend="sqlite", env={"KANBAN_LEASE_SECONDS": str(LEASE)})
    clusters.append(cluster)
    base = cluster.start()
    silent, observer = _board_and_tokens(cluster)
    _claim_all(base, silent, 3)

    # The scenario is silence: nobody calls the server while the leases run out.
    wait_until(lambda: _reclaimed(cluster)[0] >= 3, timeout=LEASE + 10, what="three reclaims")

    status, body = call(base, "leases", observer, "TaskList", {"view": "open"})
    assert status == 200
    assert [(t["status"], t["owner"]) for t in body["tasks"]] == [("pending", "")] * 3
    assert _attempt_outcomes(base, observer, 3) == [["timed_out"]] * 3
    status, body = call(base, "leases", silent, "TaskUpdate", {"taskId": "1", "notes": "back!"})
    assert (status, body["error"]["code"]) == (409, "lease_lost")


@pytest.mark.skipif(
    postgres_admin_url() is None,
    reason="runs in the PostgreSQL + Redis pass (DATABASE_URL=postgres://…)",
)
def test_two_processes_reclaim_each_lapsed_lease_exactly_once(tmp_path, clusters):
    cluster = Cluster(tmp_path, backend="postgresql", env={"KANBAN_LEASE_SECONDS": str(LEASE)})
    clusters.append(cluster)
    a, b = cluster.start(), cluster.start()
    silent, observer = _board_and_tokens(cluster)
    _claim_all(a, silent, 20)

    # Silence, while both processes sweep, until every task has been reclaimed.
    wait_until(
        lambda: _reclaimed(cluster)[1] == 20, timeout=LEASE + 10, what="twenty tasks reclaimed"
    )
    assert _attempt_outcomes(b, observer, 20) == [["timed_out"]] * 20
    # Counted again once every task has been read back (both processes swept meanwhile):
    # no task was reclaimed twice.
    assert _reclaimed(cluster) == (20, 20)

"""What every bench scenario shares: the servers' application, the person who logs in,
boards with a token, filling a board, and the figures' arithmetic."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from devtools.liveserver import Agent, Cluster

# What the servers bench starts serve: the product plus the echo routes (devtools.bench.echo).
BENCH_APP = "devtools.bench.asgi:application"
BENCH_ENV = {"DJANGO_SETTINGS_MODULE": "devtools.bench.settings"}
# The person who logs in to the boards bench makes.
USER, PASSWORD = "bench", "bench-pass-1"


def bench_cluster(workdir: Path, *, env: dict[str, str] | None = None, **options: Any) -> Cluster:
    """A ``Cluster`` whose servers serve the bench's application (``env`` added to its own)."""
    return Cluster(workdir, env={**BENCH_ENV, **(env or {})}, app=BENCH_APP, **options)


def rss_mb(cluster: Cluster, index: int) -> float:
    return round(cluster.servers[index].rss_kib() / 1024, 1)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def make_user(cluster: Cluster) -> None:
    cluster.user(USER, PASSWORD)


def board(cluster: Cluster, slug: str, *, team: bool = False) -> Agent:
    cluster.manage("createboard", slug)
    args = ["issuetoken", slug, "bench-agent", *(["--team"] if team else [])]
    return Agent(cluster.bases[0], slug, cluster.manage(*args), "bench-agent" if team else "")


def fill(agent: Agent, size: int) -> None:
    made = 0
    while made < size:
        ops = []
        for i in range(min(500, size - made)):
            number = made + i + 1
            op: dict[str, Any] = {
                "op": "create",
                "subject": f"Task {number}",
                "activeForm": f"Doing {number}",
            }
            if number % 5 == 0:
                op["blockedBy"] = [str(number - 1)]
            if i and number % 7 == 0:
                op["parentId"] = str(number - 3)
            ops.append(op)
        status, body = agent.call("TaskBatch", {"ops": ops})
        assert status == 200, body
        made += len(ops)


def login(context: Any, cluster: Cluster) -> None:
    page = context.new_page()
    page.goto(f"{cluster.bases[0]}/login/")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/boards/$"))
    page.close()

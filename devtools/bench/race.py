"""The claim race: agents in threads claim every task at once; each is won exactly once."""

from __future__ import annotations

import threading
import time
from typing import Any

from devtools.liveserver import Agent, Cluster

from .common import board


def race(cluster: Cluster, racers: int, tasks: int) -> dict[str, Any]:
    """``racers`` agents (threads, each its own connection) claim every task at once."""
    slug = f"race{len(cluster.bases)}"
    planner = board(cluster, slug, team=True)
    ops = [{"op": "create", "subject": f"Task {n}"} for n in range(1, tasks + 1)]
    assert planner.call("TaskBatch", {"ops": ops})[0] == 200
    barrier = threading.Barrier(racers)
    outcomes: list[list[tuple[int, int]]] = [[] for _ in range(racers)]

    def run(index: int) -> None:
        agent = Agent(
            cluster.bases[index % len(cluster.bases)], slug, planner.token, f"agent-{index}"
        )
        barrier.wait()
        for k in range(tasks):
            number = (k + index * 7) % tasks + 1
            outcomes[index].append((number, agent.call("TaskClaim", {"taskId": str(number)})[0]))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(racers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    codes = [status for rows in outcomes for _, status in rows]
    winners: dict[int, int] = {}
    for rows in outcomes:
        for number, status in rows:
            if status == 200:
                winners[number] = winners.get(number, 0) + 1
    return {
        "agents": racers,
        "tasks": tasks,
        "attempts_per_s": round(len(codes) / elapsed),
        "seconds": round(elapsed, 2),
        "exactly_once": sorted(winners) == list(range(1, tasks + 1))
        and set(winners.values()) == {1},
        "server_errors": sum(1 for c in codes if c >= 500),
    }

"""What a call costs above the server's own floor (``--ratios``, and the default run): the
401 an unauthenticated call gets, a TaskCreate, a TaskUpdate, a filtered TaskList and a
search on a board of 5,000 tasks, measured interleaved on one keep-alive connection so
that whatever else the machine does slows every kind alike and the ratios hold."""

from __future__ import annotations

import http.client
import json
import statistics
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from devtools.liveserver import Cluster

from .common import board, fill, percentile

# The ratios issue 38 asks for: a write within twice the floor, a search within twice a list.
GOALS = {"TaskCreate": 2.0, "TaskUpdate": 2.0, "TaskList search": 2.0}


def ratios(cluster: Cluster, calls: int, size: int = 5000) -> dict[str, Any]:
    agent = board(cluster, f"ratios{size}x{len(cluster.bases)}")
    fill(agent, size)
    parts = urllib.parse.urlsplit(agent.base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    path = f"/api/boards/{agent.slug}/tools/"

    def post(tool: str, body: dict[str, Any], *, token: bool = True) -> None:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {agent.token}"
        conn.request("POST", path + tool, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        data = response.read()
        assert response.status == (200 if token else 401), (tool, response.status, data[:200])

    kinds: dict[str, Callable[[int], None]] = {
        "floor (401)": lambda i: post("TaskList", {}, token=False),
        "TaskCreate": lambda i: post("TaskCreate", {"subject": f"Bench write {i}"}),
        # A task of the filled board's open middle, its notes rewritten each time.
        "TaskUpdate": lambda i: post("TaskUpdate", {"taskId": str(size // 2), "notes": str(i)}),
        # The same page size both ways: one status's page of the list, and the tasks whose
        # text holds "task 1" (one in nine of the board).
        "TaskList filtered": lambda i: post("TaskList", {"status": "pending"}),
        "TaskList search": lambda i: post("TaskList", {"query": "task 1"}),
    }
    for make in kinds.values():  # warm: the first call of a kind pays its imports
        make(-1)
    timed: dict[str, list[float]] = {name: [] for name in kinds}
    for i in range(calls):
        for name, make in kinds.items():
            start = time.perf_counter()
            make(i)
            timed[name].append((time.perf_counter() - start) * 1000)
    conn.close()
    p50 = {name: statistics.median(samples) for name, samples in timed.items()}
    floor, listed = p50["floor (401)"], p50["TaskList filtered"]
    return {
        "tasks": size,
        "calls": calls,
        "p50_ms": {name: round(v, 2) for name, v in p50.items()},
        "p99_ms": {name: round(percentile(s, 99), 2) for name, s in timed.items()},
        "x_floor": {name: round(v / floor, 2) for name, v in p50.items()},
        "search_x_list": round(p50["TaskList search"] / listed, 2),
    }


def report_ratios(row: dict[str, Any], write: Callable[[str], object]) -> None:
    write(
        f"Cost above the floor, {row['tasks']} tasks, {row['calls']} interleaved rounds "
        "on one keep-alive connection (ms)"
    )
    write(f"  {'call':<22}{'p50':>8}{'p99':>8}{'x floor':>9}")
    for name, value in row["p50_ms"].items():
        write(f"  {name:<22}{value:>8}{row['p99_ms'][name]:>8}{row['x_floor'][name]:>9}")
    for name in ("TaskCreate", "TaskUpdate"):
        write(f"  {name} / floor: {row['x_floor'][name]} (goal ≤ {GOALS[name]})")
    write(
        f"  TaskList search / TaskList filtered: {row['search_x_list']} "
        f"(goal ≤ {GOALS['TaskList search']})"
    )

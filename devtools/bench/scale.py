"""The cost of history (``--scale``): the same calls on a small and a large board, mostly
finished history, each call's p50 on one keep-alive connection; the metrics API on a
board with weeks of history (``manage.py makehistory``)."""

from __future__ import annotations

import http.client
import json
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devtools.liveserver import Agent, session_cookie

from .common import PASSWORD, USER, bench_cluster, board, fill, make_user

BATCH = 500  # TaskBatch's most operations in one call


def scale(workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
    sizes = [int(n) for n in options["scale_sizes"].split(",")]
    calls = options["scale_calls"]
    cluster = bench_cluster(workdir / "scale")
    try:
        base = cluster.start()
        make_user(cluster)
        boards = {}
        for size in sizes:
            agent = board(cluster, f"scale{size}")
            fill(agent, size)
            # History: all but the last 100 finished, as a board that ran for weeks.
            finish(agent, size - 100)
            add_blockers(agent, calls)
            boards[size] = (agent, size + 1)
        # Weeks of history for the metrics page: 20,000 finished tasks, 200,000 events.
        board(cluster, "history")
        cluster.manage(
            "makehistory",
            "history",
            "--tasks",
            str(sizes[-1]),
            "--events",
            str(10 * sizes[-1]),
            timeout=600,
        )
        cookie = session_cookie(base, USER, PASSWORD)
        figures = {size: _scale_calls(base, *boards[size], calls, cookie) for size in sizes}
        metrics_ms = {
            f"{sizes[0]} tasks, fresh": _metrics_p50(base, f"scale{sizes[0]}", cookie),
            f"{sizes[-1]} tasks, {10 * sizes[-1]} events": _metrics_p50(base, "history", cookie),
        }
    finally:
        cluster.stop()
    small, big = sizes[0], sizes[-1]
    return {
        "sizes": sizes,
        "calls": calls,
        "metrics_p50_ms": metrics_ms,
        "p50_ms": {str(size): figures[size] for size in sizes},
        "growth": {
            name: round(figures[big][name] / figures[small][name], 2)
            for name in figures[small]
            if not name.startswith("page_kb")
        },
        "x_floor_at_largest": {
            name: round(value / figures[big]["floor (401)"], 2)
            for name, value in figures[big].items()
            if not name.startswith("page")
        },
    }


def add_blockers(agent: Agent, calls: int) -> None:
    """Fresh blockers with five dependents each, one per measured completion."""
    ops: list[dict[str, Any]] = []
    for i in range(calls):
        ops.append({"op": "create", "ref": f"b{i}", "subject": f"Blocker {i}"})
        ops += [
            {"op": "create", "subject": f"Dependent {i}.{d}", "blockedBy": [f"b{i}"]}
            for d in range(5)
        ]
    for start in range(0, len(ops), 480):
        status, body = agent.call("TaskBatch", {"ops": ops[start : start + 480]})
        assert status == 200, body


def finish(agent: Agent, through: int) -> None:
    """Complete tasks 1 to ``through`` as their agent does, in batches through the tool
    API (each task after its blockers: ``fill`` makes a task wait on earlier ones only)."""
    for first in range(1, through + 1, BATCH):
        ops = [
            {"op": "update", "taskId": str(number), "status": "completed"}
            for number in range(first, min(first + BATCH, through + 1))
        ]
        status, body = agent.call("TaskBatch", {"ops": ops}, timeout=600)
        assert status == 200, body


def _scale_calls(
    base: str,
    agent: Agent,
    first_blocker: int,
    calls: int,
    cookie: str,
    extra: dict[str, dict[str, Any]] | None = None,
) -> dict[str, float]:
    """p50 of each call on one keep-alive connection, as an agent's client makes them."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    path = f"/api/boards/{agent.slug}/tools/"

    def post(tool: str, body: dict[str, Any], token: str | None = agent.token) -> bytes:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request("POST", path + tool, body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        data = response.read()
        assert response.status in (200, 401), (tool, response.status, data[:200])
        return data

    open_task = json.loads(post("TaskCreate", {"subject": "Kept open"}))["task"]["id"]
    kinds: dict[str, Any] = {
        "floor (401)": lambda i: post("TaskList", {}, token=None),
        "TaskCreate": lambda i: post("TaskCreate", {"subject": f"New {i}"}),
        "TaskUpdate notes": lambda i: post("TaskUpdate", {"taskId": open_task, "notes": str(i)}),
        "complete, 5 dependents": lambda i: post(
            "TaskUpdate",
            {"taskId": str(first_blocker + 6 * i), "status": "completed", "result": "ok"},
        ),
        "TaskList in_progress": lambda i: post("TaskList", {"view": "in_progress"}),
        "TaskList ready (100)": lambda i: post("TaskList", {"view": "ready"}),
        # A search against a plain filtered list, in the same run ("blocker" starts the
        # subject of one task in six, "dep" of five in six).
        "TaskList open (100)": lambda i: post("TaskList", {"view": "open"}),
        "TaskList search open": lambda i: post("TaskList", {"view": "open", "query": "blocker"}),
        "TaskList search 'dep'": lambda i: post("TaskList", {"query": "dep"}),
    }
    for name, body in (extra or {}).items():
        kinds[name] = lambda i, body=body: post("TaskList", body)
    # Interleaved, one of each call in turn: whatever else the machine does in the
    # meantime slows every kind alike, so the ratios to the floor hold within a run.
    timed: dict[str, list[float]] = {name: [] for name in kinds}
    for i in range(calls):
        for name, make in kinds.items():
            start = time.perf_counter()
            make(i)
            timed[name].append((time.perf_counter() - start) * 1000)
    row = {name: round(statistics.median(times), 2) for name, times in timed.items()}
    conn.close()
    page = urllib.request.Request(f"{base}/boards/{agent.slug}/", headers={"Cookie": cookie})
    samples, size = [], 0
    for _ in range(7):
        start = time.perf_counter()
        with urllib.request.urlopen(page, timeout=60) as response:
            size = len(response.read())
        samples.append((time.perf_counter() - start) * 1000)
    row["board page"] = round(statistics.median(samples), 1)
    search = urllib.request.Request(
        f"{base}/boards/{agent.slug}/?q=blocker", headers={"Cookie": cookie}
    )
    searched = []
    for _ in range(7):
        start = time.perf_counter()
        with urllib.request.urlopen(search, timeout=60) as response:
            response.read()
        searched.append((time.perf_counter() - start) * 1000)
    row["board page, search"] = round(statistics.median(searched), 1)
    row["page_kb"] = round(size / 1024, 1)
    listed = post("TaskList", {})
    row["page_kb TaskList default"] = round(len(listed) / 1024, 1)
    return row


def _metrics_p50(base: str, slug: str, cookie: str, loads: int = 15) -> float:
    """p50 of the metrics API (30 days) for a logged-in person, in ms."""
    request = urllib.request.Request(
        f"{base}/api/boards/{slug}/metrics?range=30d", headers={"Cookie": cookie}
    )
    samples = []
    for _ in range(loads):
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 1)


def report_scale(scale: dict[str, Any], write: Callable[[str], object]) -> None:
    small, big = (str(n) for n in (scale["sizes"][0], scale["sizes"][-1]))
    write(f"\n== Cost of history: p50 of {scale['calls']} calls, one keep-alive connection (ms)")
    write(f"  {'call':<26}{small + ' tasks':>12}{big + ' tasks':>13}{'growth':>8}{'x floor':>9}")
    for name, value in scale["p50_ms"][big].items():
        if name.startswith("page_kb"):
            continue
        write(
            f"  {name:<26}{scale['p50_ms'][small][name]:>12}{value:>13}"
            f"{scale['growth'][name]:>8}{scale['x_floor_at_largest'].get(name, ''):>9}"
        )
    for key in ("page_kb", "page_kb TaskList default"):
        write(
            f"  {key.replace('page_kb', 'KB'):<26}{scale['p50_ms'][small][key]:>12}"
            f"{scale['p50_ms'][big][key]:>13}"
        )
    for name, value in scale.get("metrics_p50_ms", {}).items():
        write(f"  metrics API, {name}: {value} ms (p50 of 15)")


# -- the graph page (--graph) ------------------------------------------------------

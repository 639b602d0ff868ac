"""The board page's render time, size and queries at a board size."""

from __future__ import annotations

import statistics
import time
import urllib.request
from typing import Any

from devtools.liveserver import Cluster, session_cookie

from .common import PASSWORD, USER, board, fill


def render(cluster: Cluster, size: int) -> dict[str, Any]:
    slug = f"render{size}"
    agent = board(cluster, slug)
    fill(agent, size)
    # Some work in progress, so every kind of card is on the page.
    for number in range(1, size + 1, 8):
        agent.call("TaskClaim", {"taskId": str(number)})
    page = urllib.request.Request(
        f"{cluster.bases[0]}/boards/{slug}/",
        headers={"Cookie": session_cookie(cluster.bases[0], USER, PASSWORD)},
    )
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        with urllib.request.urlopen(page) as response:
            html = response.read()
        samples.append((time.perf_counter() - start) * 1000)
    shown = html.count(b"data-task-id=")
    assert 0 < shown <= size
    list_samples = []
    for _ in range(7):
        start = time.perf_counter()
        agent.call("TaskList", {})
        list_samples.append((time.perf_counter() - start) * 1000)
    queries = cluster.manage("pagequeries", slug, USER)
    return {
        "tasks": size,
        "queries": int(queries.splitlines()[-1]),
        "page_ms": round(statistics.median(samples), 1),
        "page_kb": round(len(html) / 1024),
        "cards_shown": shown,
        "tasklist_ms": round(statistics.median(list_samples), 1),
    }


# -- history independence (--scale) -------------------------------------------------

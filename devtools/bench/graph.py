"""The dependency graph page (``--graph``): open tasks laid out and drawn in Chromium."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devtools.liveserver import CHROMIUM_ARGS, CHROMIUM_PATH

from .common import bench_cluster, board, login, make_user

# What graph.js stamps on the drawn SVG (the times from navigation start).
GRAPH_FIGURES_JS = """
(() => {
  const svg = document.getElementById("graph");
  return {rendered: +svg.dataset.renderedMs, layout: +svg.dataset.layoutMs,
          nodes: +svg.dataset.nodes, edges: +svg.dataset.edges};
})()
"""


def graph_plan(size: int) -> list[dict[str, Any]]:
    """TaskBatch creates for ``size`` open tasks on a fresh board, shaped like planned work:
    features of 25 tasks, six layers of four and a last task, each waiting on one or two
    tasks of the layer before (about 1.5 dependencies a task); three features in four
    also wait on the one before, so the graph has parts of 100 tasks, 28 ranks deep.

    Creates name their task ``t<number>`` (the board's own number on a fresh board):
    blockers in the same batch of 500 go by that ref, earlier ones by number.
    """
    ops: list[dict[str, Any]] = []
    for number in range(1, size + 1):
        feature, index = divmod(number - 1, 25)
        layer = index // 4
        blockers: list[int] = []
        if layer == 0:
            if feature % 4 and index == 0:
                blockers.append(feature * 25)  # the feature before's last task
        else:
            first = feature * 25 + (layer - 1) * 4 + 1
            blockers.append(first + index % 4)
            if index % 4 != 3:
                blockers.append(first + (index + 1) % 4)
        batch_start = (number - 1) // 500 * 500 + 1
        ops.append(
            {
                "op": "create",
                "ref": f"t{number}",
                "subject": f"Feature {feature + 1} step {index + 1}",
                "blockedBy": [f"t{b}" if b >= batch_start else str(b) for b in blockers],
            }
        )
    return ops


def graph(workdir: Path, size: int, loads: int = 3) -> dict[str, Any]:
    """Navigation start → graph.json fetched, laid out by dagre, drawn as SVG and
    painted (graph.js stamps ``data-rendered-ms`` on the SVG after the next frame)."""
    from playwright.sync_api import sync_playwright

    cluster = bench_cluster(workdir / "graph")
    try:
        base = cluster.start()
        make_user(cluster)
        agent = board(cluster, "graph")
        ops = graph_plan(size)
        for start in range(0, len(ops), 500):
            status, body = agent.call("TaskBatch", {"ops": ops[start : start + 500]})
            assert status == 200, body
        edges = sum(len(op["blockedBy"]) for op in ops)
        samples: list[dict[str, float]] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            login(context, cluster)
            page = context.new_page()
            for _ in range(loads):
                page.goto(f"{base}/boards/graph/graph/")
                page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached")
                samples.append(page.evaluate(GRAPH_FIGURES_JS))
            browser.close()
    finally:
        cluster.stop()
    assert all(s["nodes"] == size and s["edges"] == edges for s in samples), samples
    return {
        "tasks": size,
        "edges": edges,
        "loads": loads,
        "rendered_ms_p50": statistics.median(s["rendered"] for s in samples),
        "layout_ms_p50": statistics.median(s["layout"] for s in samples),
        "rendered_ms": [s["rendered"] for s in samples],
    }


def report_graph(graph: dict[str, Any], write: Callable[[str], object]) -> None:
    write(
        f"graph: {graph['tasks']} open tasks, {graph['edges']} edges, layout+render "
        f"{graph['rendered_ms_p50']:.0f} ms (p50 of {graph['loads']} loads; dagre "
        f"{graph['layout_ms_p50']:.0f} ms of it)"
    )

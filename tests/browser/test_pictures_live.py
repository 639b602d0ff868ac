"""The README's pictures of the graph and the metrics page (docs/graph.png,
docs/metrics.png), taken from a board a small team worked on. Run with
KANBAN_SCREENSHOTS=docs to write them there; otherwise they go to a temporary folder
and the test checks only that the pages draw."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from devtools.liveserver import Cluster, Server

from .screens import Screens, new_live_board

pytestmark = pytest.mark.browser

PLAN = [  # subject, blocked by (indexes into this list), who, ends
    ("Design the schema", [], "worker-1", "completed"),
    ("Write the migrations", [0], "worker-2", "completed"),
    ("Build the API", [0], "worker-1", "completed"),
    ("Write the parser", [0], "worker-3", "in_progress"),
    ("Add authentication", [2], "worker-2", "in_progress"),
    ("Write API tests", [2, 1], None, None),
    ("Load test", [4], None, None),
    ("Write the docs", [3], None, None),
    ("Ship the release", [5, 6, 7], None, None),
]


def test_the_readme_pictures_of_the_graph_and_the_metrics(
    browser: Browser, cluster: Cluster, server: Server, tmp_path: Path
):
    board = new_live_board(cluster, server, name="Release 2.0")
    ids: list[str] = []
    for subject, blockers, _, _ in PLAN:
        lead = board.agent("planner")
        ids.append(lead.create(subject, blockedBy=[ids[b] for b in blockers]))
    for n, (_, _, who, ends) in enumerate(PLAN):
        if who is None:
            continue
        agent = board.agent(who)
        agent.claim(ids[n])
        spent = {
            "inputTokens": 4000 * (n + 1),
            "outputTokens": 600 * (n + 1),
            "costUsd": 0.04 * (n + 1),
        }
        if ends == "completed":
            agent.update(ids[n], status="completed", result="Done", usage=spent)
        else:
            agent.update(ids[n], activeForm=f"Working on {PLAN[n][0].lower()}", usage=spent)
    folder = Path(os.environ.get("KANBAN_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    screens = Screens(browser, board)
    try:
        graph = screens.open(path=f"/boards/{board.slug}/graph/?scope=all")
        expect(graph.locator("#graph[data-rendered-ms]")).to_be_attached()
        expect(graph.locator("#graph .node")).to_have_count(len(PLAN))
        graph.mouse.move(0, 0)
        graph.screenshot(path=folder / "graph.png", animations="disabled", caret="hide")
        metrics = screens.open(path=f"/boards/{board.slug}/metrics/?range=7d")
        expect(metrics.locator("table.agents [data-agent='worker-1']")).to_be_visible()
        metrics.screenshot(
            path=folder / "metrics.png", animations="disabled", caret="hide", full_page=True
        )
        for name in ("graph.png", "metrics.png"):
            assert (folder / name).stat().st_size < 250_000, name
    finally:
        screens.close()
    assert not screens.errors, screens.errors

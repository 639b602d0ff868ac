"""The dependency graph page in Chromium (issue 16): the SVG holds one node per task in
scope and one edge per dependency (as graph.json says), follows an agent's changes
without a reload, opens the task's details, and lays out 1,000 open tasks (the slow
benchmark test prints the figure).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from devtools.bench.graph import GRAPH_FIGURES_JS, graph_plan

from .conftest import Agent, BoardPages, assert_not_reloaded, mark_document

pytestmark = pytest.mark.browser

DRAWN_JS = """
(() => ({
  nodes: [...document.querySelectorAll("#graph .node[data-task]")].map(n => n.dataset.task),
  edges: [...document.querySelectorAll("#graph .edge")].map(e => [e.dataset.from, e.dataset.to]),
}))()
"""


def make_plan(agent: Agent) -> None:
    """1 → 2 → 4 → 5 and 1 → 3 → 5 (the longer arm is the critical path), 6 alone,
    7 completed; 1 in progress."""
    for subject in ("Plan", "Build A", "Build B", "Test A", "Ship", "Docs", "Old"):
        agent.create(subject)
    for task, blockers in (("2", ["1"]), ("3", ["1"]), ("4", ["2"]), ("5", ["3", "4"])):
        agent.update(task, addBlockedBy=blockers)
    agent.update("7", status="completed")
    agent.claim("1")


def open_graph(pages: BoardPages, query: str = "") -> Page:
    page = pages.open()
    page.goto(f"{pages.live_board.url}graph/{query}")
    wait_drawn(page)
    expect(page.locator("#graph-live")).to_have_attribute("data-state", "live")
    mark_document(page)
    return page


def wait_drawn(page: Page) -> None:
    page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached")


def graph_json(page: Page, query: str) -> dict[str, Any]:
    answer = page.request.get(page.url.split("/graph/")[0] + "/graph.json" + query)
    assert answer.ok, answer.text()
    return answer.json()


def drawn(page: Page) -> dict[str, Any]:
    return page.evaluate(DRAWN_JS)


def node(page: Page, task_id: str):
    return page.locator(f'#graph .node[data-task="{task_id}"]')


def edge(page: Page, blocker: str, task_id: str):
    return page.locator(f'#graph .edge[data-from="{blocker}"][data-to="{task_id}"]')


def expect_as_json(page: Page, query: str) -> dict[str, Any]:
    """The SVG holds exactly graph.json's nodes and edges (waiting for a pending update)."""
    data = graph_json(page, query)
    expect(page.locator("#graph .node[data-task]")).to_have_count(len(data["nodes"]))
    expect(page.locator("#graph .edge")).to_have_count(len(data["edges"]))
    shown = drawn(page)
    assert sorted(shown["nodes"], key=int) == [n["id"] for n in data["nodes"]]
    assert sorted(map(tuple, shown["edges"])) == sorted((e["from"], e["to"]) for e in data["edges"])
    return data


def test_the_svg_holds_one_node_per_open_task_and_one_edge_per_dependency(pages: BoardPages):
    make_plan(pages.live_board.agent("planner"))
    page = open_graph(pages)
    data = expect_as_json(page, "?scope=open")
    assert len(data["nodes"]) == 6 and len(data["edges"]) == 5  # 7 is finished: not in scope
    svg = page.locator("svg#graph")
    expect(svg).to_have_attribute("data-nodes", "6")
    expect(svg).to_have_attribute("data-edges", "5")
    # Coloured by column; the critical path of unfinished work is marked, nodes and edges.
    expect(node(page, "1")).to_have_class(re.compile(r"\bcol-in_progress\b"))
    expect(node(page, "2")).to_have_class(re.compile(r"\bcol-blocked\b"))
    expect(node(page, "6")).to_have_class(re.compile(r"\bcol-pending\b"))
    critical = page.locator("#graph .node.critical")
    assert sorted(critical.evaluate_all("els => els.map(e => e.dataset.task)")) == data["critical"]
    assert data["critical"] == ["1", "2", "4", "5"]
    for a, b in (("1", "2"), ("2", "4"), ("4", "5")):
        expect(edge(page, a, b)).to_have_class(re.compile(r"\bcritical\b"))
    expect(edge(page, "1", "3")).not_to_have_class(re.compile(r"\bcritical\b"))
    # Every node is a button a keyboard reaches, named as it reads.
    expect(node(page, "2")).to_have_attribute("tabindex", "0")
    expect(
        page.get_by_role("button", name="#2 Build A, blocked, on the critical path")
    ).to_have_count(1)
    expect(page.locator("#graph-summary")).to_contain_text("6 tasks (6 open), 5 dependencies")
    expect(page.locator("#graph-summary")).to_contain_text("#1 → #2 → #4 → #5")


def test_an_agent_completing_a_task_changes_the_graph_without_a_reload(pages: BoardPages):
    agent = pages.live_board.agent("worker")
    make_plan(agent)
    everything = open_graph(pages, "?scope=all")
    open_work = open_graph(pages)
    expect(node(everything, "2")).to_have_class(re.compile(r"\bcol-blocked\b"))

    agent.update("1", status="completed", result="planned")

    # Everything: #1 turns completed, #2 (waiting on #1 only) pending, their edge is met.
    expect(node(everything, "1")).to_have_class(re.compile(r"\bcol-completed\b"))
    expect(node(everything, "2")).to_have_class(re.compile(r"\bcol-pending\b"))
    expect(edge(everything, "1", "2")).to_have_class(re.compile(r"\bsatisfied\b"))
    expect(edge(everything, "1", "2")).not_to_have_class(re.compile(r"\bcritical\b"))
    # Open work: #1 and its edges leave, laid out again; the critical path starts at #2.
    expect(node(open_work, "1")).to_have_count(0)
    data = expect_as_json(open_work, "?scope=open")
    assert data["critical"] == ["2", "4", "5"]
    expect(node(open_work, "2")).to_have_class(re.compile(r"\bcritical\b"))
    expect_as_json(everything, "?scope=all")

    # A new dependency is a new edge, live too.
    agent.update("6", addBlockedBy=["5"])
    expect(edge(open_work, "5", "6")).to_have_count(1)
    expect(node(open_work, "6")).to_have_class(re.compile(r"\bcol-blocked\b"))
    expect_as_json(open_work, "?scope=open")

    # A cancelled blocker leaves its dependent stuck: marked on both pages.
    agent.update("3", status="cancelled")
    expect(node(open_work, "5")).to_have_class(re.compile(r"\bstuck\b"))
    expect(node(everything, "5")).to_have_class(re.compile(r"\bstuck\b"))
    expect(node(everything, "3")).to_have_class(re.compile(r"\bstatus-cancelled\b"))
    expect(edge(everything, "3", "5")).to_have_class(re.compile(r"\bdead-end\b"))
    expect(
        open_work.get_by_role("button", name=re.compile(r"^#5 Ship, blocked, stuck"))
    ).to_have_count(1)
    assert_not_reloaded(everything)
    assert_not_reloaded(open_work)


def test_everything_shows_finished_work_and_a_neighbourhood_only_its_chain(pages: BoardPages):
    make_plan(pages.live_board.agent("planner"))
    page = pages.open()
    page.get_by_role("link", name="Graph", exact=True).click()
    page.wait_for_url(f"{pages.live_board.url}graph/")
    wait_drawn(page)
    expect(page.get_by_role("link", name="Open work")).to_have_attribute("aria-current", "page")
    expect(node(page, "7")).to_have_count(0)

    page.get_by_role("link", name="Everything").click()
    wait_drawn(page)
    expect(page.get_by_role("link", name="Everything")).to_have_attribute("aria-current", "page")
    expect(node(page, "7")).to_have_class(re.compile(r"\bcol-completed\b"))
    expect_as_json(page, "?scope=all")

    page.get_by_label("Around task").fill("4")
    page.get_by_role("button", name="Show", exact=True).click()
    page.wait_for_url(re.compile(r"/graph/\?task=4$"))
    wait_drawn(page)
    data = expect_as_json(page, "?task=4")
    assert [n["id"] for n in data["nodes"]] == ["1", "2", "4", "5"]
    expect(node(page, "4")).to_have_class(re.compile(r"\baround\b"))

    page.get_by_role("link", name="Board", exact=True).click()
    page.wait_for_url(pages.live_board.url)


def test_a_node_opens_its_details_whose_buttons_work(pages: BoardPages):
    planner = pages.live_board.agent("planner")
    make_plan(planner)
    page = open_graph(pages)
    asked: list[dict[str, str]] = []
    page.on("request", lambda r: asked.append(r.headers) if r.url.endswith("/tasks/2/") else None)

    node(page, "2").click()
    panel = page.locator('#detail [data-detail-task="2"]')
    expect(panel).to_be_visible()
    expect(panel.locator("h2")).to_be_focused()
    expect(node(page, "2")).to_have_class(re.compile(r"\bselected\b"))
    # The board's panel code asked for it: htmx, for a person (its HX-Source header is not
    # the panel's own, which a refresh after a push sends).
    assert [(h["hx-request"], h["hx-source"]) for h in asked] == [("true", "aside")]
    # It follows its task's pushes.
    planner.update("2", description="Behind a flag")
    expect(panel).to_contain_text("Behind a flag")
    expect(panel.locator("h2")).to_be_focused()

    # From the keyboard: focus a node and press Enter.
    node(page, "6").focus()
    page.keyboard.press("Enter")
    expect(page.locator('#detail [data-detail-task="6"]')).to_be_visible()
    expect(node(page, "2")).not_to_have_class(re.compile(r"\bselected\b"))

    # The panel's forms work (htmx processed it); the push takes #6 off the open graph.
    page.locator('#detail [data-status-button="completed"]').click()
    expect(node(page, "6")).to_have_count(0)
    expect(page.locator('#detail [data-detail-task="6"] .tag').first).to_have_text("Completed")
    expect_as_json(page, "?scope=open")

    page.locator("#graph-close").click()
    expect(page.locator("#detail .detail-placeholder")).to_be_visible()
    assert_not_reloaded(page)


def test_group_by_parent_draws_a_box_around_each_parents_children(pages: BoardPages):
    agent = pages.live_board.agent("planner")
    epic = agent.create("Epic")
    first = agent.create("Part one", parentId=epic)
    agent.create("Part two", parentId=epic, blockedBy=[first])
    agent.create("Part three", parentId=first)
    page = open_graph(pages)
    expect(page.locator("#graph .group")).to_have_count(0)

    page.get_by_label("Group by parent").check()
    expect(page.locator(f'#graph .group[data-parent="{epic}"]')).to_have_count(1)
    expect(page.locator(f'#graph .group[data-parent="{first}"]')).to_have_count(1)
    expect_as_json(page, "?scope=open")

    # Remembered for the next visit.
    page.reload()
    wait_drawn(page)
    expect(page.get_by_label("Group by parent")).to_be_checked()
    expect(page.locator("#graph .group")).to_have_count(2)


def test_the_graph_is_laid_out_on_the_page_when_its_workers_cannot_start(pages: BoardPages):
    make_plan(pages.live_board.agent("planner"))
    page = pages.open()
    page.route("**/static/graph-worker.js", lambda route: route.abort())
    page.goto(f"{pages.live_board.url}graph/")
    wait_drawn(page)
    expect_as_json(page, "?scope=open")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_or_critical_violation_on_the_graph(pages: BoardPages, scheme):
    agent = pages.live_board.agent("planner")
    make_plan(agent)
    agent.create("Child", parentId="1")
    page = open_graph(pages, "?scope=all")
    page.emulate_media(color_scheme=scheme)
    page.get_by_label("Group by parent").check()
    expect(page.locator("#graph .group")).to_have_count(1)
    node(page, "2").click()
    expect(page.locator('#detail [data-detail-task="2"]')).to_be_visible()
    results = Axe().run(page)
    blocking = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert not blocking, results.generate_report()


@pytest.mark.slow
def test_a_thousand_open_tasks_are_laid_out_and_drawn(pages: BoardPages):
    agent = pages.live_board.agent("planner")
    ops = graph_plan(1000)
    for start in range(0, len(ops), 500):
        agent.ok("TaskBatch", {"ops": ops[start : start + 500]})
    page = pages.open()
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{pages.live_board.url}graph/")
    page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached", timeout=60_000)
    figures = page.evaluate(GRAPH_FIGURES_JS)
    edges = sum(len(op["blockedBy"]) for op in ops)
    print(
        f"\ngraph: 1000 open tasks, {edges} edges: rendered {figures['rendered']} ms after "
        f"navigation start (dagre {figures['layout']} ms)"
    )
    assert figures["nodes"] == 1000
    assert figures["edges"] == edges

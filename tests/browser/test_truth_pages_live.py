"""The board tells the truth at a glance (issue #27), in Chromium at 1440×900 and
390×844: the graph fitted in its box with full subjects on focus, the metrics of a
two-minute run in seconds and minutes, a header that keeps its height as counts change,
and a phone's first card above the fold."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, ViewportSize, expect

from devtools.liveserver import Cluster

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Screens, boxes, card

pytestmark = pytest.mark.browser

SCREENS = [DESKTOP, PHONE]
IDS = ["desktop", "phone"]
LONG = "Run the production migration on the primary database, then verify the replicas"


@pytest.fixture
def screens(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    opened = Screens(browser, live_board)
    try:
        yield opened
    finally:
        opened.close()
    assert not opened.errors, f"JavaScript errors on the page: {opened.errors}"


def inside(box: dict[str, float], frame: dict[str, float]) -> bool:
    return (
        box["x"] >= frame["x"] - 0.5
        and box["y"] >= frame["y"] - 0.5
        and box["x"] + box["width"] <= frame["x"] + frame["width"] + 0.5
        and box["y"] + box["height"] <= frame["y"] + frame["height"] + 0.5
    )


@pytest.mark.parametrize("screen", SCREENS, ids=IDS)
def test_every_graph_node_is_inside_the_graph_box_after_load_and_shows_its_subject(
    screens: Screens, live_board: LiveBoard, screen: ViewportSize
):
    agent = live_board.agent("planner")
    first = agent.create(LONG)
    for chain in range(3):
        previous = first
        for step in range(5):
            previous = agent.create(f"Chain {chain} step {step}", blockedBy=[previous])
    for n in range(6):
        agent.create(f"Alone {n}")
    failed = agent.create("Build the release artefacts", blockedBy=[])
    agent.create("Publish the release", blockedBy=[failed])
    agent.claim(failed)
    agent.update(failed, status="failed")

    page = screens.open(screen=screen, path=f"/boards/{live_board.slug}/graph/")
    page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached")
    expect(page.locator("#graph-live")).to_have_attribute("data-state", "live")
    # Open work shows the failed task its dependent waits on.
    expect(page.locator(f'#graph .node[data-task="{failed}"]')).to_have_count(1)
    frame = boxes(page, "#graph-canvas")[0]
    nodes = boxes(page, "#graph .node[data-task]")
    assert len(nodes) == 1 + 15 + 6 + 2
    assert all(inside(n, frame) for n in nodes), (frame, [n for n in nodes if not inside(n, frame)])
    # Most of a phone's screen; the whole of a desktop's below the header.
    assert frame["height"] >= 0.6 * screen["height"], frame
    # Zoomed in, then Fit puts every node back in the box.
    page.click("#graph-zoom-in")
    page.click("#graph-zoom-in")
    page.click("#graph-zoom-fit")
    nodes = boxes(page, "#graph .node[data-task]")
    assert all(inside(n, frame) for n in nodes)
    # The drawn label is cut; focus (and hover) shows the whole subject.
    page.locator(f'#graph .node[data-task="{first}"]').focus()
    expect(page.locator("#graph-tip")).to_be_visible()
    expect(page.locator("#graph-tip")).to_contain_text(LONG)


SPREAD = """
from datetime import timedelta
from django.utils import timezone
from boards.models import Attempt, Event, Task
board = {slug!r}
events = list(Event.objects.filter(board__slug=board).order_by("seq"))
start = timezone.now() - timedelta(seconds=150)
# A two-minute run: the events 8 s apart (in order), each attempt 40 s.
for i, event in enumerate(events):
    Event.objects.filter(pk=event.pk).update(created_at=start + timedelta(seconds=8 * i))
for task in Task.objects.filter(board__slug=board, status="completed"):
    done = Event.objects.filter(board__slug=board, task_number=task.number).order_by("-seq")[0]
    Task.objects.filter(pk=task.pk).update(
        completed_at=done.created_at, lead_seconds=40.0 + task.number
    )
    Attempt.objects.filter(task=task).update(ended_at=done.created_at, seconds=40.0)
print("spread")
"""


@pytest.mark.parametrize("screen", SCREENS, ids=IDS)
def test_the_metrics_of_a_two_minute_run_read_in_seconds_and_minutes(
    screens: Screens, live_board: LiveBoard, cluster: Cluster, screen: ViewportSize
):
    agent = live_board.agent("worker-1")
    for n in range(5):
        task = agent.create(f"Step {n}")
        agent.claim(task)
        agent.update(task, status="completed", usage={"costUsd": 0.152638})
    assert "spread" in cluster.manage("shell", "-c", SPREAD.format(slug=live_board.slug))

    page = screens.open(screen=screen, path=f"/boards/{live_board.slug}/metrics/")
    expect(page.locator('.range-choice [aria-current="page"]')).to_have_text("Last hour")
    # Durations in seconds; money as money.
    expect(page.locator('tr[data-times="cycle"] td').nth(1)).to_have_text("40 s")
    expect(page.locator('tr[data-agent="worker-1"]')).to_contain_text("$0.76")
    # More than one minute has completions in it.
    filled = int(page.locator("#throughput-title").locator("xpath=..").get_attribute("data-filled"))
    assert filled > 1
    # Every label on the page reads at 11 px or more, and nothing scrolls sideways.
    smallest = page.evaluate(
        """() => Math.min(...[...document.querySelectorAll(
             '.chart-box, .chart-box *, main td, main th, figcaption')]
           .filter(el => el.getClientRects().length && el.textContent.trim())
           .map(el => parseFloat(getComputedStyle(el).fontSize)))"""
    )
    assert smallest >= 11
    assert page.evaluate("document.documentElement.scrollWidth") <= screen["width"]


@pytest.mark.parametrize("screen", SCREENS, ids=IDS)
def test_the_header_keeps_its_height_as_counts_change_and_a_phone_shows_the_first_card(
    screens: Screens, live_board: LiveBoard, screen: ViewportSize
):
    agent = live_board.agent("worker-2")
    first = agent.create("First")
    page = screens.open(screen=screen)
    expect(card(page, first)).to_be_visible()
    before = boxes(page, ".topbar")[0]["height"] + boxes(page, ".board-header")[0]["height"]
    ids = [agent.create(f"Task {n}") for n in range(12)]
    for task in ids[:8]:
        agent.claim(task)
        agent.update(task, status="completed")
    agent.claim(ids[8])
    agent.update(ids[8], status="failed")
    expect(page.locator("#board-summary .progress-text")).to_have_text("Tasks 8/13")
    after = boxes(page, ".topbar")[0]["height"] + boxes(page, ".board-header")[0]["height"]
    assert after == before
    # A phone: the first card is above the fold; the rest of the controls behind Menu.
    if screen["width"] < 760:
        top = page.locator(".column--current .card").first
        box = top.bounding_box()
        assert box is not None and box["y"] + box["height"] <= screen["height"], box
        expect(page.locator("#owner-filter")).to_be_hidden()
        page.click("[data-board-menu]")
        expect(page.locator("#owner-filter")).to_be_visible()
    # Notifications open over the page: the header keeps its height.
    if screen["width"] >= 760:
        page.click("#notify summary")
        expect(page.locator("#notify-kinds")).to_be_visible()
        opened = boxes(page, ".topbar")[0]["height"] + boxes(page, ".board-header")[0]["height"]
        assert opened == after


def test_an_empty_board_offers_to_connect_an_agent_or_run_the_demo(
    screens: Screens, live_board: LiveBoard
):
    page = screens.open()
    offer = page.locator("#empty-offer")
    expect(offer).to_contain_text("Connect an agent")
    expect(offer).to_contain_text(f"python manage.py demo --board {live_board.slug} --url http")
    live_board.agent().create("The first task")
    expect(offer).to_be_hidden()


@pytest.mark.parametrize("screen", SCREENS, ids=IDS)
def test_counts_agree_and_failed_work_is_first_in_completed_with_retry(
    screens: Screens, live_board: LiveBoard, cluster: Cluster, screen: ViewportSize
):
    # No grace: a failure that work waits on needs a person at once.
    cluster.manage(
        "shell",
        "-c",
        "from boards.core import services\nfrom boards.models import Board\n"
        f"services.board_settings(board=Board.objects.get(slug={live_board.slug!r}), "
        "actor='pat', failureGraceSeconds=0)\n",
    )
    agent = live_board.agent("worker-1")
    done = [agent.create(f"Finished {n}") for n in range(3)]
    for number in done:
        agent.claim(number)
        agent.update(number, status="completed")
    failed = agent.create("Load test")
    agent.create("Publish the results", blockedBy=[failed])
    agent.claim(failed)
    agent.update(failed, status="failed", result="Timed out")
    agent.create("Later work")
    page = screens.open(screen=screen)
    expect(page.locator("#needs [data-reason='failed']")).to_be_visible()

    expect(page.locator(".progress-text")).to_have_text("Tasks 3/6")
    expect(page.locator("#count-completed")).to_have_text("4")
    expect(page.locator("#holds-completed")).to_have_text(" · 3 done, 1 failed")
    expect(page.locator("#count-blocked")).to_have_text("1")
    if screen is PHONE:
        # The tabs agree with the columns, mark where the problems are, and the board
        # opened on the first of them.
        expect(page.locator(".tab-count[data-count-of='completed']")).to_have_text("4")
        expect(page.locator("#tab-completed")).to_have_class(r"column-tab column-tab--problem")
        page.locator("#tab-completed").click()
    first = page.locator("#cards-completed [data-task-id]").first
    expect(first).to_have_attribute("data-task-id", failed)
    expect(first.get_by_role("button", name=f"Retry #{failed}")).to_be_visible()
    first.get_by_role("button", name=f"Retry #{failed}").click()
    expect(card(page, failed)).to_have_attribute("data-status", "pending")
    expect(page.locator("#count-completed")).to_have_text("3")
    expect(page.locator("#holds-completed")).to_have_text("")

"""A board page left open equals a reload, in a real Chromium at a desk and on a phone:
after 150 tasks go through it (created, claimed, finished, failed, blocked), each
column holds the cards a fresh page shows, in its order, its count agrees, and the page
is no bigger than a fresh one."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from devtools.liveserver import Cluster, Server

from .screens import COLUMNS, DESKTOP, PHONE, Screens, screens_on_a_new_board

pytestmark = pytest.mark.browser

TASKS = 150
SETTLE_SECONDS = 20

COLUMNS_JS = """(columns) => Object.fromEntries(columns.map((c) => [c, {
  cards: Array.from(document.querySelectorAll(`#cards-${c} > .card`)).map((e) => e.dataset.taskId),
  count: document.getElementById(`count-${c}`).textContent.trim()}]))"""


@pytest.fixture
def screens(browser: Browser, cluster: Cluster, server: Server) -> Iterator[Screens]:
    with screens_on_a_new_board(browser, cluster, server, "Busy board") as opened:
        yield opened


def shown(page: Page) -> dict[str, dict]:
    return page.evaluate(COLUMNS_JS, list(COLUMNS))


def elements(page: Page) -> int:
    return page.evaluate("document.querySelectorAll('*').length")


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_page_left_open_through_150_tasks_equals_a_reload(
    screens: Screens, screen: dict[str, int]
):
    page = screens.open(screen=screen)
    agent = screens.live_board.agent("worker")
    numbers = []
    for n in range(TASKS):
        task = agent.create(f"Task {n}")
        numbers.append(task)
        if n % 10 == 9:  # some wait behind another
            agent.create(f"Follow-up {n}", blockedBy=[numbers[n - 1]])
        if n >= 5 and n % 5 != 0:  # most of the older ones go through
            older = numbers[n - 5]
            agent.claim(older)
            status = "failed" if n % 37 == 0 else "completed"
            agent.update(older, status=status)

    fresh = screens.open(screen=screen)
    expected = shown(fresh)
    assert sum(len(c["cards"]) for c in expected.values()) < TASKS, expected
    deadline = time.monotonic() + SETTLE_SECONDS
    while (now := shown(page)) != expected and time.monotonic() < deadline:
        time.sleep(0.25)
    assert now == expected
    for column in COLUMNS:
        assert now[column]["count"].isdigit(), now[column]
    # Both pages are the same size (the panel and menus as they load).
    assert abs(elements(page) - elements(fresh)) <= 0.2 * elements(fresh), (
        elements(page),
        elements(fresh),
    )

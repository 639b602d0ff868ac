"""The board's search box and filters in a real Chromium (issue #24, item 3): the server
filters every column, the filters live in the URL (reload, back and forward give them
back), and a pushed change that no longer matches takes the card off the page; at
1440 × 900 and on a 390 × 844 phone."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from .conftest import LiveBoard, wait_live
from .screens import DESKTOP, PHONE, Screens, screens_on

pytestmark = pytest.mark.browser


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


def on_page(page: Page, number: str):
    return page.locator(f'#board [data-task-id="{number}"]')


def show_filters(page: Page) -> None:
    """On a phone the filters sit in the header's menu: open it (a page load closes it)."""
    toggle = page.locator("[data-board-menu]")
    if toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()


def expect_cards(page: Page, present: list[str], absent: list[str]) -> None:
    for number in present:
        expect(on_page(page, number)).to_have_count(1)
    for number in absent:
        expect(on_page(page, number)).to_have_count(0)


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_search_and_filters_compose_survive_reload_and_history_and_follow_pushes(
    pages: Screens, live_board: LiveBoard, screen: ViewportSize
):
    agent = live_board.agent("alice")
    agent.create("Run the migration")  # 1
    agent.create("Write the docs")  # 2
    agent.create("Migrate old boards", priority="high")  # 3
    agent.create("Review code", priority="high")  # 4
    page = pages.open(screen=screen)
    expect_cards(page, ["1", "2", "3", "4"], [])

    # "/" goes to the search box; the server filters every column.
    page.locator("#main").focus()
    page.keyboard.press("/")
    expect(page.locator("#search")).to_be_focused()
    page.locator("#search").fill("migr")
    expect(page).to_have_url(re.compile(r"\?q=migr$"))
    expect_cards(page, ["1", "3"], ["2", "4"])
    expect(page.locator("#count-pending")).to_have_text("2 of 4")
    wait_live(page)

    show_filters(page)
    page.locator("#priority-filter").select_option("high")
    expect(page).to_have_url(re.compile(r"\?q=migr&priority=high$"))
    expect_cards(page, ["3"], ["1", "2", "4"])
    expect(page.locator("#count-pending")).to_have_text("1 of 4")

    # Reload: the same filters, from the URL.
    page.reload()
    wait_live(page)
    expect(page.locator("#search")).to_have_value("migr")
    expect(page.locator("#priority-filter")).to_have_value("high")
    expect_cards(page, ["3"], ["1", "2", "4"])

    # Back and forward.
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?q=migr$"))
    expect_cards(page, ["1", "3"], ["2", "4"])
    expect(page.locator("#priority-filter")).to_have_value("")
    page.go_forward()
    expect(page).to_have_url(re.compile(r"\?q=migr&priority=high$"))
    expect_cards(page, ["3"], ["1", "2", "4"])
    wait_live(page)

    # Live: a new task that matches arrives; a change that stops matching takes the card off.
    agent.create("Migration rollback", priority="high")  # 5
    expect_cards(page, ["3", "5"], ["1", "2", "4"])
    expect(page.locator("#count-pending")).to_have_text("2 of 5")
    agent.update("3", subject="Paint old boards")
    expect_cards(page, ["5"], ["1", "2", "3", "4"])
    expect(page.locator("#count-pending")).to_have_text("1 of 5")
    agent.create("Unrelated work", priority="high")  # 6
    expect(page.locator("#count-pending")).to_have_text("1 of 6")
    expect_cards(page, ["5"], ["6"])

    # Cleared, everything is back, and pushes show every card again.
    show_filters(page)
    page.locator("#search").fill("")
    page.locator("#priority-filter").select_option("")
    expect(page).to_have_url(re.compile(r"/boards/[^/]+/(\?)?$"))
    expect_cards(page, ["1", "2", "3", "4", "5", "6"], [])
    expect(page.locator("#count-pending")).to_have_text("6")
    wait_live(page)
    agent.create("Seventh")
    expect_cards(page, ["7"], [])


def test_a_search_that_cannot_be_made_says_why(pages: Screens, live_board: LiveBoard):
    live_board.agent("alice").create("Anything")
    page = pages.open()
    show_filters(page)
    page.locator("#search").fill('"*()"')
    expect(page.locator("#filter-error")).to_contain_text("nothing to search for")
    expect_cards(page, ["1"], [])

"""The board on a phone and on a tablet in a real Chromium (issue #17): one column at a
time behind tabs that keep their live counts, a card's details as a full-screen sheet
with a close button, the approval strip on top, nothing overlapping from 360 to 1024 px;
and at 1440 × 900 the desktop layout as it was.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from devtools.liveserver import Cluster, Server

from .conftest import LiveBoard
from .screens import (
    COLUMNS,
    DESKTOP,
    PHONE,
    Screens,
    assert_uncovered,
    boxes,
    card,
    expect_sheet_open,
    new_live_board,
    overlap,
    populate,
    screens_on,
)

pytestmark = pytest.mark.browser


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


def tab(page: Page, column: str):
    return page.locator(f"#tab-{column}")


def test_on_a_phone_every_column_is_a_tab_and_a_card_opens_and_is_approved(
    pages: Screens, live_board: LiveBoard, cluster: Cluster
):
    tasks = populate(live_board, cluster)
    page = pages.open(screen=PHONE)

    # The strips stay on top, above the tabs.
    approvals = page.locator("#needs")
    expect(approvals.locator(f'[data-approval-task="{tasks.gated}"]')).to_be_visible()
    expect(page.locator("#needs")).to_be_visible()
    strip, tabs = boxes(page, "#needs")[0], boxes(page, ".column-tabs")[0]
    assert strip["y"] + strip["height"] <= tabs["y"], (strip, tabs)

    # Four tabs, each with its column's count; one column shown at a time.
    expect(page.get_by_role("tab")).to_have_count(4)
    counts = {"pending": 2, "in_progress": 2, "blocked": 2, "completed": 2}
    for column, n in counts.items():
        expect(tab(page, column).locator(".tab-count")).to_have_text(str(n))
    for column in COLUMNS:
        tab(page, column).click()
        expect(tab(page, column)).to_have_attribute("aria-selected", "true")
        expect(page.locator(f'[data-column="{column}"]')).to_be_visible()
        for other in COLUMNS:
            if other != column:
                expect(page.locator(f'[data-column="{other}"]')).to_be_hidden()
        cards = page.locator(f'[data-column="{column}"] .card')
        expect(cards).to_have_count(counts[column])
        # Every card can be seen whole and tapped: inside the screen, under nothing.
        for box in boxes(page, f'[data-column="{column}"] .card'):
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
        assert_uncovered(page, f'[data-column="{column}"] .card-link')

    # A card opens as a full-screen sheet; the person approves its request there.
    tab(page, "pending").click()
    card(page, tasks.gated).locator(".card-link").click()
    expect(page.locator(f'#detail [data-detail-task="{tasks.gated}"]')).to_be_visible()
    expect_sheet_open(page, PHONE)
    page.locator("#detail").get_by_role("button", name="Approve").click()
    expect(page.locator("#detail .facts")).to_contain_text("approved")
    expect(approvals.locator("[data-approval-task]")).to_have_count(0)
    task = live_board.agent("worker-2").get(tasks.gated)
    assert task["approval"]["state"] == "approved", task

    # Closing the sheet gives the board back, with the focus on the card it showed.
    page.locator("#detail-sheet").get_by_role("button", name="Close").click()
    expect(page.locator("#detail-sheet")).to_be_hidden()
    expect(card(page, tasks.gated).locator(".card-link")).to_be_focused()
    expect(page.locator("#detail .detail-placeholder")).to_have_count(1)


def test_on_a_phone_the_tab_counts_are_live_and_escape_closes_the_sheet(
    pages: Screens, live_board: LiveBoard
):
    page = pages.open(screen=PHONE)
    alice = live_board.agent("alice")
    expect(tab(page, "pending").locator(".tab-count")).to_have_text("0")
    first = alice.create("Write the parser")
    expect(tab(page, "pending").locator(".tab-count")).to_have_text("1")
    alice.claim(first)
    expect(tab(page, "pending").locator(".tab-count")).to_have_text("0")
    expect(tab(page, "in_progress").locator(".tab-count")).to_have_text("1")
    # The open tab stays as it was: the card went to another one.
    expect(tab(page, "pending")).to_have_attribute("aria-selected", "true")
    expect(card(page, first)).to_be_hidden()

    tab(page, "in_progress").click()
    card(page, first).locator(".card-link").click()
    expect_sheet_open(page, PHONE)
    # A push about the open card refreshes the sheet and keeps it open.
    alice.update(first, activeForm="Parsing the grammar")
    expect(page.locator("#detail .facts")).to_contain_text("Parsing the grammar")
    expect_sheet_open(page, PHONE)
    page.keyboard.press("Escape")
    expect(page.locator("#detail-sheet")).to_be_hidden()
    expect(card(page, first).locator(".card-link")).to_be_focused()


def test_on_a_phone_a_move_leaves_the_board_in_view_and_a_refused_one_opens_the_sheet(
    pages: Screens, live_board: LiveBoard
):
    page = pages.open(screen=PHONE)
    # One task in progress at a time: the second move is refused (409).
    page.goto(live_board.url + "settings/")
    page.fill("input[name=maxInProgress]", "1")
    page.locator("form button[type=submit].primary").click()
    page.goto(live_board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    alice = live_board.agent("alice")
    first, second = alice.create("Parse the logs"), alice.create("Chart the logs")
    # Both cards in place before a key goes to one: a push that lands between the focus
    # and the key would take the focus with the card it replaces.
    expect(tab(page, "pending").locator(".tab-count")).to_have_text("2")
    expect(card(page, second)).to_have_count(1)

    def move_to_in_progress(number: str) -> None:
        tab(page, "pending").click()
        card(page, number).locator(".card-link").focus()
        expect(card(page, number).locator(".card-link")).to_be_focused()
        page.keyboard.press("m")
        page.locator('#move-menu [data-move-to="in_progress"]').click()

    move_to_in_progress(first)
    expect(tab(page, "in_progress").locator(".tab-count")).to_have_text("1")
    expect(page.locator("#detail-sheet")).to_be_hidden()
    expect(page.locator("#detail .detail-placeholder")).to_have_count(1)

    move_to_in_progress(second)
    expect_sheet_open(page, PHONE)
    expect(page.locator(f'#detail [data-detail-task="{second}"] [role=alert]')).to_contain_text(
        "it allows 1 at once"
    )
    expect(tab(page, "pending").locator(".tab-count")).to_have_text("1")


@pytest.mark.parametrize("width", [360, 390, 600, 768, 1024])
def test_from_360_to_1024_px_nothing_overlaps_and_the_strips_stay_on_top(
    pages: Screens, live_board: LiveBoard, cluster: Cluster, width: int
):
    tasks = populate(live_board, cluster)
    screen: ViewportSize = {"width": width, "height": 800}
    page = pages.open(screen=screen)

    # Nothing wider than the screen: no sideways scrolling.
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    strips = boxes(page, ".strips")[0]
    columns = boxes(page, ".columns .column")
    side = boxes(page, ".side")[0]
    assert columns, "no column is shown"
    for column in columns:
        assert strips["y"] + strips["height"] <= column["y"], (strips, column)
        assert column["x"] >= 0 and column["x"] + column["width"] <= width, column
        assert not overlap(column, side), (column, side)
    for i, a in enumerate(columns):
        for b in columns[i + 1 :]:
            assert not overlap(a, b), (a, b)
    assert_uncovered(page, "#needs .need a, #needs button")
    assert_uncovered(page, ".board-header a, .board-header button, .board-header select")
    assert_uncovered(page, ".columns .card-link")
    # The reset confirmation opens inside the screen too (on a phone, from the header's Menu).
    if width < 760:
        page.locator("[data-board-menu]").click()
    page.locator(".reset summary").click()
    expect(page.locator(".reset form")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    form = boxes(page, ".reset form")[0]
    assert form["x"] >= 0 and form["x"] + form["width"] <= width, form
    page.locator(".reset summary").click()

    # Below the desktop width a card's details open as a modal sheet over the board.
    if width < 760:
        tab(page, "in_progress").click()
    card(page, tasks.working).locator(".card-link").click()
    sheet = page.locator("#detail-sheet")
    expect(sheet.locator(f'[data-detail-task="{tasks.working}"]')).to_be_visible()
    assert sheet.evaluate("(el) => el.matches(':modal')")
    box = sheet.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    assert_uncovered(page, "#detail-sheet button, #detail-sheet a")


def test_at_1440_the_columns_sit_side_by_side_with_the_details_beside_them(
    pages: Screens, live_board: LiveBoard, cluster: Cluster
):
    tasks = populate(live_board, cluster)
    page = pages.open(screen=DESKTOP)

    expect(page.locator(".column-tabs")).to_be_hidden()
    columns = boxes(page, ".columns .column")
    assert [round(c["y"]) for c in columns] == [round(columns[0]["y"])] * 4, columns
    for left, right in itertools.pairwise(columns):
        assert left["x"] + left["width"] < right["x"], (left, right)
    # The board fits the window, the detail panel at the right of the columns.
    assert page.evaluate("document.documentElement.scrollHeight") <= DESKTOP["height"]
    detail = boxes(page, "#detail")[0]
    assert detail["x"] > columns[-1]["x"] + columns[-1]["width"], (detail, columns[-1])
    expect(page.locator("#detail .detail-placeholder")).to_be_visible()
    expect(page.locator(".sheet-bar")).to_be_hidden()

    card(page, tasks.working).locator(".card-link").click()
    expect(page.locator(f'#detail [data-detail-task="{tasks.working}"]')).to_be_visible()
    sheet = page.locator("#detail-sheet")
    assert not sheet.evaluate("(el) => el.matches(':modal')")
    assert boxes(page, "#detail")[0]["x"] == detail["x"]
    # The card's Move button shows only on hover or focus, as the desktop looked before.
    page.mouse.move(0, 0)
    move = card(page, tasks.ready).locator("[data-move-menu]")
    expect(move).to_have_css("opacity", "0")
    card(page, tasks.ready).hover()
    expect(move).to_have_css("opacity", "1")


def test_the_readme_screenshots_of_a_phone_and_a_desktop_are_small(
    browser: Browser, cluster: Cluster, server: Server, tmp_path: Path
):
    """The README's pictures of the board (docs/board-phone.png, docs/board-desktop.png).
    Run with KANBAN_SCREENSHOTS=docs to write them there."""
    board = new_live_board(cluster, server, name="Release 2.0")
    populate(board, cluster)
    folder = Path(os.environ.get("KANBAN_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    screens = Screens(browser, board)
    try:
        for name, screen in (("phone", PHONE), ("desktop", DESKTOP)):
            page = screens.open(screen=screen)
            if name == "phone":
                tab(page, "in_progress").click()
            page.mouse.move(0, 0)
            path = folder / f"board-{name}.png"
            page.screenshot(path=path, animations="disabled", caret="hide")
            assert path.stat().st_size < 200_000, (path, path.stat().st_size)
    finally:
        screens.close()
    assert not screens.errors, screens.errors

"""The board without a mouse, and what a screen reader hears (issue #17): a card is a
keyboard stop, Enter opens its details, a menu on the card (or M) moves it as a drag
does, A goes to the approvals, ? lists the keys; pushed changes are read as one polite
summary from the page's single announcer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import USERNAME, LiveBoard
from .screens import PHONE, Screens, card, screens_on

pytestmark = pytest.mark.browser


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


def focused(page: Page, selector: str) -> bool:
    return page.evaluate("(s) => !!document.activeElement?.matches(s)", selector)


def tab_to(page: Page, selector: str, limit: int = 60) -> int:
    """Press Tab from where the focus is until it reaches ``selector``; the presses."""
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if focused(page, selector):
            return presses
    raise AssertionError(f"{selector} not reached in {limit} presses of Tab")


def expect_in_column(page: Page, number: str, column: str) -> None:
    expect(page.locator(f'[data-column="{column}"] [data-task-id="{number}"]')).to_have_count(1)


def request_approval(live_board: LiveBoard, subject: str) -> str:
    alice = live_board.agent("alice")
    number = alice.create(subject, requiresApproval=True)
    reply = alice.call("TaskClaim", {"taskId": number})
    assert reply.status == 202, reply
    return number


def test_keyboard_only_moves_a_card_to_in_progress_and_approves_a_request(
    pages: Screens, live_board: LiveBoard
):
    alice = live_board.agent("alice")
    first = alice.create("Write the parser")
    gated = request_approval(live_board, "Drop the legacy table")
    page = pages.open()

    # From the top of the page, Tab alone reaches the card; its ring is drawn round it.
    tab_to(page, f"#task-{first} .card-link")
    expect(card(page, first)).to_have_css("outline-style", "solid")

    # M opens the card's menu at its first choice; Enter moves the card, as a drag does.
    page.keyboard.press("m")
    menu = page.locator("#move-menu")
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-label", f"Move #{first} to")
    expect(menu.get_by_role("menuitem")).to_have_text(["In progress", "Completed"])
    expect(menu.get_by_role("menuitem", name="In progress")).to_be_focused()
    expect(menu.get_by_role("menuitem", name="In progress")).to_have_css("outline-style", "solid")
    page.keyboard.press("Enter")
    expect(menu).to_be_hidden()
    expect_in_column(page, first, "in_progress")
    assert alice.get(first)["status"] == "in_progress"
    # The focus went with the card, and the move is read out once.
    expect(card(page, first).locator(".card-link")).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text(
        f"#{first} moved to In progress by {USERNAME}"
    )

    # A goes to the first request waiting for approval; Enter approves it.
    page.keyboard.press("a")
    approve = page.locator(f'#needs [data-approval-task="{gated}"] button.primary')
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#needs [data-approval-task]")).to_have_count(0)
    assert alice.get(gated)["approval"]["state"] == "approved"
    # The answer shows beside the board and takes the focus (the strip's item is gone).
    expect(page.locator(f'#detail [data-detail-task="{gated}"] h2')).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text(f"#{gated} approved by {USERNAME}")


def test_enter_opens_a_cards_details_and_the_menu_and_help_close_with_escape(
    pages: Screens, live_board: LiveBoard
):
    alice = live_board.agent("alice")
    first = alice.create("Write the parser")
    page = pages.open()
    link = card(page, first).locator(".card-link")

    link.focus()
    page.keyboard.press("Enter")
    expect(page.locator(f'#detail [data-detail-task="{first}"] h2')).to_be_focused()

    # The card's Move button is a keyboard stop too; Escape closes its menu and returns.
    move = card(page, first).get_by_role("button", name=f"Move #{first}")
    move.focus()
    expect(move).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("Enter")
    expect(page.locator("#move-menu")).to_be_visible()
    expect(move).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowDown")
    expect(page.get_by_role("menuitem", name="Completed")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#move-menu")).to_be_hidden()
    expect(move).to_be_focused()
    expect(move).to_have_attribute("aria-expanded", "false")
    assert alice.get(first)["status"] == "pending"

    # ? lists the keys in a dialog; Escape closes it.
    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("Move the focused card to another column")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    # Typing in a field is never taken for a shortcut.
    page.locator("#owner-filter").focus()
    page.locator(".message-box textarea").focus()
    page.keyboard.type("a?m")
    expect(page.locator(".message-box textarea")).to_have_value("a?m")
    expect(help_dialog).to_be_hidden()


def test_on_a_phone_arrow_keys_walk_the_columns_through_the_tabs_and_a_moved_card_is_followed(
    pages: Screens, live_board: LiveBoard
):
    alice = live_board.agent("alice")
    first, second, third = (alice.create(s) for s in ("One", "Two", "Three"))
    alice.claim(third)
    page = pages.open(screen=PHONE)

    card(page, first).locator(".card-link").focus()
    page.keyboard.press("ArrowDown")
    expect(card(page, second).locator(".card-link")).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#tab-in_progress")).to_have_attribute("aria-selected", "true")
    expect(card(page, third).locator(".card-link")).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#tab-pending")).to_have_attribute("aria-selected", "true")
    expect(card(page, first).locator(".card-link")).to_be_focused()
    # The tabs themselves: arrow keys go from tab to tab, each with its focus ring.
    page.locator("#tab-pending").focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#tab-in_progress")).to_be_focused()
    expect(page.locator("#tab-in_progress")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#tab-in_progress")).to_have_css("outline-style", "solid")
    expect(card(page, third)).to_be_visible()
    page.keyboard.press("ArrowLeft")
    card(page, first).locator(".card-link").focus()

    # Moved from the menu, the card is followed into its tab; no sheet covers the board.
    page.keyboard.press("m")
    page.get_by_role("menuitem", name="Completed").click()
    expect_in_column(page, first, "completed")
    expect(page.locator("#tab-completed")).to_have_attribute("aria-selected", "true")
    expect(card(page, first).locator(".card-link")).to_be_focused()
    expect(page.locator("#tab-completed .tab-count")).to_have_text("1")
    expect(page.locator("#detail-sheet")).to_be_hidden()


def test_pushed_changes_are_read_as_one_polite_summary(pages: Screens, live_board: LiveBoard):
    page = pages.open()
    region = page.locator("#announcer")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_have_attribute("role", "status")
    # One region speaks for the board; the pushed fragments themselves are not live.
    pushed = "#detail, .strips, #board-summary, .columns, #roster"
    expect(page.locator(f":is({pushed})[aria-live], :is({pushed}) [aria-live]")).to_have_count(0)

    alice = live_board.agent("alice")
    alice.create("Write the parser")
    expect(region).to_have_text("#1 “Write the parser” created by alice. Tasks 0/1.")

    # Five changes at once are one announcement, with the new progress.
    alice.ok("TaskBatch", {"ops": [{"op": "create", "subject": f"Step {i}"} for i in range(1, 6)]})
    expect(region).to_have_text(
        re.compile(
            r"^5 changes: #2 “Step 1” created by alice; #3 “Step 2” created by alice; "
            r"#4 “Step 3” created by alice; and 2 more\. Tasks 0/6\.$"
        )
    )

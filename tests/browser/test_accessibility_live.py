"""Every page a person uses, checked by axe-core (through axe-playwright-python) in a
real Chromium: no moderate, serious or critical violation (issues #17, #27). The board is checked with
an approval waiting and a card open, on a desktop, on a phone (the card in its sheet) and
in the dark colour scheme.

A new page joins the check with one line in ``PAGES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from devtools.liveserver import Cluster, Server

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Populated, Screens, card, new_live_board, populate

pytestmark = pytest.mark.browser

BLOCKING = ("moderate", "serious", "critical")


def open_card_awaiting_approval(page: Page, tasks: Populated) -> None:
    """The card whose approval is asked for, opened (its panel has Approve and Deny)."""
    expect(page.locator(f'#needs [data-approval-task="{tasks.gated}"]')).to_be_visible()
    tab = page.locator("#tab-pending")
    if tab.is_visible():  # a phone opens on the column with a problem; the card is in Pending
        tab.click()
    card(page, tasks.gated).locator(".card-link").click()
    expect(page.locator(f'#detail [data-detail-task="{tasks.gated}"]')).to_be_visible()


def open_move_menu(page: Page, tasks: Populated) -> None:
    card(page, tasks.ready).locator(".card-link").focus()
    page.keyboard.press("m")
    expect(page.locator("#move-menu")).to_be_visible()


def open_shortcuts(page: Page, tasks: Populated) -> None:
    page.locator("[data-shortcuts]").click()
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()


def open_notifications(page: Page, tasks: Populated) -> None:
    page.click("#notify summary")
    expect(page.locator("#notify-kinds")).to_be_visible()


def open_menu(page: Page, tasks: Populated) -> None:
    page.click("[data-board-menu]")
    expect(page.locator("#owner-filter")).to_be_visible()


def focus_a_node(page: Page, tasks: Populated) -> None:
    page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached")
    page.locator("#graph .node[data-task]").first.focus()
    expect(page.locator("#graph-tip")).to_be_visible()


def add_endpoint(page: Page, tasks: Populated) -> None:
    """An endpoint with a test event queued: the page shows its secret and deliveries."""
    page.fill("input[name=url]", "https://hooks.example.invalid/kanban")
    page.click("[data-add-webhook] button[type=submit]")
    expect(page.locator("[data-new-secret]")).to_be_visible()
    page.locator("[data-webhook] button[value=test]").first.click()
    expect(page.locator("[data-delivery]").first).to_be_visible()


def refuse_a_setting(page: Page, tasks: Populated) -> None:
    """A value the service refuses (nothing changes): the form again, the error beside it."""
    page.fill("input[name=maxAttempts]", "0")
    page.click("main form button[type=submit]")
    expect(page.locator("#id_maxAttempts_error")).to_be_visible()


@dataclass(frozen=True)
class Checked:
    """A page to check: ``path`` with ``{board}`` for the board's slug."""

    name: str
    path: str
    login: bool = True
    prepare: Callable[[Page, Populated], None] | None = None
    screen: tuple[int, int] = (DESKTOP["width"], DESKTOP["height"])
    color_scheme: Literal["light", "dark"] = "light"


PHONE_SIZE = (PHONE["width"], PHONE["height"])

PAGES = [
    Checked("login", "/login/", login=False),
    Checked("login on a phone", "/login/", login=False, screen=PHONE_SIZE),
    Checked("board list", "/boards/"),
    Checked("inbox", "/inbox/"),
    Checked("inbox on a phone", "/inbox/", screen=PHONE_SIZE),
    Checked("board with a card open", "/boards/{board}/", prepare=open_card_awaiting_approval),
    Checked(
        "board on a phone, a card open",
        "/boards/{board}/",
        prepare=open_card_awaiting_approval,
        screen=PHONE_SIZE,
    ),
    Checked(
        "board in the dark, a card open",
        "/boards/{board}/",
        prepare=open_card_awaiting_approval,
        color_scheme="dark",
    ),
    Checked("board's move menu", "/boards/{board}/", prepare=open_move_menu),
    Checked("board's shortcut help", "/boards/{board}/", prepare=open_shortcuts),
    Checked("task page", "/boards/{board}/tasks/1/"),
    Checked("tokens", "/boards/{board}/tokens/"),
    Checked("members", "/boards/{board}/members/"),
    Checked("settings", "/boards/{board}/settings/"),
    Checked("settings in the dark", "/boards/{board}/settings/", color_scheme="dark"),
    Checked("settings refusing a value", "/boards/{board}/settings/", prepare=refuse_a_setting),
    Checked("a refused request", "/boards/{board}/graph/?task=x"),
    Checked("board's notifications", "/boards/{board}/", prepare=open_notifications),
    Checked("activity", "/boards/{board}/activity/"),
    Checked("activity on a phone", "/boards/{board}/activity/", screen=PHONE_SIZE),
    Checked("webhooks", "/boards/{board}/webhooks/", prepare=add_endpoint),
    Checked("metrics", "/boards/{board}/metrics/"),
    Checked("connect an agent", "/boards/{board}/connect/"),
    Checked("graph", "/boards/{board}/graph/?scope=all"),
    Checked("metrics in the dark", "/boards/{board}/metrics/", color_scheme="dark"),
    Checked("metrics on a phone", "/boards/{board}/metrics/?range=1h", screen=PHONE_SIZE),
    Checked("metrics refusing a range", "/boards/{board}/metrics/?range=2h"),
    Checked("graph on a phone", "/boards/{board}/graph/", screen=PHONE_SIZE),
    Checked("graph with a node focused", "/boards/{board}/graph/", prepare=focus_a_node),
    Checked("activity, everything", "/boards/{board}/activity/?show=all"),
    Checked("connect an agent on a phone", "/boards/{board}/connect/", screen=PHONE_SIZE),
    Checked("settings on a phone", "/boards/{board}/settings/", screen=PHONE_SIZE),
    Checked("board's phone menu", "/boards/{board}/", prepare=open_menu, screen=PHONE_SIZE),
    Checked("gate rules", "/boards/{board}/gates/"),
    # The rest at a phone's width too.
    *(
        Checked(f"{name} on a phone", path, screen=PHONE_SIZE)
        for name, path in (
            ("board list", "/boards/"),
            ("task page", "/boards/{board}/tasks/1/"),
            ("tokens", "/boards/{board}/tokens/"),
            ("members", "/boards/{board}/members/"),
            ("webhooks", "/boards/{board}/webhooks/"),
            ("gate rules", "/boards/{board}/gates/"),
        )
    ),
]


@pytest.fixture(scope="module")
def checked_board(cluster: Cluster, server: Server) -> tuple[LiveBoard, Populated]:
    """One board with a card in every state, shared by this module's checks (read only)."""
    board = new_live_board(cluster, server)
    return board, populate(board, cluster)


@pytest.fixture
def pages(browser: Browser, checked_board: tuple[LiveBoard, Populated]) -> Iterator[Screens]:
    opened = Screens(browser, checked_board[0])
    try:
        yield opened
    finally:
        opened.close()
    assert not opened.errors, f"JavaScript errors on the page: {opened.errors}"


@pytest.mark.parametrize("checked", PAGES, ids=[p.name for p in PAGES])
def test_axe_finds_no_moderate_serious_or_critical_violation(
    pages: Screens, checked_board: tuple[LiveBoard, Populated], checked: Checked
):
    board, tasks = checked_board
    width, height = checked.screen
    page = pages.open(
        screen={"width": width, "height": height},
        color_scheme=checked.color_scheme,
        path=checked.path.format(board=board.slug),
        login=checked.login,
    )
    if checked.prepare:
        checked.prepare(page, tasks)
    results = Axe().run(page)
    blocking = [v for v in results.response["violations"] if v["impact"] in BLOCKING]
    assert not blocking, results.generate_report()

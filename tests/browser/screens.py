"""Board pages at a chosen screen size and colour scheme, a board with a card in every
state, and the checks the phone, keyboard and accessibility tests share.

Helpers only (pytest collects no test here); the fixtures built on them live in the
test modules that use them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from playwright.sync_api import Browser, Page, ViewportSize, expect

from devtools.liveserver import Cluster, Server

from .conftest import PASSWORD, TIMEOUT_MS, USERNAME, Agent, BoardPages, LiveBoard, wait_live

PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1440, "height": 900}
COLUMNS = ("pending", "in_progress", "blocked", "completed")

_numbers = itertools.count(1)


class Screens(BoardPages):
    """``BoardPages`` (one browser context per page, console errors collected) at a
    screen size and colour scheme; a phone is a touch screen."""

    def open(
        self,
        *,
        screen: ViewportSize = DESKTOP,
        color_scheme: Literal["light", "dark"] = "light",
        path: str | None = None,
        login: bool = True,
    ) -> Page:
        phone = screen["width"] < 760
        context = self.browser.new_context(
            viewport=screen,
            color_scheme=color_scheme,
            is_mobile=phone,
            has_touch=phone,
            device_scale_factor=1,
        )
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        self._watch(page, f"page {len(self.contexts)} ({screen['width']}px)")
        base = self.live_board.server.base
        target = path or f"/boards/{self.live_board.slug}/"
        if not login:
            page.goto(base + target)
            return page
        page.goto(f"{base}/login/?next={target}")
        page.fill("input[name=username]", USERNAME)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(base + target)
        if page.locator("#board").count():
            wait_live(page)
        return page


@contextmanager
def screens_on(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    """``Screens`` on the board, closed after; a page's JavaScript error fails the test."""
    opened = Screens(browser, live_board)
    try:
        yield opened
    finally:
        opened.close()
    assert not opened.errors, f"JavaScript errors on the page: {opened.errors}"


@contextmanager
def screens_on_a_new_board(
    browser: Browser, cluster: Cluster, server: Server, name: str
) -> Iterator[Screens]:
    """``Screens`` on a fresh board (``screens_on``)."""
    with screens_on(browser, new_live_board(cluster, server, name)) as opened:
        yield opened


def new_live_board(cluster: Cluster, server: Server, name: str = "") -> LiveBoard:
    """A fresh board with a team token, as the ``live_board`` fixture makes one (for a
    board shared by a module's tests)."""
    if not server.running:
        server.start()
    slug = f"s{next(_numbers)}-{os.getpid()}"
    output = cluster.manage(
        "shell",
        "-c",
        "from django.core.management import call_command\n"
        f"call_command('createboard', {slug!r}, name={name or f'Screens {slug}'!r})\n"
        f"call_command('issuetoken', {slug!r}, 'agents', team=True)\n",
    )
    token = output.strip().splitlines()[-1]
    assert token.startswith("ak_"), output
    return LiveBoard(server, slug, token)


@dataclass
class Populated:
    """The numbers of the populated board's tasks, by what they show."""

    done: str
    working: str
    working_too: str
    ready: str
    blocked: str
    gated: str
    failed: str
    stuck: str


def populate(live_board: LiveBoard, cluster: Cluster) -> Populated:
    """A card in every state a person meets: ready, in progress, blocked, stuck, completed,
    failed (and needing attention), urgent and high priority, one awaiting approval."""
    cluster.manage(
        "shell",
        "-c",
        "from boards.core import services\nfrom boards.models import Board\n"
        f"services.board_settings(board=Board.objects.get(slug={live_board.slug!r}), "
        "actor='pat', maxAttempts=1)\n",
    )
    alice: Agent = live_board.agent("worker-1")
    bob: Agent = live_board.agent("worker-2")
    done = alice.create("Design the schema")
    alice.claim(done)
    alice.update(done, status="completed", result="Tables and indexes agreed")
    working = alice.create("Write the parser", activeForm="Writing the parser", priority="urgent")
    alice.claim(working)
    working_too = bob.create("Set up CI", activeForm="Setting up CI")
    bob.claim(working_too)
    ready = alice.create("Write the docs", priority="high")
    blocked = alice.create("Ship the release", blockedBy=[working, working_too])
    gated = alice.create("Drop the legacy table", requiresApproval=True)
    reply = bob.call("TaskClaim", {"taskId": gated})
    assert reply.status == 202, reply
    failed = bob.create("Load test")
    bob.claim(failed)
    bob.update(failed, status="failed", result="Timed out at 500 rps")
    stuck = alice.create("Publish the benchmark", blockedBy=[failed])
    return Populated(done, working, working_too, ready, blocked, gated, failed, stuck)


def card(page: Page, number: str) -> Any:
    return page.locator(f'#board [data-task-id="{number}"]')


# The box of every element matched, as {x, y, width, height}, in page coordinates.
BOXES_JS = """(selector) => Array.from(document.querySelectorAll(selector))
  .filter((el) => el.getClientRects().length)
  .map((el) => { const r = el.getBoundingClientRect();
                 return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; })"""

# Scrolls the element into view; true when what is drawn at its centre is the element
# itself or inside it (nothing covers it).
UNCOVERED_JS = """(el) => { el.scrollIntoView({block: "center"});
  const r = el.getBoundingClientRect();
  const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
  return !!hit && (hit === el || el.contains(hit)); }"""


def boxes(page: Page, selector: str) -> list[dict[str, float]]:
    return page.evaluate(BOXES_JS, selector)


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"] - 0.5
        and b["x"] < a["x"] + a["width"] - 0.5
        and a["y"] < b["y"] + b["height"] - 0.5
        and b["y"] < a["y"] + a["height"] - 0.5
    )


def assert_uncovered(page: Page, selector: str) -> None:
    """Every element ``selector`` matches and the page shows can be seen and clicked."""
    items = page.locator(selector)
    for i in range(items.count()):
        item = items.nth(i)
        if not item.is_visible():
            continue
        assert item.evaluate(UNCOVERED_JS), f"{selector} #{i} is covered by another element"


def expect_sheet_open(page: Page, screen: ViewportSize) -> None:
    """The details fill the screen (a phone) as a modal sheet with its close button."""
    sheet = page.locator("#detail-sheet")
    expect(sheet).to_be_visible()
    assert sheet.evaluate("(el) => el.matches(':modal')")
    box = sheet.bounding_box()
    assert box is not None
    assert (box["x"], box["y"]) == (0, 0), box
    assert (box["width"], box["height"]) == (screen["width"], screen["height"]), box
    expect(sheet.get_by_role("button", name="Close")).to_be_visible()

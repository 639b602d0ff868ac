"""The live board in a real Chromium: agents' calls reach every open page, people's drags
reach the agents, a pushed board equals a reloaded one, and a reconnecting page catches up
(SPEC §5 "Live"). Waits are conditions with a bounded timeout, never sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Request, expect

from devtools.liveserver import Cluster, Server

from .conftest import LiveBoard, assert_not_reloaded, mark_document, wait_live

pytestmark = pytest.mark.browser

COLUMNS = ("pending", "in_progress", "blocked", "completed")

OpenPage = Callable[[], Page]


def card(page: Page, task_id: str) -> Locator:
    return page.locator(f'[data-task-id="{task_id}"]')


def expect_card_in(page: Page, task_id: str, column: str) -> None:
    """The card is in ``column``, and exactly once on the whole page."""
    expect(page.locator(f'[data-column="{column}"] [data-task-id="{task_id}"]')).to_have_count(1)
    expect(card(page, task_id)).to_have_count(1)


def drag(page: Page, task_id: str, column: str) -> None:
    """A person drags the card onto ``column``: the page's own drag-and-drop listeners get
    the browser's drag events, dispatched on the card and the column themselves.
    (Playwright's ``drag_to`` aims the mouse at where the card was a moment before; a push
    that reflows the page in between lands the drag on whichever card is there then.)"""
    data = page.evaluate_handle("() => new DataTransfer()")
    target = page.locator(f'[data-column="{column}"]')
    card(page, task_id).dispatch_event("dragstart", {"dataTransfer": data})
    target.dispatch_event("dragover", {"dataTransfer": data})
    target.dispatch_event("drop", {"dataTransfer": data})
    card(page, task_id).dispatch_event("dragend", {"dataTransfer": data})


def settled(page: Page, agent: str) -> None:
    """The page shows ``agent`` on its roster: the push that first lists an agent (a
    second after its calls) reflows the page above the columns, and a drag begun across it
    would pick up whichever card then lies under the mouse."""
    expect(page.locator(f'#roster [data-agent="{agent}"]')).to_be_attached()


def expect_counts(page: Page, **counts: int) -> None:
    for column, n in counts.items():
        expect(page.locator(f"#count-{column}")).to_have_text(str(n))


# Each column's cards in DOM order, each card's HTML with whitespace normalised, the
# column counts, the summary, the agents' roster and the sequence the page is at.
SNAPSHOT_JS = """() => {
  const norm = (html) => html.replace(/\\s+/g, " ").replace(/>\\s+</g, "><").trim();
  const columns = {};
  for (const column of document.querySelectorAll("[data-column]")) {
    const cards = Array.from(column.querySelectorAll("[data-task-id]"));
    columns[column.dataset.column] = {
      ids: cards.map((c) => c.dataset.taskId),
      cards: cards.map((c) => norm(c.outerHTML)),
      count: column.querySelector(".count").textContent.trim(),
    };
  }
  return {
    columns,
    summary: norm(document.getElementById("board-summary").innerHTML),
    roster: norm(document.getElementById("roster").innerHTML),
    seq: document.getElementById("board-seq").dataset.seq,
  };
}"""


def snapshot(page: Page) -> dict[str, Any]:
    return page.evaluate(SNAPSHOT_JS)


def test_agent_changes_appear_live_in_every_open_page(open_page: OpenPage, live_board: LiveBoard):
    pages = [open_page(), open_page()]
    alice = live_board.agent("alice")

    # An agent's first call, even a read, puts it on the roster of every open page.
    assert alice.ok("TaskList", {})["total"] == 0
    for page in pages:
        expect(page.locator('#roster [data-agent="alice"]')).to_have_count(1)

    task_id = alice.create("Write the parser", activeForm="Writing the parser")
    assert task_id == "1"
    for page in pages:
        expect_card_in(page, "1", "pending")
        expect(card(page, "1")).to_contain_text("Write the parser")
        expect_counts(page, pending=1, in_progress=0, blocked=0, completed=0)

    alice.claim("1")
    for page in pages:
        expect_card_in(page, "1", "in_progress")
        expect(card(page, "1").locator(".card-active")).to_have_text("Writing the parser")
        expect(card(page, "1")).to_contain_text("@alice")
        expect_counts(page, pending=0, in_progress=1)

    alice.update("1", status="completed")
    for page in pages:
        expect_card_in(page, "1", "completed")
        expect(card(page, "1")).to_have_attribute("data-status", "completed")
        expect(card(page, "1").locator(".card-active")).to_have_count(0)
        expect_counts(page, in_progress=0, completed=1)
        expect(page.locator("#board-summary .progress-text")).to_have_text("Tasks 1/1")
        assert_not_reloaded(page)


def test_completing_a_blocker_moves_its_dependent_from_blocked_to_pending(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice = live_board.agent("alice")
    blocker = alice.create("Design the schema")
    dependent = alice.create("Write the models", blockedBy=[blocker])

    expect_card_in(page, blocker, "pending")
    expect_card_in(page, dependent, "blocked")
    expect(card(page, dependent).locator(".card-blocked")).to_have_text("blocked by #1")
    expect(card(page, dependent)).to_have_attribute("draggable", "false")

    alice.claim(blocker)
    expect_card_in(page, blocker, "in_progress")
    expect_card_in(page, dependent, "blocked")

    alice.update(blocker, status="completed")
    expect_card_in(page, blocker, "completed")
    expect_card_in(page, dependent, "pending")
    expect(card(page, dependent).locator(".card-blocked")).to_have_count(0)
    expect(card(page, dependent)).not_to_contain_text("blocked by")
    expect(card(page, dependent)).to_have_attribute("draggable", "true")
    expect_counts(page, pending=1, blocked=0, completed=1)
    assert_not_reloaded(page)


def test_a_persons_drag_reaches_the_agent_and_the_other_page(
    open_page: OpenPage, live_board: LiveBoard
):
    dragger, watcher = open_page(), open_page()
    alice = live_board.agent("alice")
    task_id = alice.create("Review the pull request")
    for page in (dragger, watcher):
        expect_card_in(page, task_id, "pending")
    settled(dragger, "alice")

    drag(dragger, task_id, "in_progress")

    for page in (dragger, watcher):
        expect_card_in(page, task_id, "in_progress")
        expect_counts(page, pending=0, in_progress=1)
    # The card moved on the other page only after the change was committed.
    assert alice.get(task_id)["status"] == "in_progress"
    assert_not_reloaded(watcher)


def test_moves_and_the_panel_go_through_htmx_and_a_refused_move_shows_its_alert(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    # One task in progress at a time: the second move is refused (409).
    page.goto(live_board.url + "settings/")
    page.fill("input[name=maxInProgress]", "1")
    page.locator("form button[type=submit].primary").click()
    page.goto(live_board.url)
    wait_live(page)
    mark_document(page)
    sent: list[dict[str, str]] = []

    def record(request: Request) -> None:
        if "/tasks/" in request.url:
            sent.append({**request.headers, "url": request.url, "method": request.method})

    page.on("request", record)
    alice = live_board.agent("alice")
    first, second = alice.create("Parse the logs"), alice.create("Chart the logs")
    expect_card_in(page, second, "pending")
    settled(page, "alice")

    drag(page, first, "in_progress")
    expect_card_in(page, first, "in_progress")
    expect(page.locator(f'#detail [data-detail-task="{first}"]')).to_be_visible()
    # htmx sent it (its own HX-Source header: from the move menu), with the page's CSRF token.
    move = next(r for r in sent if r["url"].endswith(f"/tasks/{first}/status/"))
    assert (move["hx-request"], move["hx-source"]) == ("true", "div#move-menu")

    drag(page, second, "in_progress")
    refused = page.locator(f'#detail [data-detail-task="{second}"]')
    expect(refused.locator("[role=alert]")).to_contain_text("it allows 1 at once")
    expect(refused.locator("h2")).to_be_focused()  # a person asked: the panel takes the focus
    expect_card_in(page, second, "pending")

    # The open panel follows its task's pushes, asked for by htmx from the panel's address.
    alice.update(second, description="Bars, not pies")
    expect(page.locator(f'#detail [data-detail-task="{second}"]')).to_contain_text("Bars, not pies")
    refresh = [r for r in sent if r["url"].endswith(f"/tasks/{second}/") and r["method"] == "GET"]
    assert refresh and refresh[-1]["hx-source"] == "section#detail", refresh
    assert_not_reloaded(page)


def test_a_pushed_board_is_the_same_dom_as_a_reloaded_one(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice, bob = live_board.agent("alice"), live_board.agent("bob")
    alice.create("Design the schema", activeForm="Designing the schema")  # 1
    alice.create("Write the models", blockedBy=["1"])  # 2
    alice.create("Write the API")  # 3 (not blocked: an agent may not delete blocked work)
    bob.create("Write the docs")  # 4
    bob.create("Set up CI")  # 5
    alice.create("Release", blockedBy=["3", "4", "5"])  # 6

    bob.claim("5")
    bob.update("5", status="completed")
    alice.claim("1")
    alice.update("1", status="completed")  # lands after #5 in Completed; unblocks #2
    bob.claim("4")
    alice.claim("2")  # lands after #4 in In progress
    alice.update("2", activeForm="Writing the models")
    bob.update("4", status="pending", owner="")  # back to Pending, unassigned
    alice.update("3", status="deleted")  # #6 now waits on #4 only

    expect_card_in(page, "1", "completed")
    expect_card_in(page, "2", "in_progress")
    expect(card(page, "3")).to_have_count(0)
    expect_card_in(page, "4", "pending")
    expect_card_in(page, "5", "completed")
    expect_card_in(page, "6", "blocked")
    expect(card(page, "6").locator(".card-blocked")).to_have_text("blocked by #4")
    expect(card(page, "2").locator(".card-active")).to_have_text("Writing the models")
    expect_counts(page, pending=1, in_progress=1, blocked=1, completed=2)
    pushed = snapshot(page)
    assert_not_reloaded(page)

    page.reload()
    wait_live(page)
    reloaded = snapshot(page)

    assert [pushed["columns"][c]["ids"] for c in COLUMNS] == [["4"], ["2"], ["6"], ["1", "5"]]
    for column in COLUMNS:
        assert pushed["columns"][column] == reloaded["columns"][column], column
    assert pushed["summary"] == reloaded["summary"]
    assert pushed["roster"] == reloaded["roster"]
    assert pushed["seq"] == reloaded["seq"]


def _hide(page: Page, hidden: bool) -> None:
    """Make the tab look hidden or visible to the page (as switching tabs does)."""
    page.evaluate(
        """(hidden) => {
          Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
          Object.defineProperty(document, "visibilityState",
            {configurable: true, get: () => (hidden ? "hidden" : "visible")});
          document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_a_tab_that_comes_back_catches_up_on_what_it_missed(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice = live_board.agent("alice")
    alice.create("Seen live")  # 1
    expect_card_in(page, "1", "pending")

    # The ws extension closes the socket of a hidden tab and reopens it when visible again.
    _hide(page, True)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "down")

    alice.claim("1")
    alice.create("Missed while hidden", blockedBy=["1"])  # 2
    alice.create("Also missed")  # 3
    alice.update("3", status="deleted")
    # The socket is closed (data-state "down" above), so none of that has arrived yet.
    expect(page.locator('[data-column="pending"] [data-task-id="1"]')).to_have_count(1)
    expect(card(page, "2")).to_have_count(0)

    _hide(page, False)
    wait_live(page)
    expect_card_in(page, "1", "in_progress")
    expect_card_in(page, "2", "blocked")
    expect(card(page, "3")).to_have_count(0)
    expect_counts(page, pending=0, in_progress=1, blocked=1)
    assert_not_reloaded(page)


_WRITE_WHILE_DOWN = """
from boards.core import selectors, services
board = selectors.board_get({slug})
services.task_claim(board=board, agent="alice", task_id=1)
services.task_update(board=board, actor="alice", task_id=1, status="completed")
services.task_create(board=board, actor="bob", subject="Created while the server was down")
"""


def test_a_page_catches_up_after_the_server_restarts(
    open_page: OpenPage, live_board: LiveBoard, cluster: Cluster, server: Server
):
    page = open_page()
    alice = live_board.agent("alice")
    alice.create("Before the restart")  # 1
    expect_card_in(page, "1", "pending")
    # Keep the extension's reconnect backoff short so the wait below stays bounded; the
    # reconnect itself (on close code 1006) is the extension's own.
    page.evaluate(
        """() => {
          const connection = document.getElementById("board-socket")._htmx.ws.connection;
          connection.config.reconnectMaxDelay = 1000;
        }"""
    )

    server.stop()
    try:
        expect(page.locator("#live-status")).to_have_attribute("data-state", "down")
        # Changes made while no server pushes anything (through the services, as every door).
        cluster.manage("shell", "-c", _WRITE_WHILE_DOWN.format(slug=json.dumps(live_board.slug)))
    finally:
        server.start()

    wait_live(page)
    expect_card_in(page, "1", "completed")
    expect_card_in(page, "2", "pending")
    expect(card(page, "2")).to_contain_text("Created while the server was down")
    expect(page.locator("#board-summary .progress-text")).to_have_text("Tasks 1/2")
    assert_not_reloaded(page)

    # And it is live again.
    alice.claim("2")
    expect_card_in(page, "2", "in_progress")


def test_a_card_missing_from_its_columns_page_comes_back_without_replacing_the_others(
    open_page: OpenPage, live_board: LiveBoard
):
    """A column's page names a card the page lacks (its push was lost): the page fetches
    the column once the card's own push had time to arrive, and morphs it in, so the
    cards it already held (one a person may be dragging) stay the same elements."""
    page = open_page()
    alice = live_board.agent("alice")
    first, second = alice.create("Lost on its way"), alice.create("Held by the mouse")
    expect_card_in(page, second, "pending")
    page.evaluate(
        """([lost, held]) => {
          document.getElementById("task-" + lost).remove();
          document.getElementById("task-" + held).__held = true;
        }""",
        [first, second],
    )
    refetched: list[str] = []
    page.on("request", lambda r: refetched.append(r.url) if "/columns/pending/" in r.url else None)
    third = alice.create("Brings the column's page")
    expect_card_in(page, third, "pending")
    expect_card_in(page, first, "pending")
    assert page.evaluate(f'document.getElementById("task-{second}").__held === true')
    assert len(refetched) == 1
    expect_counts(page, pending=3)
    assert_not_reloaded(page)

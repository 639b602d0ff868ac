"""Reaching the person who is not looking (issue 15), in Chromium: the tab title counts
what waits for them, desktop notifications while the tab is hidden, and the activity
feed shows an agent's call within a second.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from devtools.liveserver import wait_until

from .conftest import TIMEOUT_MS, BoardPages, wait_live
from .test_supervision_live import claim_gated, create_gated

pytestmark = pytest.mark.browser

# Headless Chromium never hides a tab (no window to minimise or cover), so the tests
# say "hidden" through the one property notify.js reads; everything else is real:
# the permission is granted to the context, and Notification is the browser's own,
# wrapped only to count what the page created.
RECORD_NOTIFICATIONS = """
(() => {
  window.__hidden = false;
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true, get() { return window.__hidden ? "hidden" : "visible"; }
  });
  const Real = window.Notification;
  window.__notes = [];
  function Recorded(title, options) {
    const note = new Real(title, options);
    window.__notes.push({ title: title, body: options && options.body, note: note });
    return note;
  }
  Recorded.requestPermission = Real.requestPermission.bind(Real);
  Object.defineProperty(Recorded, "permission", { get() { return Real.permission; } });
  window.Notification = Recorded;
})();
"""


def wait_for_notes(page: Page, count: int) -> None:
    # (wait_for_function evaluates a string: the board's CSP refuses it, rightly.)
    wait_until(
        lambda: page.evaluate("window.__notes.length") >= count,
        timeout=TIMEOUT_MS / 1000,
        what=f"{count} desktop notification(s)",
    )


def open_with_notifications(pages: BoardPages) -> Page:
    base = pages.live_board.server.base
    context = pages.browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    context.grant_permissions(["notifications"], origin=base)
    context.add_init_script(RECORD_NOTIFICATIONS)
    pages.contexts.append(context)
    page = context.new_page()
    page.on("pageerror", lambda exc: pages.errors.append(str(exc)))
    page.goto(f"{base}/login/?next=/boards/{pages.live_board.slug}/")
    page.fill("input[name=username]", "pat")
    page.fill("input[name=password]", "pw-browser-123")
    page.click("button[type=submit]")
    page.wait_for_url(pages.live_board.url)
    wait_live(page)
    return page


def waiting_on_other_boards(page: Page) -> int:
    """What already waits for the person elsewhere (the tests share one server)."""
    return int(page.locator("#inbox-count").text_content() or 0)


def titled(count: int, name: str) -> str:
    return f"({count}) {name} · Agent Kanban" if count else f"{name} · Agent Kanban"


def test_the_tab_title_counts_what_waits_for_a_person_on_every_board_live(pages: BoardPages):
    page = pages.open()
    name = f"Browser board {pages.live_board.slug}"
    before = waiting_on_other_boards(page)
    expect(page).to_have_title(titled(before, name))
    agent = pages.live_board.agent("deployer")
    first, second = create_gated(agent, "Deploy"), create_gated(agent, "Migrate")
    claim_gated(agent, first)
    expect(page).to_have_title(titled(before + 1, name))
    claim_gated(agent, second)
    expect(page).to_have_title(titled(before + 2, name))
    page.locator(f'#needs [data-approval-task="{first}"] button.primary').click()
    expect(page).to_have_title(titled(before + 1, name))
    # The count is the inbox's: another page of the person's shows the same.
    other = pages.open()
    other.goto(f"{pages.live_board.server.base}/boards/")
    expect(other).to_have_title(re.compile(rf"^\({before + 1}\) "))


def test_a_hidden_tab_gets_a_desktop_notification_that_opens_the_task(pages: BoardPages):
    page = open_with_notifications(pages)
    page.click("#notify summary")
    expect(page.locator("#notify-permission")).to_have_attribute("data-state", "granted")
    agent = pages.live_board.agent("deployer")

    visible = create_gated(agent, "Seen while looking")
    claim_gated(agent, visible)
    expect(page.locator(f'#needs [data-approval-task="{visible}"]')).to_be_visible()
    # The header's inbox socket has seen it too (it tells of new items only). Its count is
    # no proof: other boards on the shared server gain and lose items meanwhile.
    known = f"{pages.live_board.slug}:task-{visible}:approval"
    expect(page.locator(f'#inbox-notify[data-live] li[data-need="{known}"]')).to_be_attached()
    assert page.evaluate("window.__notes.length") == 0  # the person is looking

    page.evaluate("window.__hidden = true")
    hidden = create_gated(agent, "Ship it")
    claim_gated(agent, hidden)
    wait_for_notes(page, 1)
    note = page.evaluate("({title: __notes[0].title, body: __notes[0].body})")
    assert note["body"] == (
        f"Browser board {pages.live_board.slug} · Waits for approval: #{hidden} Ship it (deployer)"
    )
    assert note["title"] == f"Browser board {pages.live_board.slug} · Agent Kanban"
    # A kind the person did not choose (completed) notifies nobody.
    done = agent.create("Quiet work")
    agent.update(done, status="completed")
    expect(page.locator(f"#cards-completed #task-{done}")).to_be_attached()
    assert page.evaluate("window.__notes.length") == 1
    # Clicking it opens the task.
    page.evaluate("window.__hidden = false; __notes[0].note.onclick()")
    expect(page.locator(f'[data-detail-task="{hidden}"]')).to_be_visible()


def test_a_person_turns_on_a_kind_and_it_notifies_them(pages: BoardPages):
    page = open_with_notifications(pages)
    page.click("#notify summary")
    page.check('#notify-kinds input[value="completed"]')
    page.click("#notify-kinds button[type=submit]")
    expect(page.locator("#notify-saved")).to_have_text("Saved.")
    page.evaluate("window.__hidden = true")
    agent = pages.live_board.agent("worker-2")
    done = agent.create("Finish line")
    agent.update(done, status="completed")
    wait_for_notes(page, 1)
    assert page.evaluate("__notes[0].body") == f"#{done} moved to Completed by worker-2"


def test_the_activity_feed_shows_an_agents_call_within_a_second(pages: BoardPages):
    page = pages.open()
    page.goto(pages.live_board.url + "activity/?show=all")
    expect(page.locator("#activity-live")).to_have_attribute("data-state", "live")
    agent = pages.live_board.agent("worker-7")
    agent.create("Warm up")  # the first push opens the page's socket path end to end
    expect(page.locator("#activity-rows tr").first).to_contain_text("created by worker-7")
    task = agent.create("Write the report")
    called = time.monotonic()
    row = page.locator("#activity-rows tr").first
    expect(row).to_contain_text(f"#{task} “Write the report” created by worker-7", timeout=1000)
    assert time.monotonic() - called < 1.0
    expect(row.locator("td.who")).to_have_text("worker-7")
    expect(row.locator("time")).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d "))


def test_the_activity_feed_is_pushed_over_its_own_socket_as_its_filters_keep_it(
    pages: BoardPages,
):
    page = pages.open()
    page.goto(pages.live_board.url + "activity/?actor=worker-9")
    expect(page.locator("#activity-live")).to_have_attribute("data-state", "live")
    expect(page.locator("#activity-empty")).to_be_visible()
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "/activity/" in r.url else None)

    pages.live_board.agent("worker-8").create("Not theirs")
    task = pages.live_board.agent("worker-9").create("Theirs")

    rows = page.locator("#activity-rows tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{task} “Theirs” created by worker-9")
    expect(rows.first.locator("time")).to_have_text("just now")
    expect(page.locator("#activity-empty")).to_have_count(0)
    # The rows came over the socket, as htmx swapped them: no request asked for them.
    assert fetched == []
    # After a break, the socket resumes after the newest row it pushed.
    resume = page.locator("#activity-resume")
    expect(resume).to_have_attribute("data-url", re.compile(r"[?&]after=\d+$"))
    assert "actor=worker-9" in (resume.get_attribute("data-url") or "")

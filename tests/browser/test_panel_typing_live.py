"""Nothing a person types in an open card's panel is lost to live updates (issue #45,
item 1), in Chromium on a desktop (1440×900) and a phone (390×844, the panel a sheet):
while the card's agent updates it every second, the message box and the Reassign field
keep their text, the focus and the caret; what is sent is what the person typed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from .conftest import Agent, LiveBoard
from .screens import DESKTOP, PHONE, Screens, card, screens_on

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
UPDATES = 8


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


class Busy(threading.Thread):
    """The card's agent at work: a TaskUpdate of its description and progress each second."""

    def __init__(self, agent: Agent, task_id: str) -> None:
        super().__init__(daemon=True)
        self.agent, self.task_id = agent, task_id
        self.failures: list[object] = []

    def run(self) -> None:
        for step in range(1, UPDATES + 1):
            reply = self.agent.call(
                "TaskUpdate",
                {
                    "taskId": self.task_id,
                    "description": f"Step {step} of {UPDATES}: parsing the grammar",
                    "activeForm": f"Parsing, step {step}",
                },
            )
            if reply.status != 200:
                self.failures.append(reply)
            threading.Event().wait(1.0)


def wait_for_step(panel: Locator, step: int) -> None:
    """Until the panel shows the agent's update number ``step`` (a push refreshed it)."""
    expect(panel).to_contain_text(f"Step {step} of {UPDATES}", timeout=UPDATES * 2_000)


def caret(field: Locator) -> tuple[int, int]:
    start, end = field.evaluate("(el) => [el.selectionStart, el.selectionEnd]")
    return start, end


def expect_kept(page: Page, field: Locator, text: str, at: tuple[int, int]) -> None:
    expect(field).to_have_value(text)
    expect(field).to_be_focused()
    assert caret(field) == at


@pytest.mark.parametrize("screen", SCREENS)
def test_typing_in_an_open_panel_survives_the_agents_updates_and_is_sent_as_typed(
    pages: Screens, live_board: LiveBoard, screen: ViewportSize
):
    alice = live_board.agent("alice")
    number = alice.create("Write the parser", description="Step 0")
    alice.claim(number)
    live_board.agent("worker-9").ok("TaskList")  # an agent the person can hand it to
    page = pages.open(screen=screen)
    if screen is PHONE:
        page.locator("#tab-in_progress").click()
    card(page, number).locator(".card-link").click()
    panel = page.locator(f'#detail [data-detail-task="{number}"]')
    expect(panel.locator("h2")).to_be_focused()
    message = panel.locator("textarea[name=body]")
    owner = panel.locator("input[name=owner]")
    expect(owner).to_have_value("alice")

    busy = Busy(alice, number)
    busy.start()
    # The message, typed a key at a time across pushes; then the caret moved back into it.
    body = "Please rebase on main first, then rerun the parser tests."
    message.click()
    page.keyboard.type(body, delay=40)
    wait_for_step(panel, 3)
    expect_kept(page, message, body, (len(body), len(body)))
    for _ in range(len(" tests.")):
        page.keyboard.press("ArrowLeft")
    at = len(body) - len(" tests.")
    wait_for_step(panel, 4)
    expect_kept(page, message, body, (at, at))

    # The new owner, typed over the old one in the Reassign field.
    owner.click()
    owner.press("ControlOrMeta+a")
    page.keyboard.type("worker-9", delay=60)
    wait_for_step(panel, 6)
    expect_kept(page, owner, "worker-9", (8, 8))
    busy.join(timeout=UPDATES * 2)
    assert not busy.failures, busy.failures
    wait_for_step(panel, UPDATES)
    expect_kept(page, owner, "worker-9", (8, 8))
    expect(message).to_have_value(body)

    # Sent as typed: the message reaches alice word for word, and the box is empty again;
    # the Reassign field still holds what was typed in it, and hands the card over.
    panel.get_by_role("button", name="Send message").click()
    expect(panel.locator(".history")).to_contain_text(f"message to alice: “{body}”")
    expect(message).to_have_value("")
    expect(owner).to_have_value("worker-9")
    inbox = alice.ok("InboxRead", {"ack": True})["messages"]
    assert [(m["body"], m["taskId"]) for m in inbox] == [(body, number)]

    panel.get_by_role("button", name="Reassign").click()
    expect(panel.locator(".facts")).to_contain_text("Ownerworker-9 · assigned, not started")
    assert (task := alice.get(number))["owner"] == "worker-9", task
    assert task["status"] == "pending", task

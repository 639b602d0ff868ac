"""People supervising agents in a real Chromium: approval requests reach the "Needs your
approval" strip live, a person's Approve / Deny reaches the agent's TaskWatch at once, and a
message typed on the board reaches the agent's inbox (SPEC §3.5, §3.7, §5). Waits are
conditions with a bounded timeout, never sleeps.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Locator, Page, expect

from .conftest import TIMEOUT_MS, USERNAME, Agent, LiveBoard, Reply, assert_not_reloaded
from .test_board_live import card, expect_card_in

pytestmark = pytest.mark.browser

OpenPage = Callable[[], Page]

# The reason an approval request made by a claim on a gated task carries (services._claim).
CLAIM_REASON = "claimed; waiting for approval before starting"


def approval_item(page: Page, task_id: str) -> Locator:
    return page.locator(f'#needs [data-approval-task="{task_id}"]')


def expect_no_approvals(page: Page) -> None:
    expect(page.locator("#needs [data-approval-task]")).to_have_count(0)
    expect(page.locator("#needs")).to_have_class(re.compile(r"\bneeds--empty\b"))


def create_gated(agent: Agent, subject: str) -> str:
    return agent.ok("TaskCreate", {"subject": subject, "requiresApproval": True})["task"]["id"]


def claim_gated(agent: Agent, task_id: str) -> dict[str, Any]:
    """The agent claims a task that needs approval: 202, the task not started."""
    reply = agent.call("TaskClaim", {"taskId": task_id})
    assert reply.status == 202, reply
    assert reply.body["awaitingApproval"] is True, reply
    task = reply.body["task"]
    assert task["status"] == "pending", task
    assert task["owner"] == "", task
    assert task["approval"]["state"] == "requested", task
    assert task["approval"]["requestedBy"] == agent.name, task
    return task


class Watch:
    """An agent's ``TaskWatch`` in a background thread, while the test drives the browser.

    The request is sent over its own connection; ``sent`` is set once its bytes are on the
    wire, so a test can act only after the server has the watch.
    """

    def __init__(self, agent: Agent, task_id: str, timeout_seconds: int = 30) -> None:
        self.reply: Reply | None = None
        self.error: BaseException | None = None
        self.sent = threading.Event()
        body = {"taskId": task_id, "timeoutSeconds": timeout_seconds}
        self._thread = threading.Thread(
            target=self._run, args=(agent, body), name=f"TaskWatch #{task_id}", daemon=True
        )
        self._thread.start()
        assert self.sent.wait(TIMEOUT_MS / 1000), f"TaskWatch not sent: {self.error!r}"

    def _run(self, agent: Agent, body: dict[str, Any]) -> None:
        url = urlsplit(agent.base_url)
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
        try:
            connection.request(
                "POST",
                f"/api/boards/{agent.slug}/tools/TaskWatch",
                body=json.dumps(body),
                headers={
                    "Authorization": f"Bearer {agent.token}",
                    "X-Agent": agent.name,
                    "Content-Type": "application/json",
                },
            )
            self.sent.set()
            response = connection.getresponse()
            data = response.read()
            self.reply = Reply(response.status, json.loads(data))
        except BaseException as exc:  # shown by result() in the test's thread
            self.error = exc
        finally:
            connection.close()

    @property
    def waiting(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> dict[str, Any]:
        """The watch's answer, waiting for it at most the tests' timeout."""
        self._thread.join(TIMEOUT_MS / 1000)
        assert not self._thread.is_alive(), f"TaskWatch did not return within {TIMEOUT_MS} ms"
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        assert self.reply.status == 200, self.reply
        return self.reply.body


def test_an_agents_approval_request_appears_live_in_the_strip(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice, bob = live_board.agent("alice"), live_board.agent("bob")
    expect_no_approvals(page)

    # A gated task: its claim asks a person instead of starting it.
    assert create_gated(alice, "Deploy to production") == "1"
    expect_card_in(page, "1", "pending")
    expect(card(page, "1").locator(".tag", has_text="needs approval")).to_have_count(1)
    expect_no_approvals(page)

    claim_gated(alice, "1")
    item = approval_item(page, "1")
    expect(item).to_have_count(1)
    expect(page.locator("#needs h2")).to_contain_text("Needs you")
    expect(item.locator("a")).to_have_text("#1 Deploy to production")
    expect(item.locator("strong")).to_have_text("alice")
    expect(item).to_contain_text(f"“{CLAIM_REASON}”")
    expect(item.get_by_role("button", name="Approve")).to_be_visible()
    expect(item.get_by_role("button", name="Deny")).to_be_visible()
    expect_card_in(page, "1", "pending")  # not started before a person says so
    expect(card(page, "1").locator(".tag--approval")).to_have_text("awaiting approval")
    expect(card(page, "1")).not_to_contain_text("needs approval")

    # Any agent may also ask about any task, with its own reason.
    assert bob.create("Drop the legacy table") == "2"
    bob.ok("TaskRequestApproval", {"taskId": "2", "reason": "About to drop 3 GB of rows"})
    expect(page.locator("#needs [data-approval-task]")).to_have_count(2)
    expect(approval_item(page, "2").locator("strong")).to_have_text("bob")
    expect(approval_item(page, "2")).to_contain_text("“About to drop 3 GB of rows”")
    expect(card(page, "2").locator(".tag--approval")).to_have_text("awaiting approval")
    expect(approval_item(page, "1")).to_contain_text(CLAIM_REASON)
    assert_not_reloaded(page)


def test_approve_in_the_strip_releases_the_agents_watch_at_once(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice = live_board.agent("alice")
    create_gated(alice, "Deploy to production")
    claim_gated(alice, "1")
    item = approval_item(page, "1")
    expect(item).to_have_count(1)

    # The agent waits on the task (not polling) while the person decides.
    watch = Watch(alice, "1", timeout_seconds=30)
    approve = item.get_by_role("button", name="Approve")
    expect(approve).to_be_enabled()
    assert watch.waiting, f"TaskWatch returned before any decision: {watch.reply}"
    approve.click()
    answer = watch.result()  # within TIMEOUT_MS of the click, of the watch's 30 s

    assert answer["timedOut"] is False, answer
    task = answer["task"]
    assert task["status"] == "in_progress", task
    assert task["owner"] == "alice", task
    assert task["approval"]["state"] == "approved", task
    assert task["approval"]["decidedBy"] == USERNAME, task

    expect_card_in(page, "1", "in_progress")
    expect(card(page, "1")).to_contain_text("@alice")
    expect(card(page, "1").locator(".tag--approval")).to_have_count(0)
    expect(item).to_have_count(0)
    expect_no_approvals(page)
    # The decision's answer is the task's panel.
    expect(page.locator('#detail [data-detail-task="1"]')).to_contain_text(f"decided by {USERNAME}")
    assert alice.get("1")["status"] == "in_progress"
    assert_not_reloaded(page)


def test_deny_with_a_note_cancels_the_task_and_tells_the_agent(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice, bob = live_board.agent("alice"), live_board.agent("bob")
    create_gated(alice, "Deploy to production")  # 1
    create_gated(bob, "Rotate the API keys")  # 2
    claim_gated(alice, "1")
    claim_gated(bob, "2")
    expect(page.locator("#needs [data-approval-task]")).to_have_count(2)

    watch = Watch(bob, "2", timeout_seconds=30)
    note = "Not during the launch; wait until Monday"
    item = approval_item(page, "2")
    item.locator("input[name=note]").fill(note)
    assert watch.waiting, f"TaskWatch returned before any decision: {watch.reply}"
    item.get_by_role("button", name="Deny", exact=True).click()
    answer = watch.result()

    assert answer["timedOut"] is False, answer
    task = answer["task"]
    assert task["status"] == "cancelled", task
    assert task["approval"]["state"] == "denied", task
    assert task["approval"]["note"] == note, task
    assert task["approval"]["decidedBy"] == USERNAME, task

    expect_card_in(page, "2", "completed")
    expect(card(page, "2")).to_have_attribute("data-status", "cancelled")
    expect(card(page, "2").locator(".tag--cancelled")).to_have_text("cancelled")
    expect(card(page, "2").locator(".tag--approval")).to_have_count(0)
    expect(item).to_have_count(0)
    # The other request is untouched.
    expect(approval_item(page, "1")).to_have_count(1)
    expect_card_in(page, "1", "pending")
    expect(card(page, "1").locator(".tag--approval")).to_have_text("awaiting approval")
    assert alice.get("1")["approval"]["state"] == "requested"
    assert_not_reloaded(page)


def test_a_message_from_the_board_reaches_the_agents_inbox(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice = live_board.agent("alice")
    alice.create("Write the parser")
    expect(page.locator('#roster [data-agent="alice"]')).to_have_count(1)
    assert alice.ok("TaskList")["unreadMessages"] == 0

    body = "Please rebase on main before you push."
    box = page.locator('section[aria-label="Message an agent"]')
    box.locator("input[name=recipient]").fill("alice")
    box.locator("textarea[name=body]").fill(body)
    box.get_by_role("button", name="Send").click()
    expect(page.locator("#message-status")).to_have_text("Message queued.")

    # Every tool's answer tells the agent there is something to read.
    assert alice.ok("TaskList")["unreadMessages"] == 1
    assert alice.ok("TaskGet", {"taskId": "1"})["unreadMessages"] == 1
    inbox = alice.ok("InboxRead", {"ack": True})
    assert inbox["acknowledged"] is True
    assert [(m["from"], m["body"], m["taskId"]) for m in inbox["messages"]] == [
        (USERNAME, body, None)
    ]
    assert inbox["unreadMessages"] == 0
    assert alice.ok("TaskList")["unreadMessages"] == 0
    assert alice.ok("InboxRead", {"ack": True})["messages"] == []
    assert_not_reloaded(page)


def test_a_message_from_the_task_panel_reaches_its_owner(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice = live_board.agent("alice")
    alice.create("Write the parser")
    alice.claim("1")
    expect_card_in(page, "1", "in_progress")

    card(page, "1").locator(".card-link").click()
    panel = page.locator('#detail [data-detail-task="1"]')
    expect(panel.locator("input[name=recipient]")).to_have_value("alice")
    body = "Use the grammar in docs/grammar.md, not the old one."
    panel.locator("textarea[name=body]").fill(body)
    panel.get_by_role("button", name="Send message").click()
    expect(page.locator('#detail [data-detail-task="1"] .history')).to_contain_text(
        f"message to alice: “{body}”"
    )

    assert alice.ok("TaskGet", {"taskId": "1"})["unreadMessages"] == 1
    inbox = alice.ok("InboxRead", {"ack": True})
    assert [(m["from"], m["body"], m["taskId"]) for m in inbox["messages"]] == [
        (USERNAME, body, "1")
    ]
    assert alice.ok("TaskGet", {"taskId": "1"})["unreadMessages"] == 0
    assert_not_reloaded(page)


def test_a_decision_in_one_page_clears_the_strip_in_the_other(
    open_page: OpenPage, live_board: LiveBoard
):
    page_a, page_b = open_page(), open_page()
    alice, bob = live_board.agent("alice"), live_board.agent("bob")
    create_gated(alice, "Deploy to production")  # 1
    create_gated(bob, "Rotate the API keys")  # 2
    claim_gated(alice, "1")
    claim_gated(bob, "2")
    for page in (page_a, page_b):
        expect(page.locator("#needs [data-approval-task]")).to_have_count(2)

    approval_item(page_a, "1").get_by_role("button", name="Approve").click()
    for page in (page_a, page_b):
        expect(approval_item(page, "1")).to_have_count(0)
        expect(approval_item(page, "2")).to_have_count(1)
        expect_card_in(page, "1", "in_progress")

    # And the other way round, with the strip B received live.
    approval_item(page_b, "2").get_by_role("button", name="Deny").click()
    for page in (page_a, page_b):
        expect_no_approvals(page)
        expect_card_in(page, "2", "completed")
        expect(card(page, "2")).to_have_attribute("data-status", "cancelled")
        assert_not_reloaded(page)
    assert alice.get("1")["owner"] == "alice"
    assert bob.get("2")["approval"]["note"] is None


def test_a_note_being_typed_in_the_strip_survives_a_new_request(
    open_page: OpenPage, live_board: LiveBoard
):
    page = open_page()
    alice, bob = live_board.agent("alice"), live_board.agent("bob")
    create_gated(alice, "First gate")
    create_gated(bob, "Second gate")
    claim_gated(alice, "1")
    note = approval_item(page, "1").locator("input[name=note]")
    note.fill("not during the freeze")
    note.focus()
    claim_gated(bob, "2")  # the strip is pushed again with a new item
    expect(approval_item(page, "2")).to_have_count(1)
    expect(note).to_have_value("not during the freeze")
    expect(note).to_be_focused()

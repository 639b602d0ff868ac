"""The "Needs you" inbox in a real Chromium (SPEC §12): a request made on another board
arrives live over the inbox's one socket, approving it there wakes the agent's
TaskWatch, and the same works on a phone."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from devtools.liveserver import Cluster, Server

from .conftest import Reply
from .screens import (
    DESKTOP,
    PHONE,
    Screens,
    assert_uncovered,
    new_live_board,
    screens_on_a_new_board,
)

pytestmark = pytest.mark.browser

# An item must show this soon after the agent's call (the push is one render away).
ARRIVES_MS = 2_000


@pytest.fixture
def screens(browser: Browser, cluster: Cluster, server: Server) -> Iterator[Screens]:
    with screens_on_a_new_board(browser, cluster, server, "Home board") as opened:
        yield opened


def open_inbox(screens: Screens, screen: dict[str, int]) -> Page:
    page = screens.open(screen=screen, path="/inbox/")
    expect(page.locator("main#main")).to_have_attribute("data-socket", "live")
    return page


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_request_on_another_board_arrives_live_and_approving_it_wakes_the_agent(
    screens: Screens, cluster: Cluster, server: Server, screen: dict[str, int]
):
    page = open_inbox(screens, screen)
    elsewhere = new_live_board(cluster, server, "Deploys")
    agent = elsewhere.agent("deployer")
    task = agent.create("Rotate the production keys", requiresApproval=True)
    reply = agent.call("TaskClaim", {"taskId": task})
    assert reply.status == 202, reply

    item = page.locator(f'#board-{elsewhere.slug} [data-need="{elsewhere.slug}:task-{task}"]')
    expect(item).to_be_visible(timeout=ARRIVES_MS)
    expect(item).to_contain_text("Rotate the production keys")
    expect(item).to_contain_text("deployer")
    expect(page.locator("#inbox-count")).not_to_have_text("0")
    approve = item.get_by_role("button", name="Approve")
    assert_uncovered(
        page, f'#board-{elsewhere.slug} [data-need="{elsewhere.slug}:task-{task}"] button'
    )

    woke: list[Reply] = []
    watcher = threading.Thread(
        target=lambda: woke.append(agent.call("TaskWatch", {"taskId": task, "timeoutSeconds": 30}))
    )
    watcher.start()
    item.locator("input[name=note]").fill("rotate the staging keys first")
    approve.click()
    watcher.join(timeout=20)
    assert woke, "the agent's TaskWatch did not return"
    answer = woke[0]
    assert answer.status == 200, answer
    assert answer.body.get("timedOut") is not True
    assert answer.body["task"]["approval"]["state"] == "approved"
    assert answer.body["task"]["approval"]["note"] == "rotate the staging keys first"
    # The item leaves the inbox by the same socket, with no reload.
    expect(item).to_have_count(0)
    messages = agent.ok("InboxRead", {"ack": True})["messages"]
    assert any("rotate the staging keys first" in m["body"] for m in messages)

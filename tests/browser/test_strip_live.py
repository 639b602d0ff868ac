"""The "Needs you" strip with many items, in a real Chromium at a desk and on a phone
(SPEC §12): it stays in the page's flow and leaves the columns most of the screen, the
held call the board answers first comes first with its countdown, the rest wait in the
inbox behind "N more", it folds away, and the keyboard goes through it (j/k, Enter, d)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from devtools.liveserver import Cluster, Server

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Screens, boxes, screens_on_a_new_board

pytestmark = pytest.mark.browser


@pytest.fixture
def screens(browser: Browser, cluster: Cluster, server: Server) -> Iterator[Screens]:
    with screens_on_a_new_board(browser, cluster, server, "Triage board") as opened:
        yield opened


def hold_calls(cluster: Cluster, board: LiveBoard, calls: list[tuple[str, dict, int]]) -> None:
    """Tool calls held by the board's default rules, as the hook door records them:
    (tool, input, longest hold in seconds) each, in one session of agent "builder"."""
    cluster.manage(
        "shell",
        "-c",
        "from boards.clients import sessions\nfrom boards.models import Board\n"
        f"board = Board.objects.get(slug={board.slug!r})\n"
        f"for i, (tool, tool_input, hold) in enumerate({calls!r}):\n"
        "    verdict = sessions.session_event(board=board, agent='builder', longest_hold=hold,"
        " event={'hook_event_name': 'PreToolUse', 'session_id': 'sess-1', 'cwd': '/work/app',"
        " 'tool_name': tool, 'tool_input': tool_input, 'tool_use_id': f'use-{i}'})\n"
        "    assert verdict.held, verdict\n",
    )


def eight_items(screens: Screens, cluster: Cluster) -> None:
    """Five approvals asked first, then three held calls: the one held for the shortest
    wait (the Write of the deploy config) is the one the board answers first."""
    agent = screens.live_board.agent("planner")
    for n in range(5):
        task = agent.create(f"Migrate table {n}", requiresApproval=True)
        assert agent.call("TaskClaim", {"taskId": task}).status == 202
    hold_calls(
        cluster,
        screens.live_board,
        [
            ("Bash", {"command": "rm -rf build"}, 600),
            ("Write", {"file_path": "/etc/deploy.yaml", "content": "replicas: 40\n"}, 120),
            ("Bash", {"command": "git push origin main"}, 200),
        ],
    )


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_eight_items_leave_the_columns_the_screen_and_the_most_urgent_call_comes_first(
    screens: Screens, cluster: Cluster, screen: dict[str, int]
):
    eight_items(screens, cluster)
    page = screens.open(screen=screen)
    strip = page.locator("#needs")
    expect(strip.locator(".count").first).to_have_text("8")
    items = strip.locator(".need")
    expect(items).to_have_count(3)
    first = items.first
    expect(first).to_have_attribute("data-call", re.compile(r"\d+"))
    expect(first.locator(".need-subject")).to_contain_text("/etc/deploy.yaml")
    expect(first.locator("time[data-countdown]")).to_have_text(re.compile(r"^[12]:\d\d$"))
    # The other held calls next, by deadline; approvals after them.
    expect(items.nth(1).locator(".need-subject")).to_contain_text("git push")
    expect(items.nth(2).locator(".need-subject")).to_contain_text("rm -rf build")
    more = strip.locator(".needs-more")
    expect(more).to_have_text("5 more in the inbox")
    assert more.get_attribute("href") == "/inbox/"

    # In the flow: under the toolbar, over the columns, never on them.
    header = boxes(page, ".board-header")[0]
    shown = boxes(page, "#needs")[0]
    assert shown["y"] >= header["y"] + header["height"] - 0.5, (header, shown)
    if screen == PHONE:
        # The first screen holds the most urgent item and the column tabs.
        tabs = boxes(page, ".column-tabs")[0]
        assert shown["y"] + shown["height"] <= tabs["y"], (shown, tabs)
        assert tabs["y"] + tabs["height"] <= screen["height"], tabs
        assert boxes(page, "#needs .need")[0]["y"] < screen["height"]
        columns = boxes(page, ".columns")[0]
        assert screen["height"] - columns["y"] >= screen["height"] / 2, columns
    else:
        columns = boxes(page, ".columns")[0]
        assert shown["y"] + shown["height"] <= columns["y"], (shown, columns)
        assert columns["height"] >= screen["height"] / 2, columns
        assert page.evaluate("document.documentElement.scrollHeight") <= screen["height"]

    # Opened, a held Write shows what it would write and the session's last calls.
    first.locator("[data-need-expand]").click()
    expect(first.locator(".need-facts")).to_contain_text("replicas: 40")
    expect(first.locator(".need-recent")).to_be_visible()
    # Folded, the strip is one line, and stays folded after the next push.
    page.locator("[data-needs-toggle]").click()
    expect(items.first).to_be_hidden()
    screens.live_board.agent("planner").create("Another task")
    expect(page.locator("#cards-pending .card")).to_have_count(6)
    expect(page.locator("[data-needs-toggle]")).to_have_attribute("aria-expanded", "false")
    expect(items.first).to_be_hidden()


def test_the_keyboard_goes_through_the_strip_and_denies_the_focused_call(
    screens: Screens, cluster: Cluster
):
    eight_items(screens, cluster)
    page: Page = screens.open(screen=DESKTOP)
    items = page.locator("#needs .need")
    page.locator("body").press("j")
    expect(items.first).to_be_focused()
    page.keyboard.press("j")
    expect(items.nth(1)).to_be_focused()
    page.keyboard.press("k")
    expect(items.first).to_be_focused()
    page.keyboard.press("Enter")
    expect(items.first).to_have_class(re.compile(r"\bneed--open\b"))
    expect(items.first.locator(".need-body")).to_be_visible()
    page.keyboard.press("Enter")
    expect(items.first.locator(".need-body")).to_be_hidden()
    page.keyboard.press("d")
    # Denied: the Write is gone and the next held call is first.
    expect(page.locator("#needs .count").first).to_have_text("7")
    expect(items.first.locator(".need-subject")).to_contain_text("git push")

"""A dead agent's work comes back by itself, on the board, with nobody reloading (issue 13)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveBoard, assert_not_reloaded

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_lapsed_lease_moves_the_card_back_to_pending_within_five_seconds(
    open_page, live_board: LiveBoard
):
    page: Page = open_page()
    # A person makes leases as short as a board allows (limits.LEASE_MIN), on its settings page.
    settings_page = page.context.new_page()
    settings_page.goto(f"{live_board.url}settings/")
    settings_page.fill("input[name=leaseSeconds]", "5")
    settings_page.click("button[type=submit]")
    expect(settings_page.locator("input[name=leaseSeconds]")).to_have_value("5")
    settings_page.close()

    silent = live_board.agent("silent")
    task_id = silent.create("Work that will be abandoned")
    claimed = silent.claim(task_id)
    assert claimed["lease"]["expiresAt"]
    in_progress = page.locator(f'[data-column="in_progress"] [data-task-id="{task_id}"]')
    expect(in_progress).to_have_count(1)
    expect(in_progress.locator("time[data-lease]")).to_have_count(1)

    # The agent goes silent; nobody calls, nobody reloads. Back within the lease + 5 s.
    pending = page.locator(f'[data-column="pending"] [data-task-id="{task_id}"]')
    expect(pending).to_have_count(1, timeout=(5 + 5) * 1000)
    assert_not_reloaded(page)

    answer = silent.call("TaskUpdate", {"taskId": task_id, "status": "completed"})
    assert answer.status == 409
    assert answer.body["error"]["code"] == "lease_lost"

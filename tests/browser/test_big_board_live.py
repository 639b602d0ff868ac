"""A board with a long history in a real Chromium (issue 12): the page shows each
column's first cards with exact counts, "Show more" appends the next page in place,
a card an agent completes lands on top of Completed, and 500-card batches arrive
without breaking the socket."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from boards.core.selectors import COLUMN_PAGE

from .conftest import LiveBoard, assert_not_reloaded, wait_live

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TASKS = 2000
OPEN = 50  # the last tasks stay pending; the rest is history


def completed_ids(page: Page) -> list[str]:
    return page.locator("#cards-completed [data-task-id]").evaluate_all(
        "cards => cards.map(c => c.dataset.taskId)"
    )


def test_a_2000_task_board_pages_its_columns_and_stays_live(open_page, live_board: LiveBoard):
    agent = live_board.agent("planner")
    for start in range(0, TASKS, 500):
        ops = [{"op": "create", "subject": f"Task {start + i + 1}"} for i in range(500)]
        assert agent.call("TaskBatch", {"ops": ops}).status == 200
    for start in range(0, TASKS - OPEN, 500):
        last = min(start + 500, TASKS - OPEN)
        ops = [
            {"op": "update", "taskId": str(n), "status": "completed"}
            for n in range(start + 1, last + 1)
        ]
        assert agent.call("TaskBatch", {"ops": ops}).status == 200

    page = open_page()
    expect(page.locator("#count-completed")).to_have_text(str(TASKS - OPEN))
    expect(page.locator("#count-pending")).to_have_text(str(OPEN))
    first = COLUMN_PAGE["completed"]
    expect(page.locator("#cards-completed [data-task-id]")).to_have_count(first)
    # The most recently finished first: the last batch's highest number is on top.
    assert completed_ids(page)[0] == str(TASKS - OPEN)

    page.locator("#more-completed button").click()
    expect(page.locator("#cards-completed [data-task-id]")).to_have_count(2 * first)
    ids = completed_ids(page)
    assert len(set(ids)) == 2 * first

    # An agent completes a pending task: it lands on top of Completed, counts exact.
    agent.call("TaskClaim", {"taskId": str(TASKS)})
    agent.call("TaskUpdate", {"taskId": str(TASKS), "status": "completed", "result": "done"})
    expect(page.locator("#cards-completed [data-task-id]").first).to_have_attribute(
        "data-task-id", str(TASKS)
    )
    expect(page.locator("#count-completed")).to_have_text(str(TASKS - OPEN + 1))
    expect(page.locator("#count-pending")).to_have_text(str(OPEN - 1))

    # Two 500-card batches: the socket stays up, the counts stay exact.
    for round_ in range(2):
        ops = [{"op": "create", "subject": f"Burst {round_}.{i}"} for i in range(500)]
        assert agent.call("TaskBatch", {"ops": ops}).status == 200
    expect(page.locator("#count-pending")).to_have_text(str(OPEN - 1 + 1000))
    wait_live(page)
    assert_not_reloaded(page)
    assert page.locator("#cards-pending [data-task-id]").count() <= COLUMN_PAGE["pending"] + 1000

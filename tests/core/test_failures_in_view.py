"""Failures stay in view with a day of work (issue 38): a failed or cancelled card is
pinned first in its column, with retry, and Show more never repeats a card."""

from __future__ import annotations

import re

from boards.core import selectors
from boards.models import Task
from tests.support.htmltext import flat


def finish(agent, task_id: str, status: str = "completed") -> None:
    assert agent.call("TaskClaim", {"taskId": task_id}).status == 200
    assert agent.call("TaskUpdate", {"taskId": task_id, "status": status}).status == 200


def completed_cards(html: str) -> list[int]:
    column = flat(html).split('id="cards-completed"', 1)[1].split('id="more-completed"', 1)[0]
    return [int(n) for n in re.findall(r'<article id="task-(\d+)"', column)]


def test_a_failure_followed_by_25_completions_is_first_in_its_column_with_retry(
    alice, board, person_client
):
    alice.create("Flaky deploy")  # 1, nothing waits on it: no grace, no reason needed
    finish(alice, "1", "failed")
    for n in range(2, 27):
        alice.create(f"Chore {n}")
        finish(alice, str(n))

    html = person_client.get("/boards/team/").content.decode()
    cards = completed_cards(html)
    assert cards[0] == 1
    assert len(cards) == selectors.COLUMN_PAGE["completed"]
    assert "/boards/team/tasks/1/retry" in html
    assert Task.objects.get(board=board, number=1).needs == ""


def test_cancelled_work_is_pinned_too_and_show_more_never_repeats_a_card(alice, board):
    numbers = []
    for n in range(1, 46):
        alice.create(f"Task {n}")
        if n % 15 == 0:
            assert alice.call("TaskUpdate", {"taskId": str(n), "status": "cancelled"}).status == 200
        else:
            finish(alice, str(n), "failed" if n == 7 else "completed")
        numbers.append(n)

    seen: list[int] = []
    views, cursor = selectors.column_page(board, "completed")
    seen += [v.number for v in views]
    assert seen[:4] == [45, 30, 15, 7]  # dead ends first, the latest finished first
    while cursor:
        views, cursor = selectors.column_page(board, "completed", cursor)
        seen += [v.number for v in views]
    assert sorted(seen) == numbers
    assert len(seen) == len(set(seen))
    keys = [v.sort_key for v in selectors.column_page(board, "completed")[0]]
    # The page's order is the pushed cards' order (Completed sorts newest first: descending).
    assert keys == sorted(keys, reverse=True)

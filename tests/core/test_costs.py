"""What agents spend (issue 16): usage on writes, summed per task, attempt, agent and board;
the board's budget stops claims once spent."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from boards.core import services
from boards.models import Board, Task, Usage
from tests.core.test_concurrency import post, run_in_threads
from tests.support.factories import make_board, make_token
from tests.support.htmltext import flat


def usage(cost: float, tokens_in: int = 100, tokens_out: int = 10, model: str = "m-1") -> dict:
    return {"inputTokens": tokens_in, "outputTokens": tokens_out, "costUsd": cost, "model": model}


def test_usage_adds_up_per_task_attempt_and_board(alice, board):
    alice.create("Research")
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "notes": "half way", "usage": usage(0.25)})
    alone = alice.call("TaskUpdate", {"taskId": "1", "usage": usage(0.5, 200, 20)})
    assert alone.status == 200
    assert alone.body["changes"] == [{"type": "updated", "taskId": "1", "fields": ["usage"]}]
    alice.call("TaskHeartbeat", {"taskId": "1", "usage": usage(0.125, 1, 1)})
    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert task["usage"] == {"inputTokens": 301, "outputTokens": 31, "costUsd": 0.875}
    assert task["attempts"][0]["usage"] == task["usage"]
    board.refresh_from_db()
    assert board.spent_usd == Decimal("0.875")
    rows = list(Usage.objects.filter(board=board).values_list("agent", "attempt", "cost_usd"))
    assert rows == [
        ("alice", 1, Decimal("0.25")),
        ("alice", 1, Decimal("0.5")),
        ("alice", 1, Decimal("0.125")),
    ]


def test_a_batch_update_reports_usage_too(alice, board):
    alice.create("A")
    alice.create("B")
    answer = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "update", "taskId": "1", "usage": usage(1)},
                {"op": "update", "taskId": "2", "notes": "n", "usage": usage(2)},
            ]
        },
    )
    assert answer.status == 200, answer.body
    assert sorted(Task.objects.values_list("number", "cost_usd")) == [
        (1, Decimal(1)),
        (2, Decimal(2)),
    ]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"costUsd": -1}, "usage.costUsd"),
        ({"inputTokens": 1.5}, "usage.inputTokens"),
        ({"outputTokens": -3}, "usage.outputTokens"),
        ({"costUsd": "a lot"}, "usage.costUsd"),
        ({"model": "x" * 101}, "usage.model"),
        ({"tokens": 5}, "usage.tokens"),
    ],
)
def test_bad_usage_is_a_400_naming_the_field_and_changes_nothing(alice, board, bad, field):
    alice.create("A")
    answer = alice.call("TaskUpdate", {"taskId": "1", "notes": "x", "usage": bad})
    assert answer.status == 400
    assert answer.error["details"][0]["field"] == field
    assert Task.objects.get().notes == "" and not Usage.objects.exists()


def test_heartbeat_usage_needs_its_task(alice):
    answer = alice.call("TaskHeartbeat", {"usage": usage(1)})
    assert (answer.status, answer.error["details"][0]["field"]) == (400, "usage")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_usage_adds_up_exactly_under_eight_concurrent_writers():
    board = make_board("race")
    services.task_create(board=board, actor="planner", subject="Shared")
    tokens = [make_token(board, f"agent-{i}") for i in range(8)]

    def report(i: int) -> list[int]:
        client = Client()
        return [
            post(
                client, tokens[i], "TaskUpdate", {"taskId": "1", "usage": usage(0.001, 7, 3)}
            ).status_code
            for _ in range(10)
        ]

    statuses = run_in_threads(8, report)
    assert {s for batch in statuses for s in batch} == {200}
    task = Task.objects.get(board=board)
    assert (task.input_tokens, task.output_tokens, task.cost_usd) == (560, 240, Decimal("0.08"))
    assert Board.objects.get(pk=board.pk).spent_usd == Decimal("0.08")
    assert Usage.objects.filter(board=board).count() == 80


def test_the_budget_refuses_the_claim_after_the_spend_that_crossed_it(alice, bob, board):
    services.board_settings(board=board, actor="pat", budgetUsd=1)
    for subject in ("A", "B", "C"):
        alice.create(subject)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    alice.call("TaskUpdate", {"taskId": "1", "usage": usage(0.75)})
    assert bob.call("TaskClaim", {"taskId": "2"}).status == 200  # 0.75 of 1: still open
    bob.call("TaskUpdate", {"taskId": "2", "status": "completed", "usage": usage(0.5)})
    refused = alice.call("TaskClaim", {"taskId": "3"})
    assert (refused.status, refused.error["code"]) == (409, "budget_exhausted")
    assert refused.error["details"] == {"spentUsd": 1.25, "budgetUsd": 1.0}
    assert alice.call("TaskClaim", {}).error["code"] == "budget_exhausted"  # claim-next
    moved = alice.call("TaskUpdate", {"taskId": "3", "status": "in_progress"})
    assert moved.error["code"] == "budget_exhausted"
    # Work already claimed goes on, and reports what it spends.
    assert alice.call("TaskUpdate", {"taskId": "1", "usage": usage(0.1)}).status == 200
    services.board_settings(board=board, actor="pat", budgetUsd=5)
    assert alice.call("TaskClaim", {"taskId": "3"}).status == 200


def test_people_set_the_budget_and_see_the_spend_on_the_board_and_cards(
    alice, board, person_client
):
    alice.create("Research")
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "usage": usage(0.5, 1200, 300)})
    page = person_client.get("/boards/team/").content.decode()
    assert "$0.50 spent" in page
    assert 'title="1200 input and 300 output tokens reported">$0.50</span>' in page
    saved = person_client.post("/boards/team/settings/", {"maxAttempts": "3", "budgetUsd": "$0.40"})
    assert saved.status_code == 302
    board.refresh_from_db()
    assert board.budget_usd == Decimal("0.40")
    assert "$0.50 of $0.40 · budget spent: claims stopped" in flat(
        person_client.get("/boards/team/").content
    )
    refused = person_client.post(
        "/boards/team/settings/", {"maxAttempts": "3", "budgetUsd": "lots"}
    )
    assert refused.status_code == 400 and "budgetUsd" in refused.content.decode()
    person_client.post("/boards/team/settings/", {"maxAttempts": "3", "budgetUsd": ""})
    board.refresh_from_db()
    assert board.budget_usd is None


def test_an_admin_issues_an_admin_scoped_token_on_the_tokens_page(board, person_client):
    person_client.post("/boards/team/tokens/", {"admin": "1"})
    page = person_client.get("/boards/team/tokens/").content.decode()
    assert "admin scope (event log)" in page
    assert board.tokens.get().scope == "admin"

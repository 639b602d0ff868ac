"""Caps no path gets past: what one usage report and one task may add up to (refused with
nothing recorded), and an agent's WIP limit at every door, the board's limit for a person's
move too."""

from __future__ import annotations

import json

import pytest

from boards.core import services
from boards.models import Board, Task


def last_seq(board: Board) -> int:
    return Board.objects.get(pk=board.pk).last_seq


def test_a_usage_report_is_capped_per_report(alice):
    alice.create("Spend")
    reply = alice.call("TaskUpdate", {"taskId": "1", "usage": {"costUsd": 10_001}})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "usage.costUsd"


def test_a_task_cannot_add_up_past_its_cap_and_nothing_is_recorded(alice, board):
    alice.create("Spend")
    ops = [{"op": "update", "taskId": "1", "usage": {"costUsd": 10_000}} for _ in range(100)]
    assert alice.call("TaskBatch", {"ops": ops}).status == 200  # exactly $1,000,000
    seq = last_seq(board)

    reply = alice.call("TaskUpdate", {"taskId": "1", "usage": {"costUsd": 0.01}})

    assert (reply.status, reply.error["code"]) == (409, "usage_limit")
    assert "the task's cost past $1000000" in reply.error["message"]
    assert last_seq(board) == seq
    assert float(Board.objects.get(pk=board.pk).spent_usd) == 1_000_000
    # The board and its lists still read.
    assert alice.call("TaskList", {}).status == 200


@pytest.fixture
def limited(alice, bob, board):
    for subject in "ABCDE":
        alice.create(subject)
    services.board_settings(board=board, actor="pat", maxInProgressPerAgent=1, maxInProgress=2)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    return board


def _in_progress(board: Board) -> list[tuple[int, str]]:
    return list(
        Task.objects.filter(board=board, status="in_progress").values_list("number", "owner")
    )


@pytest.mark.parametrize(
    "tool,body",
    [
        ("TaskUpdate", {"taskId": "2", "status": "in_progress", "owner": "alice"}),
        (
            "TaskBatch",
            {"ops": [{"op": "update", "taskId": "2", "status": "in_progress", "owner": "alice"}]},
        ),
    ],
    ids=["update", "batch"],
)
def test_no_path_gives_an_agent_more_than_its_wip_limit(alice, limited, tool, body):
    before = _in_progress(limited)
    reply = alice.call(tool, body)
    assert reply.status == 409, reply.body
    assert "alice already has 1 task(s) in progress" in json.dumps(reply.body)
    assert [owner for _, owner in _in_progress(limited)].count("alice") == 1
    assert len(_in_progress(limited)) == len(before)


def test_status_then_owner_cannot_get_past_the_limit(alice, limited):
    assert alice.call("TaskUpdate", {"taskId": "2", "status": "in_progress"}).status == 200
    reply = alice.call("TaskUpdate", {"taskId": "2", "owner": "alice"})
    assert (reply.status, reply.error["code"]) == (409, "wip_limit")
    third = alice.call("TaskUpdate", {"taskId": "3", "status": "in_progress"})
    assert (third.status, third.error["code"]) == (409, "wip_limit")  # the board's 2


def test_seed_003s_update_is_held_to_the_board_limit(alice, limited):
    assert (
        alice.call("tasks", {"action": "update", "id": "2", "status": "in_progress"}).status == 200
    )
    reply = alice.call("tasks", {"action": "update", "id": "3", "status": "in_progress"})
    assert reply.status == 409
    assert "it allows 2 at once" in json.dumps(reply.body)
    assert len(_in_progress(limited)) == 2


def test_a_person_moving_a_card_is_held_to_the_board_limit(alice, limited, person_client):
    alice.call("TaskUpdate", {"taskId": "2", "status": "in_progress"})
    response = person_client.post(
        "/boards/team/tasks/3/status/", {"status": "in_progress"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert len(_in_progress(limited)) == 2

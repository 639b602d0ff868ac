""" "Why isn't this ready?" (issue 16): TaskGet's readiness and the detail panel's sentence."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext


def readiness(agent, task_id: str) -> dict:
    return agent.call("TaskGet", {"taskId": task_id}).body["task"]["readiness"]


def diamond(alice) -> None:
    # seed 000: #1 blocks #2 and #3; both block #4.
    for subject in ("Set up database", "Create API", "Add auth", "Integration tests"):
        alice.create(subject)
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "3", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "4", "addBlockedBy": ["2", "3"]})


def test_the_diamond_explains_itself_as_it_unblocks(alice, bob):
    diamond(alice)
    bob.call("TaskClaim", {"taskId": "1"})
    top = readiness(alice, "4")
    assert top["ready"] is False
    assert top["reason"] == (
        "waiting on #2 (pending, unowned), which waits on #1 (in progress, bob), which waits "
        "on nothing; and on #3 (pending, unowned), which waits on #1 (in progress, bob), "
        "which waits on nothing"
    )
    assert [
        (c["id"], c["status"], c["owner"], c["waitsOn"], c["canMove"]) for c in top["chain"]
    ] == [
        ("1", "in_progress", "bob", [], True),
        ("2", "pending", "", ["1"], False),
        ("3", "pending", "", ["1"], False),
    ]
    assert top["movable"] == ["1"]
    bob.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    after = readiness(alice, "4")
    assert after["reason"] == (
        "waiting on #2 (pending, unowned), which waits on nothing; "
        "and on #3 (pending, unowned), which waits on nothing"
    )
    assert after["movable"] == ["2", "3"]
    assert readiness(alice, "2") == {
        "ready": True,
        "reason": "nothing blocks it: it can be claimed now",
        "chain": [],
        "movable": [],
    }
    assert readiness(alice, "1")["reason"] == "it is completed"


def test_a_five_level_chain_is_followed_to_the_task_that_can_move(alice, board):
    for n in range(1, 6):
        alice.create(f"Step {n}")
        if n > 1:
            alice.call("TaskUpdate", {"taskId": str(n), "addBlockedBy": [str(n - 1)]})
    alice.call("TaskClaim", {"taskId": "1"})
    with CaptureQueriesContext(connection) as queries:
        answer = alice.call("TaskGet", {"taskId": "5"}).body["task"]["readiness"]
    assert answer["reason"] == (
        "waiting on #4 (pending, unowned), which waits on #3 (pending, unowned), which waits "
        "on #2 (pending, unowned), which waits on #1 (in progress, alice), which waits on nothing"
    )
    assert [c["id"] for c in answer["chain"]] == ["1", "2", "3", "4"]
    assert answer["movable"] == ["1"]
    assert len(queries) < 40  # one query per level, not per task of the board


def test_a_failed_blocker_is_named_as_a_dead_end(alice, board):
    alice.create("Build")
    alice.create("Ship")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    answer = readiness(alice, "2")
    assert answer["reason"] == "waiting on #1 (failed: it will not complete by itself)"
    assert answer["movable"] == []


def test_the_detail_panel_says_why_in_one_sentence(alice, person_client):
    diamond(alice)
    html = person_client.get("/boards/team/tasks/4/").content.decode()
    assert "Why isn’t this ready?" in html
    assert "Waiting on #2 (pending, unowned), which waits on #1 (pending, unowned)" in html

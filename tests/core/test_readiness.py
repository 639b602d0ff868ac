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
        "waitsForPerson": [],
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


def test_a_failed_blocker_is_named_as_a_dead_end_once_its_grace_is_over(alice, board):
    board.failure_grace_seconds = 0
    board.save()
    alice.create("Build")
    alice.create("Ship")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    answer = readiness(alice, "2")
    assert answer["reason"] == (
        "waiting on #1 (failed: it will not complete by itself; a person can retry #1, "
        "go on without it, or cancel what waits on it)"
    )
    assert answer["movable"] == []
    assert answer["waitsForPerson"] == ["1"]
    assert answer["chain"][0]["waitsForPerson"] is True


def test_a_blocker_that_failed_within_the_grace_may_still_be_retried(alice, board):
    alice.create("Build")
    alice.create("Ship")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    answer = readiness(alice, "2")
    assert answer["reason"] == "waiting on #1 failed (attempt 1 of 3), may be retried"
    assert answer["waitsForPerson"] == []
    assert readiness(alice, "1")["reason"] == "it failed (attempt 1 of 3) and may be retried"


def test_a_claimed_gated_task_waits_for_a_person_and_says_who_asked(alice, bob):
    alice.create("Drop the legacy table", requiresApproval=True)
    alice.create("Migrate the reports")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    assert bob.call("TaskClaim", {"taskId": "1"}).status == 202
    gated = readiness(alice, "1")
    assert gated["ready"] is False
    assert gated["reason"] == (
        "it waits for a person's approval (asked by bob, who starts it once approved)"
    )
    assert gated["waitsForPerson"] == ["1"]
    dependent = readiness(alice, "2")
    assert dependent["reason"] == (
        "waiting on #1, which waits for approval by a person (asked by bob)"
    )
    assert dependent["movable"] == []  # no agent can move #1 on: a person decides
    assert dependent["waitsForPerson"] == ["1"]


def test_a_cancelled_blocker_says_what_a_person_can_do(alice):
    alice.create("Build")
    alice.create("Ship")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "1", "status": "cancelled"})
    assert readiness(alice, "2")["reason"] == (
        "waiting on #1 (cancelled: it will not complete by itself; a person can reopen #1, "
        "go on without it, or cancel what waits on it)"
    )


def test_the_detail_panel_says_why_in_one_sentence(alice, person_client):
    diamond(alice)
    html = person_client.get("/boards/team/tasks/4/").content.decode()
    assert "Why isn’t this ready?" in html
    assert "Waiting on #2 (pending, unowned), which waits on #1 (pending, unowned)" in html

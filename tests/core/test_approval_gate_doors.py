"""The approval gate without side doors: a gated task's blockers, prompt and approval are
held while approval waits, at the agents' doors and the person's; an approval posts the
version seen and its note reaches the agent. Each refusal is a clear 4xx that changes
nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from boards.core import services
from boards.models import Board, Event, Membership, Role, Task


def last_seq(board: Board) -> int:
    return Board.objects.get(pk=board.pk).last_seq


@pytest.fixture
def gated(alice, board):
    alice.create("Run the migration", requiresApproval=True)
    alice.create("Deploy", blockedBy=["1"])
    assert alice.call("TaskClaim", {"taskId": "1"}).body["awaitingApproval"] is True
    return board


@pytest.mark.parametrize("door", ["update", "batch"])
def test_an_agent_cannot_remove_a_gated_blocker_while_approval_waits(alice, gated, door):
    seq = last_seq(gated)
    if door == "update":
        reply = alice.call("TaskUpdate", {"taskId": "2", "removeBlockedBy": ["1"]})
    else:
        ops = [{"op": "update", "taskId": "2", "removeBlockedBy": ["1"]}]
        reply = alice.call("TaskBatch", {"ops": ops})
    assert (reply.status, reply.error["code"]) == (409, "approval_required")
    assert reply.error["message"].startswith("Task #2 waits for a person to approve #1:")
    assert reply.error["details"] == {"blocker": "1", "approval": "requested"}
    assert last_seq(gated) == seq
    assert alice.call("TaskClaim", {"taskId": "2"}).error["code"] == "blocked"


def test_changing_the_prompt_cancels_a_waiting_request(alice, gated):
    reply = alice.call("TaskUpdate", {"taskId": "1", "prompt": "DROP TABLE users"})
    assert reply.status == 200
    task = Task.objects.get(board=gated, number=1)
    assert task.approval_state == "none"
    assert Event.objects.filter(board=gated, kind="approval_cancelled").count() == 1
    with pytest.raises(Exception, match="not awaiting approval"):
        services.approval_decide(board=gated, person="pat", task_id=1, approve=True)


def test_an_approval_posts_the_version_seen_and_a_stale_one_is_refused(alice, gated, person_client):
    seen = Task.objects.get(board=gated, number=1).version
    alice.call("TaskUpdate", {"taskId": "1", "notes": "still thinking"})  # not content
    response = person_client.post(
        "/boards/team/tasks/1/approve/", {"version": seen}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "changed since it was read" in response.content.decode()
    assert Task.objects.get(board=gated, number=1).approval_state == "requested"

    now = Task.objects.get(board=gated, number=1).version
    response = person_client.post("/boards/team/tasks/1/approve/", {"version": now, "note": "ok"})
    assert response.status_code == 302
    task = Task.objects.get(board=gated, number=1)
    assert (task.approval_state, task.status, task.approval_note) == (
        "approved",
        "in_progress",
        "ok",
    )


def test_an_operator_cannot_finish_a_task_that_waits_for_approval(gated, django_user_model):
    operator = django_user_model.objects.create_user(username="olga", password="pw-olga-123")
    Membership.objects.create(board=gated, user=operator, role=Role.OPERATOR)
    client = Client()
    client.force_login(operator)
    seq = last_seq(gated)

    response = client.post(
        "/boards/team/tasks/1/status/", {"status": "completed"}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 409
    assert "only a person with the approver role decides" in response.content.decode()
    assert last_seq(gated) == seq
    assert Task.objects.get(board=gated, number=2).blocked


def test_an_approved_claim_keeps_the_lease_it_asked_for(alice, board):
    alice.create("Migrate", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": 600})
    services.approval_decide(board=board, person="pat", task_id=1, approve=True)
    task = Task.objects.get(board=board, number=1)
    assert task.lease_seconds == 600
    assert task.lease_expires_at - timezone.now() > timedelta(seconds=590)


def test_a_note_typed_before_approve_reaches_the_agent(alice, gated, person_client):
    version = Task.objects.get(board=gated, number=1).version
    person_client.post(
        "/boards/team/tasks/1/approve/", {"version": version, "note": "go, but back up first"}
    )
    task = Task.objects.get(board=gated, number=1)
    assert (task.approval_state, task.approval_note) == ("approved", "go, but back up first")
    messages = alice.call("InboxRead", {}).body["messages"]
    assert [m["body"] for m in messages] == [
        "#1 “Run the migration” approved by pat: go, but back up first"
    ]

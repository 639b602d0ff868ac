"""TaskClaim and TaskReassign (SPEC §3 rule 4, seed 002's claim rules), and the approval gate."""

from boards.core import services
from boards.models import Task


def test_claim_sets_owner_and_in_progress(alice):
    alice.create("Work")
    reply = alice.call("TaskClaim", {"taskId": "1"})
    assert reply.status == 200
    assert reply.body["task"]["owner"] == "alice"
    assert reply.body["task"]["status"] == "in_progress"
    assert reply.body["changes"] == [
        {"type": "updated", "taskId": "1", "fields": ["owner", "status"]}
    ]


def test_claim_again_by_the_owner_is_a_no_op(alice):
    alice.create("Work")
    alice.call("TaskClaim", {"taskId": "1"})
    again = alice.call("TaskClaim", {"taskId": "1"})
    assert again.status == 200
    assert again.body["changes"] == []
    assert again.body["task"]["version"] == 2


def test_claim_of_a_task_owned_by_another_agent_is_409(alice, bob):
    alice.create("Work")
    alice.call("TaskClaim", {"taskId": "1"})
    reply = bob.call("TaskClaim", {"taskId": "1"})
    assert reply.status == 409
    assert reply.error == {"code": "owned", "message": "Task #1 is owned by alice"}
    assert Task.objects.get(number=1).owner == "alice"


def test_claim_of_a_blocked_task_is_409(alice):
    alice.create("First")
    alice.create("Second", blockedBy=["1"])
    reply = alice.call("TaskClaim", {"taskId": "2"})
    assert reply.status == 409
    assert reply.error["code"] == "blocked"
    assert reply.error["message"] == "Task #2 is blocked by #1"


def test_claim_of_a_terminal_task_is_409(alice):
    alice.create("Done already")
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    reply = alice.call("TaskClaim", {"taskId": "1"})
    assert reply.status == 409
    assert reply.error == {"code": "terminal", "message": "Task #1 is completed"}


def test_claim_of_an_unknown_task_is_404(alice):
    assert alice.call("TaskClaim", {"taskId": "7"}).status == 404


def test_claim_without_task_id_takes_the_lowest_ready_task(alice, bob):
    alice.create("Blocker")
    alice.create("Blocked", blockedBy=["1"])
    alice.create("Free")
    first = bob.call("TaskClaim", {})
    second = bob.call("TaskClaim", {})
    third = bob.call("TaskClaim", {})
    assert first.body["task"]["id"] == "1"
    assert second.body["task"]["id"] == "3"
    assert third.status == 200
    assert third.body["task"] is None
    assert third.body["message"] == "No task is ready to claim."


def test_reassign_overrides_the_owner(alice, bob):
    alice.create("Work")
    alice.call("TaskClaim", {"taskId": "1"})
    reply = alice.call("TaskReassign", {"taskId": "1", "owner": "bob"})
    assert reply.status == 200
    assert reply.body["task"]["owner"] == "bob"
    assert bob.call("TaskClaim", {"taskId": "1"}).status == 200


def test_reassign_of_blocked_or_terminal_tasks_is_409(alice):
    alice.create("First")
    alice.create("Second", blockedBy=["1"])
    assert alice.call("TaskReassign", {"taskId": "2", "owner": "bob"}).error["code"] == "blocked"
    alice.call("TaskUpdate", {"taskId": "1", "status": "cancelled"})
    assert alice.call("TaskReassign", {"taskId": "1", "owner": "bob"}).error["code"] == "terminal"


def test_claim_of_a_gated_task_asks_for_approval_instead_of_starting(alice, bob, board):
    alice.create("Run the migration", requiresApproval=True)
    reply = alice.call("TaskClaim", {"taskId": "1"})
    assert reply.status == 202
    assert reply.body["awaitingApproval"] is True
    task = reply.body["task"]
    assert task["status"] == "pending" and task["owner"] == ""
    assert task["approval"]["state"] == "requested"
    assert task["approval"]["requestedBy"] == "alice"
    refused = bob.call("TaskClaim", {"taskId": "1"})
    assert refused.status == 409
    assert refused.error["message"] == "Task #1 awaits approval requested by alice"
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "in_progress"}).status == 409
    services.approval_decide(board=board, person="pat", task_id="1", approve=True)
    approved = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert approved["status"] == "in_progress" and approved["owner"] == "alice"
    assert approved["approval"]["decidedBy"] == "pat"


def test_denied_approval_cancels_the_task_with_the_note(alice, board):
    alice.create("Drop the table", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    services.approval_decide(
        board=board, person="pat", task_id="1", approve=False, note="Too risky"
    )
    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert task["status"] == "cancelled"
    assert task["approval"]["state"] == "denied"
    assert task["approval"]["note"] == "Too risky"


def test_ready_view_leaves_out_tasks_awaiting_approval(alice):
    alice.create("Gated", requiresApproval=True)
    alice.create("Free")
    alice.call("TaskClaim", {"taskId": "1"})
    ready = alice.call("TaskList", {"view": "ready"}).body
    assert [t["id"] for t in ready["tasks"]] == ["2"]
    assert ready["counts"]["ready"] == 1


def test_request_approval_on_any_task_records_the_reason(alice):
    alice.create("Migrate")
    alice.call("TaskClaim", {"taskId": "1"})
    reply = alice.call(
        "TaskRequestApproval", {"taskId": "1", "reason": "about to run the migration — ok?"}
    )
    assert reply.status == 200
    assert reply.body["task"]["approval"]["reason"] == "about to run the migration — ok?"

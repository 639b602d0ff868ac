"""The approval gate as the security review tried it: each reproduction now refused, nothing changed."""

from __future__ import annotations

from boards.core import services
from boards.models import Task
from boards.needs import reads


def test_an_approval_is_for_what_was_asked_and_a_rewrite_asks_again(alice, board):
    alice.create("Run the migration", requiresApproval=True, prompt="ALTER TABLE a")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    services.approval_decide(board=board, person="pat", task_id="1", approve=True, note="go")
    approved = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert (approved["status"], approved["approval"]["state"]) == ("in_progress", "approved")
    assert approved["approval"]["version"] == approved["version"]

    rewritten = alice.call("TaskUpdate", {"taskId": "1", "prompt": "DROP TABLE a"})
    assert rewritten.status == 200
    assert rewritten.body["task"]["approval"]["state"] == "none"
    finishing = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert (finishing.status, finishing.error["code"]) == (409, "approval_required")

    assert alice.call("TaskUpdate", {"taskId": "1", "status": "pending"}).status == 200
    again = alice.call("TaskClaim", {"taskId": "1"})
    assert again.status == 202 and again.body["awaitingApproval"] is True

    history = alice.call("TaskGet", {"taskId": "1"}).body["task"]["approval"]["history"]
    assert [(h["event"], h["by"]) for h in history] == [
        ("approval_requested", "alice"),
        ("approved", "pat"),
        ("approval_cleared", "alice"),
        ("approval_requested", "alice"),
    ]
    assert history[1]["note"] == "go"
    assert history[2]["reason"] == "prompt changed"
    assert all(isinstance(h["version"], int) for h in history)


def test_notes_and_progress_leave_an_approval_standing(alice, board):
    alice.create("Run the migration", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    services.approval_decide(board=board, person="pat", task_id="1", approve=True)
    assert alice.call("TaskUpdate", {"taskId": "1", "notes": "half done"}).status == 200
    done = alice.call("TaskUpdate", {"taskId": "1", "status": "completed", "result": "ok"})
    assert done.status == 200
    assert done.body["task"]["status"] == "completed"


def test_a_waiting_request_stays_on_the_board_when_the_agent_tries_to_finish(alice, bob, board):
    alice.create("Run the migration", requiresApproval=True)
    alice.create("Use the new table", blockedBy=["1"])
    alice.call("TaskClaim", {"taskId": "1"})
    for body in ({"status": "completed"}, {"status": "deleted"}):
        refused = alice.call("TaskUpdate", {"taskId": "1", **body})
        assert (refused.status, refused.error["code"]) == (409, "awaiting_approval")
    waiting = [(i.task_id, i.reason) for i in reads.needs_you([board])]
    assert waiting == [(1, "approval")]
    claim = bob.call("TaskClaim", {"taskId": "2"})
    assert (claim.status, claim.error["code"]) == (409, "blocked")


def test_a_denial_is_final_for_agents_but_not_for_people(alice, board):
    alice.create("Run the migration", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    services.approval_decide(board=board, person="pat", task_id="1", approve=False, note="no")
    for status in ("completed", "pending", "deleted"):
        refused = alice.call("TaskUpdate", {"taskId": "1", "status": status})
        assert (refused.status, refused.error["code"]) == (409, "approval_denied")
        assert "pat" in refused.error["message"] and "no" in refused.error["message"]
    services.task_update(board=board, actor="pat", person=True, task_id="1", status="pending")
    assert Task.objects.get(board=board, number=1).status == "pending"

"""Supervision through the API: approvals decided by people only, messages, the roster (SPEC §3.5, §3.7)."""

import pytest

from boards.core import services
from boards.core.errors import Conflict, NotFound
from boards.models import Agent, Event, Task


def test_inbox_returns_messages_oldest_first_and_ack_marks_them_read(alice, board):
    alice.create("Work")
    services.message_send(board=board, sender="pat", recipient="alice", body="first", task_id="1")
    services.message_send(board=board, sender="pat", recipient="alice", body="second")
    services.agent_seen(board=board, agent="bob")
    services.message_send(board=board, sender="pat", recipient="bob", body="not yours")
    peek = alice.call("InboxRead", {})
    assert [m["body"] for m in peek.body["messages"]] == ["first", "second"]
    assert peek.body["messages"][0]["taskId"] == "1"
    assert peek.body["messages"][0]["from"] == "pat"
    assert peek.body["unreadMessages"] == 2
    acked = alice.call("InboxRead", {"ack": True})
    assert len(acked.body["messages"]) == 2
    assert acked.body["unreadMessages"] == 0
    assert alice.call("InboxRead", {}).body["messages"] == []


def test_every_tool_answer_carries_the_callers_unread_count(alice, bob, board):
    alice.create("Work")
    services.message_send(board=board, sender="pat", recipient="alice", body="stop and read this")
    assert alice.call("TaskGet", {"taskId": "1"}).body["unreadMessages"] == 1
    assert alice.call("TaskList", {}).body["unreadMessages"] == 1
    assert alice.call("TaskClaim", {"taskId": "1"}).body["unreadMessages"] == 1
    assert bob.call("TaskList", {}).body["unreadMessages"] == 0
    refused = bob.call("TaskClaim", {"taskId": "1"})
    assert refused.status == 409  # errors keep the SPEC's shape, without extra keys


def test_a_message_about_a_task_shows_in_its_history(alice, board):
    alice.create("Work")
    services.message_send(
        board=board, sender="pat", recipient="alice", body="use the staging DB", task_id="1"
    )
    event = Event.objects.get(board=board, kind="message")
    assert (event.task_number, event.actor, event.data["to"]) == (1, "pat", "alice")


def test_deciding_a_request_that_is_no_longer_pending_is_a_clear_conflict(alice, board):
    alice.create("Risky", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    services.approval_decide(board=board, person="pat", task_id="1", approve=True)
    with pytest.raises(Conflict) as again:
        services.approval_decide(board=board, person="sam", task_id="1", approve=False)
    assert again.value.message == "Task #1 is not awaiting approval"
    services.task_delete(board=board, actor="pat", person=True, task_id="1")
    with pytest.raises(NotFound):
        services.approval_decide(board=board, person="pat", task_id="1", approve=True)


def test_agents_have_no_tool_to_approve(alice):
    alice.create("Risky", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    names = {tool["name"] for tool in alice.client.get("/api/boards/team/tools").json()["tools"]}
    assert not {n for n in names if "pprove" in n and n != "TaskRequestApproval"}
    sneaky = alice.call("TaskUpdate", {"taskId": "1", "approval": {"state": "approved"}})
    assert sneaky.status == 400
    assert Task.objects.get(number=1).approval_state == "requested"


def test_an_agent_token_cannot_approve_through_the_board(alice):
    alice.create("Risky", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    response = alice.client.post(
        "/boards/team/tasks/1/approve/", headers={"Authorization": f"Bearer {alice.token}"}
    )
    assert response.status_code == 302
    assert response.url.startswith("/login/")
    assert Task.objects.get(number=1).approval_state == "requested"


def test_second_agent_is_refused_while_a_request_is_pending(alice, bob):
    alice.create("Risky", requiresApproval=True)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    refused = bob.call("TaskClaim", {"taskId": "1"})
    assert refused.status == 409
    assert refused.error["code"] == "awaiting_approval"
    assert "alice" in refused.error["message"]


def test_calling_the_api_puts_the_agent_on_the_roster(alice, board):
    alice.call("TaskList", {})
    agent = Agent.objects.get(board=board, name="alice")
    assert agent.last_seen is not None

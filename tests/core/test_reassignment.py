"""Reassignment never strands work (issue #26): the new owner is told and offered it first,
the old one's lease is lost; a typo is refused with the close names."""

from __future__ import annotations

from boards.models import Task


def test_reassigned_work_waits_for_its_new_owner_who_is_told_and_offered_it_first(
    alice, bob, board
):
    alice.create("Older, more urgent", priority="urgent")
    alice.create("Handed over")
    bob.call("TaskList", {})
    alice.call("TaskClaim", {"taskId": "2"})

    reply = alice.call("TaskReassign", {"taskId": "2", "owner": "bob"})

    task = reply.body["task"]
    assert (task["status"], task["owner"]) == ("pending", "bob")
    assert Task.objects.get(board=board, number=2).lease_expires_at is None
    late = alice.call("TaskUpdate", {"taskId": "2", "notes": "still mine?"})
    assert (late.status, late.error["code"]) == (409, "lease_lost")
    assert "reassigned to bob" in late.error["message"]
    inbox = bob.call("InboxRead", {})
    assert "#2 “Handed over” was assigned to you by alice" in inbox.body["messages"][0]["body"]
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "2"  # before the urgent #1
    attempts = [
        (a["agent"], a["outcome"])
        for a in bob.call("TaskGet", {"taskId": "2"}).body["task"]["attempts"]
    ]
    assert attempts == [("alice", "reassigned"), ("bob", None)]


def test_reassigning_to_a_typo_is_refused_with_close_names(alice, bob, board):
    alice.create("Work")
    reply = alice.call("TaskReassign", {"taskId": "1", "owner": "bbo"})
    assert reply.status == 400
    assert "No agent called 'bbo' on this board" in reply.error["message"]
    assert reply.error["details"][0]["suggestions"] == ["bob"]

"""Each Needs-you item's help fits the state it is in (issue 38): a silent owner's stalled
work recommends release, ready work with every agent gone is an item until one is back, a
held call nobody can run cannot be approved, the board's own decisions are included, each
new item has its own note box."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from boards.clients import calls, sessions
from boards.core import selectors
from boards.core.rules import needs_of
from boards.core.states import GONE_FACTOR
from boards.models import Agent, Event, Task, ToolCall
from boards.needs import decisions
from tests.clients.test_hooks import bash, hook
from tests.support.factories import make_token
from tests.support.htmltext import flat


def inbox(client) -> list[dict]:
    response = client.get("/api/inbox")
    assert response.status_code == 200
    return response.json()["items"]


def away(board, agent: str, seconds: float) -> None:
    """``agent`` made its last call ``seconds`` ago (its calls would say otherwise)."""
    Agent.objects.filter(board=board, name=agent).update(
        last_seen=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.fixture(autouse=True)
def measure_afresh():
    decisions._CYCLES.clear()
    yield
    decisions._CYCLES.clear()


def test_a_silent_owners_stalled_work_recommends_release_not_message(alice, board, person_client):
    alice.create("The long one")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert decisions.needs_sweep(now=timezone.now() + timedelta(minutes=11)) == 1
    [item] = inbox(person_client)
    assert item["recommended"]["action"] == "message"  # alice is there: she reads it

    away(board, "alice", board.silent_after_seconds + 5)
    [item] = inbox(person_client)
    assert item["reason"] == "no_progress"
    assert item["recommended"]["action"] == "release"
    assert [a["action"] for a in item["actions"]] == ["open", "message"]
    assert "its owner is silent" in item["question"]

    away(board, "alice", board.silent_after_seconds * GONE_FACTOR + 5)
    [item] = inbox(person_client)
    assert "its owner is gone" in item["question"]
    page = person_client.get("/boards/team/").content.decode()
    assert "its owner is gone" in page
    # Release, the recommended action, clears it.
    response = person_client.post("/boards/team/tasks/1/release/", {"note": ""})
    assert response.status_code in (200, 302)
    assert Task.objects.get(board=board, number=1).needs == ""


def test_ready_work_with_every_agent_gone_is_an_item_until_one_is_back(alice, board, person_client):
    alice.create("Nobody takes this")  # 1
    alice.create("Nor this")  # 2
    later = timezone.now() + timedelta(seconds=board.silent_after_seconds * GONE_FACTOR + 5)

    assert decisions.needs_sweep(now=timezone.now()) == 0  # alice is there
    assert decisions.needs_sweep(now=later) == 2
    assert list(Task.objects.filter(board=board).values_list("needs", flat=True)) == [
        "unattended",
        "unattended",
    ]
    items = inbox(person_client)
    assert [(i["reason"], i["taskId"]) for i in items] == [
        ("unattended", "1"),
        ("unattended", "2"),
    ]
    assert "every agent of the board is gone" in items[0]["question"]
    assert items[0]["recommended"]["action"] == "open"
    event = Event.objects.filter(board=board, kind="needs_attention").first()
    assert event is not None and event.data["reason"] == "unattended"
    # A write on the task keeps what the sweeper found while it stays ready.
    assert person_client.post("/boards/team/tasks/2/priority/", {"priority": "0"}).status_code in (
        200,
        302,
    )
    assert Task.objects.get(board=board, number=2).needs == "unattended"

    # An agent is back: its claim clears its task, the sweeper the rest.
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert Task.objects.get(board=board, number=1).needs == ""
    assert Task.objects.get(board=board, number=2).needs == "unattended"
    assert decisions.needs_sweep(now=timezone.now()) == 1
    assert Task.objects.get(board=board, number=2).needs == ""
    assert inbox(person_client) == []


def test_the_query_and_its_twin_agree_on_unattended_work(alice, board):
    alice.create("Ready")  # 1
    alice.create("Blocked", blockedBy=["1"])  # 2
    alice.create("Working")  # 3
    assert alice.call("TaskClaim", {"taskId": "3"}).status == 200
    candidates = set(
        Task.objects.filter(board=board)
        .may_come_to_be_unattended(board.max_attempts)
        .values_list("number", flat=True)
    )
    now = timezone.now()
    twin = {
        task.number
        for task in Task.objects.filter(board=board)
        if needs_of(
            task,
            blocked=task.blocked,
            waiting=False,
            max_attempts=board.max_attempts,
            grace=timedelta(seconds=board.failure_grace_seconds),
            now=now,
            unattended=True,
        )
        == "unattended"
    }
    assert candidates == twin == {1}


def test_a_held_call_whose_session_ended_cannot_be_approved_and_says_so(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("git push origin main"))
    sessions.session_event(board=board, agent="claude", event=hook("SessionEnd", reason="exit"))
    call = ToolCall.objects.get()
    assert call.state == "requested"

    [item] = inbox(person_client)
    assert "its session ended: nobody waits for the answer" in item["question"]
    assert [a["action"] for a in item["actions"]] == ["deny"]
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve/", {}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "cannot be approved: its session ended" in response.content.decode()
    call.refresh_from_db()
    assert call.state == "requested"
    response = person_client.post(f"/boards/team/calls/{call.pk}/deny/", {})
    assert response.status_code in (200, 302)
    assert inbox(person_client) == []


def test_a_held_call_past_its_deadline_cannot_be_approved(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf build"))
    ToolCall.objects.update(deadline=timezone.now() - timedelta(seconds=1))
    call = ToolCall.objects.get()
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve/", {}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "stopped waiting" in response.content.decode()
    assert ToolCall.objects.get().state == "requested"


def test_what_matters_includes_the_boards_own_decisions(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf /tmp/x"))
    ToolCall.objects.update(deadline=timezone.now() - timedelta(seconds=30))
    assert calls.tool_calls_expire() == 1
    kinds = [e.kind for e in selectors.activity_page(board, matters=True)]
    assert "tool_call_expired" in kinds
    page = person_client.get("/boards/team/activity/?matters=1").content.decode()
    assert "Nobody answered claude" in page


def test_each_new_item_has_its_own_note_box(alice, board, person_client):
    alice.create("Migrate")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskRequestApproval", {"taskId": "1", "reason": "may I?"}).status == 200
    first = re.findall(
        r'name="note" id="(note-[^"]+)"', flat(person_client.get("/boards/team/").content)
    )
    assert len(first) == 1
    version = board.tasks.get(number=1).version
    denied = person_client.post("/boards/team/tasks/1/deny/", {"note": "no", "version": version})
    assert denied.status_code in (200, 302)
    assert board.tasks.get(number=1).needs != "approval"
    assert person_client.post("/boards/team/tasks/1/reopen/", {}).status_code in (200, 302)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskRequestApproval", {"taskId": "1", "reason": "again?"}).status == 200
    second = re.findall(
        r'name="note" id="(note-[^"]+)"', flat(person_client.get("/boards/team/").content)
    )
    assert len(second) == 1 and second != first

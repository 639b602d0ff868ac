"""Agents shown alive or gone (SPEC §12, issue #26): working, idle, silent, gone on the
roster, on the cards they hold and in GET /api/boards/<slug>/agents; the sweeper records
an agent turning quiet within seconds, with no other write."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from boards.core import services
from boards.models import Agent, Board, Event
from tests.support.factories import make_token


def quiet_for(board: Board, name: str, seconds: float) -> None:
    Agent.objects.filter(board=board, name=name).update(
        last_seen=timezone.now() - timedelta(seconds=seconds)
    )


def agents(token: str) -> dict[str, dict]:
    response = Client().get("/api/boards/team/agents", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.content
    return {a["name"]: a for a in response.json()["agents"]}


def test_agents_are_working_idle_silent_or_gone(alice, bob, board):
    alice.create("Work")
    alice.call("TaskClaim", {"taskId": "1"})
    bob.call("TaskList", {})
    carol = make_token(board, "carol")
    Client().post(
        "/api/boards/team/tools/TaskList",
        data="{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {carol}"},
    )
    quiet_for(board, "carol", 10 * 120 + 1)
    seen = agents(alice.token)
    assert {name: a["state"] for name, a in seen.items()} == {
        "alice": "working",
        "bob": "idle",
        "carol": "gone",
    }
    assert seen["alice"]["holding"] == ["1"]
    assert seen["bob"]["session"] is None

    quiet_for(board, "alice", 121)
    assert agents(bob.token)["alice"]["state"] == "silent"


def test_the_sweeper_records_an_agent_turning_silent_and_its_card_says_so(
    alice, board, person_client
):
    alice.create("Work")
    alice.call("TaskClaim", {"taskId": "1"})
    quiet_for(board, "alice", 200)

    assert services.agents_sweep() == 1
    assert services.agents_sweep() == 0  # announced once

    assert Event.objects.filter(board=board, kind="agent_silent").count() == 1
    page = person_client.get("/boards/team/").content.decode()
    assert 'data-agent-state="silent"' in page
    assert "card--stale" in page and ">silent</span>" in page

    alice.call("TaskList", {})  # back: a call brings it back within one sweep
    Agent.objects.filter(board=board, name="alice").update(last_seen=timezone.now())
    assert services.agents_sweep() == 1
    assert Agent.objects.get(board=board, name="alice").announced == ""
    assert 'data-agent-state="working"' in person_client.get("/boards/team/").content.decode()


def test_a_session_that_ended_is_gone(board):
    token = make_token(board, "claude")
    Client().post(
        "/api/boards/team/hooks/claude-code",
        data='{"hook_event_name": "SessionEnd", "session_id": "s-9", "cwd": "/w"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    seen = agents(token)["claude"]
    assert (seen["state"], seen["session"]["state"], seen["session"]["cwd"]) == (
        "gone",
        "ended",
        "/w",
    )


def test_the_silent_threshold_is_a_board_setting(alice, board, person_client):
    response = person_client.post(
        "/boards/team/settings/",
        {"maxAttempts": "3", "silentAfterSeconds": "30", "failureGraceSeconds": "5"},
    )
    assert response.status_code == 302
    board.refresh_from_db()
    assert (board.silent_after_seconds, board.failure_grace_seconds) == (30, 5)
    alice.call("TaskList", {})
    quiet_for(board, "alice", 31)
    assert agents(alice.token)["alice"]["state"] == "silent"
    refused = person_client.post(
        "/boards/team/settings/", {"maxAttempts": "3", "silentAfterSeconds": "1"}
    )
    assert refused.status_code == 400


def test_a_message_to_a_silent_agent_says_so_when_sent(alice, board, person_client):
    alice.call("TaskList", {})
    quiet_for(board, "alice", 300)
    response = person_client.post(
        "/boards/team/messages/",
        {"recipient": "alice", "body": "Are you there?"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "Message queued; alice is silent (last call 5" in response.content.decode()

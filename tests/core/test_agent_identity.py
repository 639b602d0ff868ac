"""Identities that cannot be borrowed: a team token's names are plain and bounded, never
another token's agent nor a person; an owner is a plain known name; live work is taken over
only by its holder's own token, an orchestrator or a person. Each refusal is a clear 4xx
that changes nothing."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from boards.core import services
from boards.core.errors import InvalidInput
from boards.models import Agent, Board, Event, Task
from tests.support.factories import make_token


def last_seq(board: Board) -> int:
    return Board.objects.get(pk=board.pk).last_seq


def _as(board: Board, token: str, agent: str, tool: str = "TaskList", body: dict | None = None):
    response = Client().post(
        f"/api/boards/{board.slug}/tools/{tool}",
        data=json.dumps(body or {}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "X-Agent": agent},
    )
    return response.status_code, response.json()


@pytest.fixture
def team(board, agent_factory):
    """A team token's call as the agent it names: (status, answer)."""
    token = make_token(board, team=True)

    def as_agent(name: str, tool: str = "TaskList", body: dict | None = None):
        return _as(board, token, name, tool, body)

    return as_agent


@pytest.mark.parametrize(
    "name",
    [
        "evil\u202egnp.exe",  # right-to-left override
        "ali\u200bce",  # zero-width space
        "\x1b[31mred\x1b[0m",  # ANSI escape
        "x" * 65,
        "tab\there",
        "semi;colon",
    ],
    ids=["bidi", "zero-width", "ansi", "too-long", "tab", "punctuation"],
)
def test_a_team_token_cannot_use_a_name_that_hides_what_it_is(board, team, name):
    status, body = team(name)
    assert status == 400
    assert body["error"]["details"][0]["field"] == "X-Agent"
    assert not Agent.objects.filter(board=board).exists()


def test_plain_names_with_spaces_dots_and_letters_are_fine(board, team):
    for name in ("worker 1", "planner.v2", "Ágota-ü_3"):
        assert team(name)[0] == 200
    assert Agent.objects.filter(board=board).count() == 3


def test_a_team_token_cannot_act_as_an_agent_with_its_own_token(board, team):
    make_token(board, "alice")
    services.message_send(board=board, sender="pat", recipient="alice", body="private")
    status, body = team("alice", "InboxRead", {"ack": True})
    assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert services.inbox_read(board=board, agent="alice")  # still unread


def test_a_team_token_cannot_act_as_a_person(board, team, person):
    status, body = team("PAT", "TaskCreate", {"subject": "As a person"})
    assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert not Task.objects.filter(board=board).exists()


def test_a_team_token_may_introduce_a_bounded_number_of_names(board, team, settings):
    settings.KANBAN_TEAM_AGENT_LIMIT = 3
    for n in range(3):
        assert team(f"worker {n}")[0] == 200
    status, body = team("worker 99")
    assert (status, body["error"]["code"]) == (429, "too_many_agents")
    assert team("worker 1")[0] == 200  # a known name is still welcome
    assert Agent.objects.filter(board=board).count() == 3


def test_a_token_is_bound_only_to_a_plain_name(board):
    with pytest.raises(InvalidInput):
        services.token_issue(board=board, agent="bad\u202ename")


def test_an_admin_removes_an_agent_from_the_roster(board, team):
    team("ghost")
    services.agent_remove(board=board, name="ghost", actor="pat")
    assert not Agent.objects.filter(board=board, name="ghost").exists()
    assert Event.objects.filter(board=board, kind="agent_removed").exists()


def test_a_team_tokens_agents_are_its_own(board):
    first, second = make_token(board, team=True), make_token(board, team=True)
    assert _as(board, first, "scout")[0] == 200
    status, body = _as(board, second, "scout", "InboxRead")
    assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert _as(board, second, "SCOUT")[0] == 403  # names compare without case
    assert _as(board, first, "Scout")[0] == 200  # the same agent, as the roster spells it


def test_a_revoked_agents_name_stays_reserved(board):
    raw = make_token(board, "demo-agent")
    token = board.tokens.get(agent="demo-agent")
    services.token_revoke(board=board, token_id=token.pk)
    team = make_token(board, team=True)
    for name in ("demo-agent", "Demo-Agent"):
        status, body = _as(board, team, name)
        assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert raw


@pytest.mark.parametrize(
    "owner", ["ali\u200bce", "evil\u202egnp", "nobody-here", "pat;"], ids=ascii
)
def test_owner_must_be_a_plain_known_name(alice, board, person, owner):
    alice.create("Work")
    seq = last_seq(board)
    reply = alice.call("TaskUpdate", {"taskId": "1", "owner": owner})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "owner"
    assert last_seq(board) == seq


def test_owner_may_name_a_member_or_a_roster_agent_in_any_case(alice, bob, board, person):
    alice.create("Work")
    bob.call("TaskList", {})
    assert alice.call("TaskUpdate", {"taskId": "1", "owner": "PAT"}).body["task"]["owner"] == "pat"
    assert (
        alice.call("TaskReassign", {"taskId": "1", "owner": "Bob"}).body["task"]["owner"] == "bob"
    )


def test_an_agent_cannot_take_over_another_live_agents_work(alice, bob, board):
    alice.create("Mine")
    alice.call("TaskClaim", {"taskId": "1"})
    seq = last_seq(board)
    for tool, body in (
        ("TaskUpdate", {"taskId": "1", "owner": "bob"}),
        ("TaskReassign", {"taskId": "1", "owner": "bob"}),
        ("TaskUpdate", {"taskId": "1", "owner": ""}),
    ):
        reply = bob.call(tool, body)
        assert (reply.status, reply.error["code"]) == (403, "not_your_task"), tool
    assert last_seq(board) == seq


def test_an_orchestrator_token_and_a_person_may_take_work_over(alice, bob, board):
    alice.create("Mine")
    alice.call("TaskClaim", {"taskId": "1"})
    boss = services.token_issue(board=board, agent="boss", orchestrator=True)
    bob.call("TaskList", {})
    response = Client().post(
        "/api/boards/team/tools/TaskReassign",
        data=json.dumps({"taskId": "1", "owner": "bob"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {boss}"},
    )
    assert response.status_code == 200, response.json()
    assert Task.objects.get(board=board, number=1).owner == "bob"


def test_a_team_token_may_move_work_between_its_own_agents(board):
    team = make_token(board, team=True)
    _as(board, team, "one", "TaskCreate", {"subject": "Split"})
    _as(board, team, "one", "TaskClaim", {"taskId": "1"})
    _as(board, team, "two")
    status, body = _as(board, team, "two", "TaskReassign", {"taskId": "1", "owner": "two"})
    assert status == 200, body

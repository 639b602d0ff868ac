"""Identity can't be borrowed, and hostile input gets a clear 4xx (issue: trust)."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import AsyncClient, Client

from boards.core import services
from boards.core.errors import InvalidInput
from boards.models import Agent, Event, Task
from kanban.asgi import application
from tests.support.factories import make_board, make_task, make_token

# --- identity --------------------------------------------------------------------------------


@pytest.fixture
def team(board, agent_factory):
    token = make_token(board, team=True)

    def as_agent(name: str, tool: str = "TaskList", body: dict | None = None):
        response = Client().post(
            f"/api/boards/{board.slug}/tools/{tool}",
            data=json.dumps(body or {}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", "X-Agent": name},
        )
        return response.status_code, response.json()

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


# --- hostile input ---------------------------------------------------------------------------


def test_metadata_keys_that_shadow_template_lookups_render(person_client, alice, board):
    alice.create("Tricky", metadata={"items": "", "keys": "k", "values": 3, "zeta": True})
    response = person_client.get(f"/boards/{board.slug}/tasks/1/")
    assert response.status_code == 200
    html = response.content.decode()
    for key in ("items", "keys", "values", "zeta"):
        assert f"<dt>{key}</dt>" in html


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_a_clear_400(alice, board, literal):
    raw = b'{"subject": "x", "metadata": {"a": ' + literal.encode() + b"}}"
    reply = alice.call("TaskCreate", raw=raw)
    assert reply.status == 400
    assert "finite" in reply.error["message"]
    assert not Task.objects.filter(board=board).exists()


def test_out_of_range_ids_in_urls_are_404(person_client, board):
    huge = "99999999999999999999999"
    assert person_client.get(f"/boards/{board.slug}/tasks/{huge}/").status_code == 404
    assert person_client.post(f"/boards/{board.slug}/tasks/{huge}/delete/").status_code == 404
    assert person_client.post(f"/boards/{board.slug}/tokens/{huge}/revoke/").status_code == 404


def test_a_batch_is_bounded_in_dependencies_as_well_as_operations(alice, board):
    for n in range(1, 101):
        make_task(board, f"T{n}")
    ops = [
        {"op": "create", "subject": f"C{i}", "blockedBy": [str(n) for n in range(1, 101)]}
        for i in range(21)
    ]
    reply = alice.call("TaskBatch", {"ops": ops})
    assert reply.status == 400
    assert "2000" in reply.error["message"].replace(",", "")
    assert Task.objects.filter(board=board).count() == 100


# --- sockets and watches ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_logging_out_closes_that_sessions_sockets(person_client, board):
    session = person_client.cookies[settings.SESSION_COOKIE_NAME].value
    socket = WebsocketCommunicator(
        application,
        f"/ws/boards/{board.slug}/",
        headers=[
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    await socket.receive_from(timeout=5)  # the catch-up render
    await database_sync_to_async(person_client.post)("/logout/")
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4401}


@pytest.mark.django_db(transaction=True)
async def test_concurrent_watches_per_token_are_capped(settings, layer_spy):
    settings.KANBAN_WATCHES_PER_TOKEN = 2
    board = await database_sync_to_async(make_board)("watched")
    token = await database_sync_to_async(make_token)(board, "alice")
    await database_sync_to_async(make_task)(board, "Long")

    async def watch(timeout: float) -> tuple[int, dict]:
        response = await AsyncClient().post(
            "/api/boards/watched/tools/TaskWatch",
            data=json.dumps({"taskId": "1", "timeoutSeconds": timeout}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        return response.status_code, json.loads(response.content)

    waiting = [asyncio.create_task(watch(10)) for _ in range(2)]
    await layer_spy.waiting(2)  # both watchers are listening
    status, body = await watch(1)
    assert (status, body["error"]["code"]) == (429, "too_many_watches")
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="completed"
    )
    for status, body in await asyncio.wait_for(asyncio.gather(*waiting), 10):
        assert status == 200 and body["timedOut"] is False

"""Runners on the board (SPEC §16): hello, the long poll and its commands (each given
once, or refused as stale), presence in ``GET /runners`` and on the roster."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.utils import timezone

from boards.core import services
from boards.models import Event, Runner, RunnerCommand
from boards.runs import services as runs
from tests.support.htmltext import flat

HELLO = {
    "host": "build-box.lan",
    "version": "1",
    "clients": [
        {"client": "claude-code", "version": "2.1.332", "gate": True},
        {"client": "codex", "version": "0.171.0", "gate": False, "why": "hooks not trusted"},
    ],
    "repos": [{"name": "app", "id": "0f3a9c", "branch": "main"}],
    "maxSessions": 3,
}


@pytest.fixture
def runner_token(board) -> str:
    return services.token_issue(board=board, agent="build-box", runner=True)


def post(path: str, token: str, body: object = None):
    return Client().post(
        f"/api/boards/team/runners/{path}",
        data=json.dumps({} if body is None else body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


async def apost(path: str, token: str, body: object = None):
    response = await AsyncClient().post(
        f"/api/boards/team/runners/{path}",
        data=json.dumps({} if body is None else body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, json.loads(response.content)


def test_hello_registers_the_runner_and_records_that_it_came(
    board, runner_token, django_capture_on_commit_callbacks, published
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post("hello", runner_token, HELLO)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["pollSeconds"] == 25
    runner = body["runner"]
    assert (runner["name"], runner["host"], runner["state"]) == (
        "build-box",
        "build-box.lan",
        "online",
    )
    assert runner["repos"] == [{"name": "app", "id": "0f3a9c", "branch": "main"}]
    assert runner["sessions"] == {"running": 0, "max": 3}
    assert [c["client"] for c in runner["clients"]] == ["claude-code", "codex"]
    assert [p.kinds for p in published] == [["runner_seen"]]
    assert published[0].header  # the roster is in the header
    # Said again (a restart): the same row, what it says now.
    post("hello", runner_token, {**HELLO, "maxSessions": 1})
    assert Runner.objects.get(board=board).max_sessions == 1


def test_hello_refuses_bad_input_naming_the_field(board, runner_token):
    response = post("hello", runner_token, {**HELLO, "maxSessions": 0})
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == "maxSessions"
    response = post("hello", runner_token, {**HELLO, "repos": [{"name": "app", "path": "/x"}]})
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == "repos.0.path"  # no paths


def test_a_poll_before_hello_is_told_to_say_hello(board, runner_token):
    response = post("poll", runner_token, {"wait": 0})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "runner_unregistered"


@pytest.mark.parametrize("who", ["agent", "runner", "member"])
def test_the_runners_are_read_by_agents_runners_and_members(
    board, runner_token, person_client, alice, who
):
    post("hello", runner_token, HELLO)
    if who == "member":
        response = person_client.get("/api/boards/team/runners")
    else:
        token = runner_token if who == "runner" else alice.token
        response = Client().get(
            "/api/boards/team/runners", headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 200, response.content
    [runner] = response.json()["runners"]
    assert runner["state"] == "online"
    assert {r["name"] for r in runner["repos"]} == {"app"}
    assert "path" not in json.dumps(runner)


def test_the_runners_are_not_read_by_an_outsider(board, runner_token, django_user_model):
    django_user_model.objects.create_user(username="out", password="pw-out-123")
    client = Client()
    client.login(username="out", password="pw-out-123")
    assert client.get("/api/boards/team/runners").status_code in (403, 404)
    assert Client().get("/api/boards/team/runners").status_code == 401


def test_a_runner_unseen_for_two_poll_periods_is_offline_and_recorded_gone_once(
    board, runner_token, settings, published, django_capture_on_commit_callbacks
):
    settings.KANBAN_RUNNER_POLL_SECONDS = 10
    post("hello", runner_token, HELLO)
    Runner.objects.update(last_seen=timezone.now() - timedelta(seconds=21))
    listed = Client().get(
        "/api/boards/team/runners", headers={"Authorization": f"Bearer {runner_token}"}
    )
    assert listed.json()["runners"][0]["state"] == "offline"
    with django_capture_on_commit_callbacks(execute=True):
        assert runs.runners_sweep() == 1
        assert runs.runners_sweep() == 0
    assert [p.kinds for p in published] == [["runner_gone"]]
    # Its next poll brings it back, recorded once.
    post("poll", runner_token, {"wait": 0})
    kinds = list(Event.objects.filter(board=board).values_list("kind", flat=True))
    assert kinds.count("runner_seen") == 2 and kinds.count("runner_gone") == 1


@pytest.mark.django_db(transaction=True)
async def test_a_held_poll_answers_within_a_second_of_a_command_sent(board, runner_token):
    await sync_to_async(post)("hello", runner_token, HELLO)
    polling = asyncio.ensure_future(apost("poll", runner_token))
    await asyncio.sleep(0.3)  # the poll is held: nothing is queued
    assert not polling.done()
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    command = await sync_to_async(runs.command_send)(
        board=board, runner="build-box", kind="ping", sent_by="alice"
    )
    status, body = await asyncio.wait_for(polling, 5)
    assert loop.time() - sent_at < 1.0
    assert status == 200
    assert [(c["id"], c["kind"]) for c in body["commands"]] == [(command.pk, "ping")]


@pytest.mark.django_db(transaction=True)
async def test_a_command_is_delivered_once_and_its_answer_recorded(board, runner_token):
    await sync_to_async(post)("hello", runner_token, HELLO)
    command = await sync_to_async(runs.command_send)(board=board, runner="build-box", kind="ping")
    _, first = await apost("poll", runner_token, {"wait": 0})
    _, second = await apost("poll", runner_token, {"wait": 0})
    assert [c["id"] for c in first["commands"]] == [command.pk]
    assert second["commands"] == []
    ack = {"id": command.pk, "ok": True, "report": {"pong": True}}
    status, _ = await apost("poll", runner_token, {"acks": [ack], "wait": 0})
    assert status == 200
    await apost("poll", runner_token, {"acks": [ack], "wait": 0})  # sent again: ignored
    saved = await sync_to_async(RunnerCommand.objects.get)(pk=command.pk)
    assert (saved.state, saved.answer) == ("done", {"pong": True})


def test_a_command_older_than_its_ttl_is_refused_as_stale_never_delivered(board, runner_token):
    post("hello", runner_token, HELLO)
    command = runs.command_send(board=board, runner="build-box", kind="ping", ttl=0)
    assert post("poll", runner_token, {"wait": 0}).json()["commands"] == []
    command.refresh_from_db()
    assert command.state == "stale" and command.delivered_at is None
    assert "did not take it within 0 s" in command.answer["why"]
    # Answering it anyway is refused, naming the field.
    response = post("poll", runner_token, {"acks": [{"id": command.pk, "ok": True}], "wait": 0})
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == "acks.0.id"


def test_a_refused_command_keeps_the_runners_reason(board, runner_token):
    post("hello", runner_token, HELLO)
    command = runs.command_send(board=board, runner="build-box", kind="teleport")
    post("poll", runner_token, {"wait": 0})
    ack = {"id": command.pk, "ok": False, "why": "this runner does not take 'teleport'"}
    post("poll", runner_token, {"acks": [ack], "wait": 0})
    command.refresh_from_db()
    assert (command.state, command.answer) == ("refused", {"why": ack["why"]})


def test_an_agent_pings_a_runner_and_reads_the_answer(board, runner_token, alice):
    post("hello", runner_token, HELLO)
    headers = {"Authorization": f"Bearer {alice.token}"}
    sent = Client().post("/api/boards/team/runners/build-box/ping", headers=headers)
    assert sent.status_code == 202, sent.content
    command = sent.json()["command"]
    assert command["state"] == "queued"
    [given] = post("poll", runner_token, {"wait": 0}).json()["commands"]
    post(
        "poll",
        runner_token,
        {"acks": [{"id": given["id"], "ok": True, "report": {"pong": True}}], "wait": 0},
    )
    read = Client().get(
        f"/api/boards/team/runners/build-box/commands/{command['id']}", headers=headers
    )
    assert read.json()["command"]["state"] == "done"
    assert read.json()["command"]["answer"] == {"pong": True}
    unknown = Client().post("/api/boards/team/runners/nobody/ping", headers=headers)
    assert unknown.status_code == 404
    assert "No runner called 'nobody'" in unknown.json()["error"]["message"]


def test_the_roster_shows_each_runner_on_one_line(board, runner_token, person_client, settings):
    post("hello", runner_token, HELLO)
    page = person_client.get("/boards/team/").content.decode()
    assert 'data-runner="build-box"' in page
    line = flat(page.split('data-runner="build-box"', 1)[1].split("</li>", 1)[0])
    for part in (
        "runner build-box",
        "online",
        "build-box.lan",
        "claude-code 2.1.332",
        "codex 0.171.0",
        "app",
        "0 of 3",
    ):
        assert part in line, (part, line)
    Runner.objects.update(last_seen=timezone.now() - timedelta(seconds=60))
    page = person_client.get("/boards/team/").content.decode()
    assert 'data-runner-state="offline"' in page

"""What agents' clients meet at the doors (issue 14): tool hints, strict schemas,
auth errors OAuth-aware clients can show, and no board probing without a token."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test import AsyncClient, Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from jsonschema import Draft202012Validator

from boards.agents import schemas
from boards.agents.pipeline import listed, lookup
from boards.core import auth, services
from boards.models import Agent, Task
from tests.core.test_input import _mcp_post
from tests.support.factories import make_board, make_task, make_token

WELL_KNOWN = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp/team/",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp/team",
    "/.well-known/openid-configuration",
    "/register",
]


@pytest.mark.parametrize("path", WELL_KNOWN)
def test_every_oauth_path_a_client_probes_answers_json(db, path):
    response = Client().get(path)
    assert response["Content-Type"] == "application/json"
    body = response.json()
    text = json.dumps(body)
    assert "static bearer tokens" in text
    if "protected-resource" in path:
        assert response.status_code == 200
        assert body["authorization_servers"] == []
    else:
        assert response.status_code == 404


def test_an_unknown_board_and_a_bad_token_look_the_same(board):
    def answer(slug: str) -> tuple[int, str]:
        response = Client().post(
            f"/api/boards/{slug}/tools/TaskList",
            data=b"{}",
            content_type="application/json",
            headers={"Authorization": "Bearer ak_guess"},
        )
        return response.status_code, response.json()["error"]["message"]

    assert answer("team") == answer("no-such-board") == (401, "Unknown token")


def test_every_tool_has_a_title_and_hints_and_a_strict_schema():
    definitions = {d["name"]: d for d in schemas.tool_definitions(listed())}
    assert set(definitions) == {t.name for t in listed()}
    read_only = {n for n, d in definitions.items() if d["annotations"]["readOnlyHint"]}
    destructive = {n for n, d in definitions.items() if d["annotations"]["destructiveHint"]}
    assert read_only == {"TaskGet", "TaskList", "TaskWatch"}
    assert destructive == {"TaskUpdate", "TaskBatch", "TaskReassign"}
    for name, definition in definitions.items():
        assert definition["title"]
        assert definition["annotations"]["openWorldHint"] is False
        schema = definition["input_schema"]
        Draft202012Validator.check_schema(schema)
        assert "discriminator" not in json.dumps(schema), name
        assert '"ge"' not in json.dumps(schema) and '"le"' not in json.dumps(schema), name


@pytest.mark.parametrize(
    ("tool", "field", "below", "lowest", "highest", "above"),
    [
        ("TaskWatch", "timeoutSeconds", -0.5, 0, 300, 300.5),
        ("TaskClaim", "leaseSeconds", 4, 5, 86_400, 86_401),
        ("TaskList", "limit", 0, 1, 500, 501),
    ],
)
def test_each_advertised_bound_is_the_one_the_server_checks(
    alice, tool, field, below, lowest, highest, above
):
    schema = lookup(tool).input_schema()["properties"][field]
    branches = schema.get("anyOf", [schema])
    bounded = next(b for b in branches if "minimum" in b)
    assert (bounded["minimum"], bounded["maximum"]) == (lowest, highest)
    alice.create("Watched")
    base = {"taskId": "1"} if tool == "TaskWatch" else {}
    for value in (below, above):
        reply = alice.call(tool, {**base, field: value})
        assert reply.status == 400, (field, value)
        assert reply.error["details"][0]["field"] == field
    if tool == "TaskClaim":
        assert alice.call(tool, {field: lowest}).status == 200
    elif tool == "TaskList":
        assert alice.call(tool, {field: highest}).status == 200


def test_the_default_watch_ends_before_a_60_second_client_timeout():
    default = lookup("TaskWatch").input_schema()["properties"]["timeoutSeconds"]["default"]
    assert default == 45 < 60


def test_the_http_tool_listing_carries_the_hints(board):
    token = make_token(board, "alice")
    response = Client().get("/api/boards/team/tools", headers={"Authorization": f"Bearer {token}"})
    tools = {t["name"]: t for t in response.json()["tools"]}
    assert tools["TaskGet"]["annotations"]["readOnlyHint"] is True
    assert tools["TaskBatch"]["title"] == "Apply many changes at once"


@pytest.mark.django_db(transaction=True)  # TaskWatch reads from its own thread
def test_every_answer_is_valid_under_its_tools_output_schema(alice, bob, board):
    """A scenario that calls every tool (and the answers' variants): each answer validates."""
    validators = {t.name: Draft202012Validator(t.output_schema()) for t in listed()}
    for validator in validators.values():
        Draft202012Validator.check_schema(validator.schema)
    answers: list[tuple[str, dict]] = []

    def call(agent, tool: str, body: dict) -> dict:
        reply = agent.call(tool, body)
        assert reply.status in (200, 202), (tool, reply.body)
        answers.append((tool, reply.body))
        return reply.body

    call(alice, "TaskCreate", {"subject": "Plan", "metadata": {"k": 1}})
    call(
        alice,
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "a", "subject": "Build", "blockedBy": ["1"]},
                {"op": "create", "subject": "Gate", "requiresApproval": True},
                {"op": "update", "taskId": "1", "notes": "n", "usage": {"costUsd": 0.1}},
            ]
        },
    )
    call(alice, "TaskClaim", {"taskId": "1"})
    call(alice, "TaskClaim", {"taskId": "3"})  # 202, awaiting approval
    call(alice, "TaskHeartbeat", {"taskId": "1", "usage": {"inputTokens": 5}})
    call(alice, "TaskHeartbeat", {})
    call(alice, "TaskUpdate", {"taskId": "1", "activeForm": "Planning"})
    call(alice, "TaskGet", {"taskId": "2"})
    call(alice, "TaskList", {})
    call(alice, "TaskList", {"detail": True, "limit": 1})
    call(alice, "TaskList", {"format": "text"})
    call(alice, "TaskWatch", {"taskId": "2", "timeoutSeconds": 0})
    call(alice, "TaskReassign", {"taskId": "1", "owner": "bob"})
    call(bob, "TaskUpdate", {"taskId": "1", "status": "completed", "result": "done"})
    call(bob, "TaskRequestApproval", {"taskId": "2", "reason": "touches prod"})
    services.message_send(board=board, sender="pat", recipient="alice", body="hi", task_id="2")
    call(alice, "InboxRead", {"ack": True})
    call(bob, "TaskClaim", {})  # claim-next: #2 waits for approval, nothing is ready
    call(bob, "TaskUpdate", {"taskId": "2", "status": "deleted"})
    assert {tool for tool, _ in answers} == {t.name for t in listed()}
    for tool, body in answers:
        errors = sorted(validators[tool].iter_errors(body), key=str)
        assert not errors, (tool, [e.message for e in errors[:3]], body)


def test_the_listings_carry_output_schemas(board):
    token = make_token(board, "alice")
    listed = Client().get("/api/boards/team/tools", headers={"Authorization": f"Bearer {token}"})
    for tool in listed.json()["tools"]:
        assert tool["output_schema"] == lookup(tool["name"]).output_schema()


# -- who calls (read) and that they called (written), at every door -------------------------


def _headers(token: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **more}


@pytest.mark.parametrize("team", [False, True], ids=["bound", "team"])
def test_authenticate_reads_only(board, team):
    raw = make_token(board, "crew" if team else "alice", team=team)
    make_task(board, "Held")
    services.task_claim(board=board, agent="alice", task_id="1", lease_seconds=60)
    soon = timezone.now() + timedelta(seconds=3)
    Task.objects.filter(board=board).update(lease_expires_at=soon)
    roster = list(Agent.objects.values_list("name", "last_seen"))
    with CaptureQueriesContext(connection) as queries:
        caller = auth.authenticate(_headers(raw, **{"X-Agent": "alice"} if team else {}), "team")
    assert caller.agent == "alice"
    assert queries.captured_queries  # it did read the token
    assert all(q["sql"].lstrip().upper().startswith("SELECT") for q in queries.captured_queries)
    assert list(Agent.objects.values_list("name", "last_seen")) == roster
    assert Task.objects.get(board=board, number=1).lease_expires_at == soon


async def _through_http(token: str) -> None:
    response = await AsyncClient().post(
        "/api/boards/team/tools/TaskList",
        data=b"{}",
        content_type="application/json",
        headers=_headers(token),
    )
    assert response.status_code == 200, response.content


async def _through_mcp(token: str) -> None:
    call = {"name": "TaskList", "arguments": {}}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    status, answer = await _mcp_post("team", token, json.dumps(rpc).encode())
    assert status == 200, answer
    assert not answer["result"]["isError"]


async def _through_hook(token: str) -> None:
    event = {
        "hook_event_name": "SessionStart",
        "session_id": "s1",
        "cwd": "/w",
        "source": "startup",
    }
    response = await AsyncClient().post(
        "/api/boards/team/hooks/claude-code",
        data=json.dumps(event),
        content_type="application/json",
        headers=_headers(token),
    )
    assert response.status_code == 200, response.content


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("door", [_through_http, _through_mcp, _through_hook])
async def test_a_call_through_each_door_marks_the_agent_seen_and_renews_its_leases(door):
    def arrange() -> tuple[str, datetime]:
        board = make_board()
        token = make_token(board, "alice")
        make_task(board, "Held")
        services.task_claim(board=board, agent="alice", task_id="1", lease_seconds=600)
        soon = timezone.now() + timedelta(seconds=3)
        Task.objects.filter(board=board).update(lease_expires_at=soon)
        Agent.objects.filter(board=board).update(last_seen=timezone.now() - timedelta(hours=1))
        return token, soon

    token, soon = await database_sync_to_async(arrange)()
    since = timezone.now()
    await door(token)

    def seen_and_lease() -> tuple[datetime, datetime]:
        seen = Agent.objects.get(board__slug="team", name="alice").last_seen
        return seen, Task.objects.get(board__slug="team", number=1).lease_expires_at

    seen, lease = await database_sync_to_async(seen_and_lease)()
    assert seen >= since
    assert lease >= since + timedelta(seconds=590) > soon


@pytest.mark.parametrize(
    "path",
    [
        "/api/boards/team/tools/TaskList",
        *(f"/api/boards/team/hooks/{name}" for name in ("claude-code", "codex", "gemini")),
    ],
)
@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_the_tool_and_hook_doors_answer_a_wrong_method_405_with_allow(board, path, method):
    response = getattr(Client(), method)(path)
    assert response.status_code == 405, (path, method, response.content[:200])
    assert response["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"

"""Bad input gets a clear 4xx with the error shape and changes nothing (SPEC §4 Errors)."""

import json

import pytest
from django.test import Client

from boards.core import services
from boards.models import Event, Task


@pytest.fixture
def state(board):
    def snapshot():
        return (
            list(
                Task.objects.order_by("pk").values_list("number", "subject", "version", "metadata")
            ),
            Event.objects.count(),
        )

    return snapshot


def assert_error(reply, status, code=None):
    assert reply.status == status, reply.body
    assert set(reply.body) == {"error"}
    assert isinstance(reply.error["message"], str) and reply.error["message"]
    if code:
        assert reply.error["code"] == code


@pytest.mark.parametrize(
    "raw",
    [b"{", b"{'subject': 'x'}", b"\xff\xfe", b"nan", b'{"subject": "x",}'],
)
def test_malformed_json_is_400(alice, state, raw):
    before = state()
    assert_error(alice.call("TaskCreate", raw=raw), 400)
    assert state() == before


@pytest.mark.parametrize("raw", [b"[]", b'["subject"]', b"42", b'"TaskCreate"', b"null"])
def test_a_body_that_is_not_an_object_is_400(alice, state, raw):
    before = state()
    assert_error(alice.call("TaskCreate", raw=raw), 400, "invalid_input")
    assert state() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subject": 5}, "subject"),
        ({"subject": ""}, "subject"),
        ({"subject": "   "}, "subject"),
        ({"subject": "x", "blockedBy": "1"}, "blockedBy"),
        ({"subject": "x", "blockedBy": ["abc"]}, "blockedBy.0"),
        ({"subject": "x", "requiresApproval": "yes"}, "requiresApproval"),
        ({"subject": "x", "metadata": []}, "metadata"),
        ({"subject": "x", "metadata": {"k": {"nested": 1}}}, "metadata.k"),
        ({"subject": "x", "metadata": {"k": [1, 2]}}, "metadata.k"),
        ({"subject": "x", "surprise": 1}, "surprise"),
        ({"subject": "x" * 201}, "subject"),
        ({"subject": "x", "activeForm": "y" * 201}, "activeForm"),
        ({}, "subject"),
    ],
)
def test_wrong_fields_are_named(alice, state, body, field):
    before = state()
    reply = alice.call("TaskCreate", body)
    assert_error(reply, 400, "invalid_input")
    assert any(d["field"].startswith(field) for d in reply.error["details"]), reply.error
    assert state() == before


def test_every_wrong_field_is_named_at_once(alice):
    reply = alice.call("TaskUpdate", {"taskId": "x", "status": "done", "expectedVersion": "1"})
    fields = {d["field"] for d in reply.error["details"]}
    assert {"taskId", "status", "expectedVersion"} <= fields


def test_deeply_nested_metadata_is_400(alice, state):
    before = state()
    deep = "[" * 5000 + "]" * 5000
    raw = ('{"subject": "x", "metadata": {"k": ' + deep + "}}").encode()
    assert_error(alice.call("TaskCreate", raw=raw), 400)
    very_deep = b"[" * 200_000 + b"]" * 200_000
    assert alice.call("TaskCreate", raw=very_deep).status in (400, 413)
    assert state() == before


def test_oversize_body_is_413(alice, state, settings):
    before = state()
    body = {"subject": "x", "description": "y" * (settings.KANBAN_MAX_BODY_BYTES + 10)}
    assert_error(alice.call("TaskCreate", body), 413, "payload_too_large")
    assert state() == before


def test_overlong_metadata_values_and_too_many_keys_are_400(alice):
    assert alice.call("TaskCreate", {"subject": "x", "metadata": {"k": "v" * 10_001}}).status == 400
    many = {f"k{i}": i for i in range(101)}
    assert alice.call("TaskCreate", {"subject": "x", "metadata": many}).status == 400


def test_metadata_merge_beyond_the_key_limit_is_400(alice):
    alice.create("x", metadata={f"a{i}": i for i in range(60)})
    reply = alice.call("TaskUpdate", {"taskId": "1", "metadata": {f"b{i}": i for i in range(60)}})
    assert_error(reply, 400)
    assert len(Task.objects.get(number=1).metadata) == 60


def test_unknown_tool_is_404(alice):
    assert_error(alice.call("TaskExplode", {}), 404, "unknown_tool")


def test_unknown_board_is_404(db, alice):
    response = Client().post(
        "/api/boards/nope/tools/TaskList",
        data=b"{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice.token}"},
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "board_not_found"


def test_get_on_a_tool_is_405_with_the_error_shape(alice):
    response = alice.client.get(f"/api/boards/{alice.board.slug}/tools/TaskList")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer ", "Basic abc", "Bearer ak_not_a_real_token", "token"],
)
def test_missing_or_bad_token_is_401(board, state, header):
    before = state()
    headers = {"Authorization": header} if header is not None else {}
    response = Client().post(
        "/api/boards/team/tools/TaskCreate",
        data=json.dumps({"subject": "x"}),
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="kanban"')
    # RFC 6750: name the error only when credentials were sent.
    assert ('error="invalid_token"' in challenge) == bool(header and header.strip())
    assert state() == before


def test_token_of_another_board_is_403(board, agent_factory, other_board, state):
    stranger = agent_factory("mallory", on=other_board)
    before = state()
    response = Client().post(
        "/api/boards/team/tools/TaskCreate",
        data=json.dumps({"subject": "x"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {stranger.token}"},
    )
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "This token belongs to another board"
    assert state() == before


def test_revoked_token_is_403(alice, board, state):
    token = board.tokens.get(agent="alice")
    services.token_revoke(board=board, token_id=token.pk)
    before = state()
    assert_error(alice.call("TaskCreate", {"subject": "x"}), 403, "token_revoked")
    assert state() == before


def test_team_token_names_the_agent_in_x_agent(board):
    token = services.token_issue(board=board, team=True)
    client = Client()

    def create(headers):
        return client.post(
            "/api/boards/team/tools/TaskCreate",
            data=json.dumps({"subject": "x"}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}", **headers},
        )

    missing = create({})
    assert missing.status_code == 400
    assert missing.json()["error"]["details"][0]["field"] == "X-Agent"
    made = create({"X-Agent": "sub-agent-7"})
    assert made.status_code == 200
    assert made.json()["task"]["createdBy"] == "sub-agent-7"


def test_only_the_token_hash_is_stored(board):
    token = services.token_issue(board=board, agent="alice")
    stored = board.tokens.get()
    assert token not in (stored.token_hash, stored.prefix)
    assert len(stored.token_hash) == 64


@pytest.mark.parametrize("task_id", ["0", "-1", "1e3", "999999999999", "", None, True, [], {}])
def test_odd_task_ids_are_4xx_never_500(alice, task_id):
    alice.create("x")
    reply = alice.call("TaskGet", {"taskId": task_id})
    assert reply.status in (400, 404)


def test_watch_timeout_above_300_is_400(alice):
    alice.create("x")
    reply = alice.call("TaskWatch", {"taskId": "1", "timeoutSeconds": 301})
    assert_error(reply, 400)
    assert reply.error["details"][0]["field"] == "timeoutSeconds"

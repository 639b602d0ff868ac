"""Half a surrogate pair is no text: a 400 naming its field at every door (the hook door,
the tool API, MCP), and no 500 from a person's form; a whole pair is text."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from boards.core import services
from boards.models import ClientSession, Task
from tests.core.test_input import _mcp_post
from tests.support.factories import make_token

LONE = b'"\\ud800"'  # JSON for a string holding half of a surrogate pair


CWD = "/home/dev/project"


def _hook(token: str, body: bytes, **headers: str) -> tuple[int, dict]:
    response = Client().post(
        "/api/boards/team/hooks/claude-code",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", **headers},
    )
    return response.status_code, response.json()


def _event(name: str, session: str = "s1", **fields: object) -> dict:
    return {"hook_event_name": name, "session_id": session, "cwd": CWD, **fields}


def _with_lone(event: dict, placeholder: str = "LONE") -> bytes:
    return json.dumps(event).encode().replace(f'"{placeholder}"'.encode(), LONE)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (_event("SessionStart", source="startup", model="LONE"), "model"),
        (
            _event("PreToolUse", tool_name="Bash", tool_input={"command": "LONE"}),
            "tool_input.command",
        ),
        (_event("UserPromptSubmit", prompt="ok", LONE="key"), "\\ud800"),
    ],
    ids=["model", "tool-input", "a-key"],
)
def test_the_hook_door_refuses_half_a_surrogate_pair_naming_the_field(board, event, field):
    token = make_token(board, "claude")
    status, answer = _hook(token, _with_lone(event))
    assert status == 400
    assert answer["error"]["details"][0]["field"] == field
    assert "surrogate" in answer["error"]["message"]
    assert not ClientSession.objects.filter(board=board).exists()


def test_a_surrogate_pair_that_is_whole_is_text(board):
    token = make_token(board, "claude")
    body = json.dumps(_event("SessionStart", source="startup", model="claude 😀"))
    assert "\\ud83d\\ude00" in body  # json.dumps writes the pair as two escapes
    assert _hook(token, body.encode())[0] == 200
    assert ClientSession.objects.get(board=board).model == "claude 😀"


def test_an_encoded_surrogate_is_refused_too(board):
    token = make_token(board, "claude")
    body = json.dumps(_event("SessionStart", model="LONE")).encode()
    status, answer = _hook(token, body.replace(b'"LONE"', b'"\xed\xa0\x80"'))
    assert status == 400
    assert answer["error"]["details"][0]["field"] == "model"


@pytest.mark.parametrize(
    ("tool", "body", "field"),
    [
        ("TaskCreate", b'{"subject": ' + LONE + b"}", "subject"),
        ("TaskCreate", b'{"subject": "ok", "metadata": {' + LONE + b": 1}}", "metadata.\\ud800"),
        (
            "TaskBatch",
            b'{"ops": [{"op": "create", "subject": "a"}, {"op": "create", "subject": '
            + LONE
            + b"}]}",
            "ops.1.subject",
        ),
        ("board_tasks_create", b'{"title": ' + LONE + b"}", "title"),
    ],
    ids=["subject", "metadata-key", "batch", "seed002"],
)
def test_the_tool_api_refuses_half_a_surrogate_pair_naming_the_field(alice, tool, body, field):
    reply = alice.call(tool, raw=body)
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == field
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_mcp_refuses_half_a_surrogate_pair_as_a_parse_error():
    board = await database_sync_to_async(services.board_create)(slug="lone")
    token = await database_sync_to_async(make_token)(board, "alice")
    call = b'{"name": "TaskCreate", "arguments": {"subject": ' + LONE + b"}}"
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + call + b"}"
    status, answer = await _mcp_post("lone", token, rpc)
    assert status == 400
    assert answer["error"]["code"] == -32700
    assert "surrogate" in answer["error"]["message"] or "hex escape" in answer["error"]["message"]
    assert not await database_sync_to_async(Task.objects.exists)()


def test_a_form_with_bytes_that_are_no_text_is_no_500(board, person_client):
    # A browser sends UTF-8; a hand-made post may not: Django reads it with replacements.
    response = person_client.post(
        "/boards/team/messages/",
        data=b"recipient=alice&body=%ED%A0%80",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code < 500

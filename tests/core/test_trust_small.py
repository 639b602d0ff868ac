"""The smaller trust items of issue 39: half a surrogate pair is a 400 naming its field
at every door; a username that passes for another is taken; an over-long request line is
answered 414; and the hook door's own items (the held-call cap, session ids with dashes,
its own size cap), whose fix the lead merges."""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from boards.core import services
from boards.core.errors import Conflict
from boards.core.limits import REQUEST_TARGET_MAX
from boards.models import Board, ClientSession, Invite, Task, ToolCall
from devtools.liveserver import Cluster
from kanban.asgi import application
from tests.clients.test_hooks import hook, send
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


# -- half a surrogate pair --------------------------------------------------------------------


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


# -- usernames --------------------------------------------------------------------------------


def _invite(board: Board) -> str:
    return services.invite_create(board=board, role="viewer", actor="pat")[1]


def _sign_up(token: str, username: str) -> tuple[int, str]:
    password = "a-long-unusual-passphrase-42"
    response = Client().post(
        f"/invite/{token}/",
        {"username": username, "password1": password, "password2": password},
    )
    return response.status_code, response.content.decode()


@pytest.mark.parametrize(
    "spelling",
    ["ａｄｍｉｎ", "ᴬdmin", "ADMIN", "аdmin", "αdmin", "ADMİN"],
    ids=["fullwidth", "modifier-letter", "upper", "cyrillic-a", "greek-alpha", "dotted-I"],
)
def test_a_username_that_passes_for_another_is_taken(board, django_user_model, spelling):
    django_user_model.objects.create_superuser("admin", password="pw-admin-123")
    token = _invite(board)
    status, page = _sign_up(token, spelling)
    assert status == 400
    assert "is taken, or looks like one that is" in page
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["admin"]
    # The service says the same to any other door (a race past the form, a command).
    with pytest.raises(Conflict) as taken:
        services.invite_accept(token=token, username=spelling, password="pw-x-123456789")
    assert taken.value.code == "username_taken"
    assert Invite.objects.get(board=board).used_at is None


def test_a_username_of_its_own_signs_up_as_typed_in_nfkc(board, django_user_model):
    django_user_model.objects.create_user("admin", password="pw-admin-123")
    status, _ = _sign_up(_invite(board), "ａｌｉｃｅ")
    assert status == 302
    assert get_user_model().objects.filter(username="alice").exists()


def test_the_username_key_folds_what_looks_alike():
    from boards.core.services.members import username_key

    assert {username_key(n) for n in ("admin", "ａｄｍｉｎ", "ᴬdmin", "аdmіn", "ADMİN")} == {
        "admin"
    }
    assert username_key("alice") != username_key("alice2")
    assert username_key("José") != username_key("Jose")  # accents are letters of their own


# -- 414 --------------------------------------------------------------------------------------


async def test_the_asgi_edge_answers_a_long_url_414():
    query = b"q=" + b"a" * 70_000
    communicator = HttpCommunicator(
        application, "GET", "/boards/?" + query.decode(), headers=[(b"host", b"localhost")]
    )
    response = await communicator.get_response(timeout=10)
    assert response["status"] == 414
    assert json.loads(response["body"])["error"]["code"] == "uri_too_long"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = Cluster(tmp_path_factory.mktemp("trust-small"), backend="sqlite")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def _raw(base: str, request: bytes) -> bytes:
    port = urllib.parse.urlsplit(base).port
    with socket.create_connection(("127.0.0.1", port or 0), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except OSError:
            pass
    return answer


@pytest.mark.slow  # a live daphne
@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /healthz?q=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, None),
        (
            b"GET /healthz?q=" + b"a" * (REQUEST_TARGET_MAX + 10) + b" HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
            414,
            "uri_too_long",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n",
            431,
            "headers_too_large",
        ),
    ],
    ids=["70000-characters", "just-over-the-limit", "a-long-header"],
)
def test_daphne_answers_an_over_long_request_line(live, request_bytes, status, code):
    answer = _raw(live, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split()[1] == str(status).encode(), answer[:200]
    assert json.loads(body)["error"]["code"] == (code or "uri_too_long")
    # The server goes on answering.
    plain = _raw(live, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert plain.split()[1] == b"200"


# -- the hook door's own items: written here, fixed by the lead in boards/clients ------------


def test_a_call_over_the_held_cap_is_denied_and_never_sits_on_the_board(board, settings):
    settings.KANBAN_WATCHES_PER_TOKEN = 0  # every held call is over the cap
    token = make_token(board, "claude")
    push = _event(
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": "git push --force origin main"},
        tool_use_id="tu-1",
    )
    status, answer = _hook(token, json.dumps(push).encode())
    assert status == 200
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    # Nothing waits for a person: there is no approval anyone could give for nothing.
    assert not ToolCall.objects.filter(board=board, state="requested").exists()


def test_a_team_token_names_a_session_with_a_uuid_claude_and_its_first_eight(board):
    team = make_token(board, team=True)
    session = "123e4567-e89b-12d3-a456-426614174000"
    status, _ = _hook(team, json.dumps(_event("SessionStart", session, source="startup")).encode())
    assert status == 200
    assert ClientSession.objects.get(board=board).agent == "claude-123e4567"


def test_a_write_over_the_tool_apis_body_cap_reaches_the_gate(board, settings):
    token = make_token(board, "claude")
    content = "x" * (settings.KANBAN_MAX_BODY_BYTES + 44_000)  # a 300 KB file
    write = _event(
        "PreToolUse",
        tool_name="Write",
        tool_input={"file_path": f"{CWD}/big.txt", "content": content},
        tool_use_id="tu-1",
    )
    status, answer = _hook(token, json.dumps(write).encode())
    assert status == 200, answer
    assert answer.get("hookSpecificOutput", {}).get("permissionDecision", "allow") == "allow"


def test_an_agents_open_sessions_are_capped_and_an_ended_one_frees_its_place(board, settings):
    settings.KANBAN_SESSIONS_PER_AGENT = 2
    token = make_token(board, "claude")
    for n in range(2):
        assert send(token, hook("SessionStart", session=f"s-{n}"))[0] == 200
    status, body = send(token, hook("SessionStart", session="s-2"))
    assert (status, body["error"]["code"]) == (409, "too_many_sessions")
    assert not ClientSession.objects.filter(board=board, session_id="s-2").exists()
    assert send(token, hook("SessionEnd", session="s-0"))[0] == 200
    assert send(token, hook("SessionStart", session="s-2"))[0] == 200

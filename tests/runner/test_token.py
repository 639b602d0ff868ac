"""A runner's token (SPEC §16): it registers its runner, reports its presence and its own
runs, and every other door refuses it with a 403 that says why."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from boards.agents.mcp import mcp_app
from boards.clients import sessions
from boards.core import services
from boards.core.services.agents import known_name
from boards.models import AgentToken, CallState, ToolCall, hash_token
from tests.support.factories import make_task, make_token

RUNNER_SAYS = "This is a runner's token"


def hook(name: str, **fields) -> dict:
    """A Claude Code hook event of one session."""
    return {"hook_event_name": name, "session_id": "s-1", "cwd": "/home/dev/app", **fields}


@pytest.fixture
def runner_token(board) -> str:
    return services.token_issue(board=board, agent="build-box", runner=True)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def post(path: str, token: str, body: object = None):
    return Client().post(
        path, data=json.dumps(body or {}), content_type="application/json", headers=bearer(token)
    )


def refused_as_runner(response) -> None:
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "wrong_scope"
    assert error["message"].startswith(RUNNER_SAYS)


def test_issuetoken_runner_issues_a_runner_scoped_token_in_both_spellings(board):
    for args in (("team", "--runner", "build-box"), ("team", "laptop", "--runner")):
        out = io.StringIO()
        call_command("issuetoken", *args, stdout=out)
        token = AgentToken.objects.get(token_hash=hash_token(out.getvalue().strip()))
        assert token.scope == "runner"
        assert not token.is_team and not token.orchestrator
    assert set(AgentToken.objects.filter(scope="runner").values_list("agent", flat=True)) == {
        "build-box",
        "laptop",
    }


def test_issuetoken_refuses_a_runner_named_twice_or_with_a_bad_name(board):
    with pytest.raises(CommandError, match="Name the runner once"):
        call_command("issuetoken", "team", "a", "--runner", "b", stdout=io.StringIO())
    with pytest.raises(CommandError, match="runner: letters, digits"):
        call_command("issuetoken", "team", "--runner", "bad/name", stdout=io.StringIO())
    with pytest.raises(CommandError, match="runner: a runner's token is neither"):
        call_command("issuetoken", "team", "--runner", "x", "--team", stdout=io.StringIO())


@pytest.mark.parametrize("tool", ["TaskList", "TaskClaim", "TaskCreate", "TaskUpdate"])
def test_the_tool_api_refuses_a_runner_token(board, runner_token, tool):
    make_task(board)
    refused_as_runner(post(f"/api/boards/team/tools/{tool}", runner_token, {"taskId": "1"}))


def test_the_hook_door_refuses_a_runner_token_and_records_no_session(board, runner_token):
    response = post("/api/boards/team/hooks/claude-code", runner_token, hook("SessionStart"))
    refused_as_runner(response)
    assert not board.client_sessions.exists()


@pytest.mark.django_db(transaction=True)
async def test_mcp_refuses_a_runner_token(board, runner_token):
    sent: list[dict] = []
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp/team/",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {runner_token}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
        "query_string": b"",
        "server": ("testserver", 80),
        "scheme": "http",
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await mcp_app(scope, receive, send)
    assert sent[0]["status"] == 403
    error = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]
    assert error["code"] == "wrong_scope" and error["message"].startswith(RUNNER_SAYS)


@pytest.mark.parametrize("path", ["metrics", "agents", "events"])
def test_the_board_reads_refuse_a_runner_token(board, runner_token, path):
    refused_as_runner(Client().get(f"/api/boards/team/{path}", headers=bearer(runner_token)))


def test_a_runner_token_cannot_approve_a_held_call_or_ping_a_runner(board, runner_token):
    sessions.session_event(
        board=board,
        agent="claude",
        event=hook("PreToolUse", tool_name="Bash", tool_input={"command": "git push origin"}),
    )
    call = ToolCall.objects.get()
    response = Client().post(f"/boards/team/calls/{call.pk}/approve/", headers=bearer(runner_token))
    assert response.status_code in (302, 403)  # people's pages: a token is no login
    assert ToolCall.objects.get().state == CallState.REQUESTED
    post("/api/boards/team/runners/hello", runner_token)
    refused_as_runner(post("/api/boards/team/runners/build-box/ping", runner_token))


def test_the_runners_doors_refuse_agent_and_admin_tokens(board):
    agent = make_token(board, "alice")
    admin = services.token_issue(board=board, admin=True)
    for token in (agent, admin):
        for door in ("hello", "poll"):
            response = post(f"/api/boards/team/runners/{door}", token)
            assert response.status_code == 403
            error = response.json()["error"]
            assert error["code"] == "wrong_scope"
            assert "this door is the runners'" in error["message"]


def test_a_runner_token_may_only_say_hello_as_its_own_runner(board, runner_token):
    response = post("/api/boards/team/runners/hello", runner_token, {"name": "laptop"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "wrong_runner"
    assert "--name 'build-box'" in response.json()["error"]["message"]


def test_a_runner_is_no_agent_the_board_knows_by_name(board, runner_token):
    make_token(board, "alice")
    assert known_name(board, "alice") == "alice"
    assert known_name(board, "build-box") is None  # nothing is sent to it, nor owned by it

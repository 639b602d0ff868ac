"""The MCP server at ``/mcp/<slug>/``, driven by the official SDK's own client.

A real daphne process serves ``kanban.asgi:application`` on its own SQLite file
(``devtools.liveserver``, as for the browser tests), so the MCP route, the ASGI
router, the token check and the SDK's transport are all exercised as an MCP client
meets them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp import Client, ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from boards.agents.pipeline import listed, lookup
from devtools.liveserver import Cluster

# One server for the module (``live``): with -n, its tests run on one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_mcp")]

# Boards and tokens, made in the server's database by one ``manage.py shell`` run.
SETUP = """
import io, json
from django.core.management import call_command
from boards.core import services
from boards.models import AgentToken, hash_token

def run(*args, **options):
    out = io.StringIO()
    call_command(*args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]

for slug in ("tools", "flow", "errors", "team", "other", "modern", "res", "wait"):
    run("createboard", slug)
tokens = {
    slug: run("issuetoken", slug, "alice")
    for slug in ("tools", "flow", "errors", "other", "modern", "res", "wait")
}
tokens["team"] = run("issuetoken", "team", "agents", team=True)
tokens["revoked"] = run("issuetoken", "errors", "mallory")
run("issuetoken", "errors", "bob")  # an agent work can be reassigned to
revoked = AgentToken.objects.get(token_hash=hash_token(tokens["revoked"]))
services.token_revoke(board=revoked.board, token_id=revoked.pk)
print(json.dumps(tokens))
"""


@dataclass
class Live:
    base_url: str
    tokens: dict[str, str]
    cluster: Cluster

    def url(self, slug: str, *, slash: bool = True) -> str:
        return f"{self.base_url}/mcp/{slug}{'/' if slash else ''}"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    # Progress every 0.3 s, so a watch of a few seconds shows several.
    cluster = Cluster(tmp_path_factory.mktemp("mcp"), env={"KANBAN_MCP_PROGRESS_SECONDS": "0.3"})
    try:
        tokens = json.loads(cluster.manage("shell", "-c", SETUP).splitlines()[-1])
        base = cluster.start()
        yield Live(base, tokens, cluster)
    finally:
        cluster.stop()
    log = cluster.log(base)
    assert "Traceback" not in log, log


def _http(token: str | None = None, **headers: str) -> httpx2.AsyncClient:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0))


@asynccontextmanager
async def session(url: str, token: str, **headers: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session (the handshake era, as Claude Code speaks it)."""
    async with (
        _http(token, **headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def payload(result: types.CallToolResult, *, error: bool = False) -> dict[str, Any]:
    """The answer JSON of a tool result: its one text block, also its structured content."""
    assert result.is_error is error, result
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    body = json.loads(block.text)
    # A refusal is text only: its structured content would not match the output schema.
    assert result.structured_content == (None if error else body)
    return body


async def call(client: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = payload(await client.call_tool(tool, arguments))
    assert body["unreadMessages"] == 0
    return body


async def call_error(client: ClientSession, tool: str, arguments: dict[str, Any]) -> dict:
    return payload(await client.call_tool(tool, arguments), error=True)["error"]


async def test_initialize_and_list_tools(live: Live) -> None:
    async with (
        _http(live.tokens["tools"]) as http,
        streamable_http_client(live.url("tools"), http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        init = await client.initialize()
        assert init.protocol_version == LATEST_HANDSHAKE_VERSION
        assert init.server_info.name == "agent-kanban"
        assert init.capabilities.tools is not None
        assert "'alice'" in (init.instructions or "")

        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == [t.name for t in listed()]
    assert len(tools) == 11
    for tool in tools:
        declared = lookup(tool.name, seed_dialects=False)
        hints = declared.hints
        assert hints is not None
        assert tool.description == declared.description
        assert tool.input_schema == declared.input_schema()
        # The SDK's client validates each structured answer against it (every call below).
        assert tool.output_schema == declared.output_schema()
        assert tool.title == hints.title
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is hints.read_only
        assert tool.annotations.destructive_hint is hints.destructive
        assert tool.annotations.open_world_hint is False


async def test_create_claim_next_complete(live: Live) -> None:
    # Without the trailing slash, which clients configured by hand often drop.
    async with session(live.url("flow", slash=False), live.tokens["flow"]) as client:
        first = await call(client, "TaskCreate", {"subject": "Write the schema"})
        assert first["task"]["id"] == "1"
        assert first["task"]["createdBy"] == "alice"
        await call(client, "TaskCreate", {"subject": "Write tests", "blockedBy": ["1"]})
        await call(client, "TaskCreate", {"subject": "Docs"})

        # No taskId: the lowest-numbered ready task (#2 is blocked by #1).
        claimed = await call(client, "TaskClaim", {})
        assert claimed["task"]["id"] == "1"
        assert claimed["task"]["status"] == "in_progress"
        assert claimed["task"]["owner"] == "alice"

        done = await call(
            client, "TaskUpdate", {"taskId": "1", "status": "completed", "result": "Merged"}
        )
        assert {"type": "auto_unblock", "taskId": "2"} in done["changes"]

        task = (await call(client, "TaskGet", {"taskId": "1"}))["task"]
        assert (task["status"], task["owner"], task["result"]) == ("completed", "alice", "Merged")
        assert task["blocks"] == ["2"]
        # TaskWatch (the async handler): a finished task answers at once...
        watched = await call(client, "TaskWatch", {"taskId": "1"})
        assert (watched["timedOut"], watched["task"]["status"]) == (False, "completed")
        # ... an open one at the timeout.
        waited = await call(client, "TaskWatch", {"taskId": "3", "timeoutSeconds": 0.2})
        assert (waited["timedOut"], waited["task"]["status"]) == (True, "pending")

        # #2 is ready now and comes before #3.
        assert (await call(client, "TaskClaim", {}))["task"]["id"] == "2"
        listed = await call(client, "TaskList", {"format": "text"})
        assert listed["counts"]["completed"] == 1
        assert listed["counts"]["in_progress"] == 1


async def test_a_watch_with_a_progress_token_is_kept_alive_by_progress(live: Live) -> None:
    """A client that resets its timeout on progress waits out a watch longer than it."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with session(live.url("wait"), live.tokens["wait"]) as client:
        await call(client, "TaskCreate", {"subject": "Nobody touches this"})
        result = await client.call_tool(
            "TaskWatch",
            {"taskId": "1", "timeoutSeconds": 1.5},
            progress_callback=on_progress,
        )
        body = payload(result)
        # Without a progress token, the same watch is one JSON answer and no progress.
        quiet = await call(client, "TaskWatch", {"taskId": "1", "timeoutSeconds": 0.4})
    assert (body["timedOut"], body["task"]["status"]) == (True, "pending")
    assert quiet["timedOut"] is True
    assert 3 <= len(seen) <= 6, seen
    waited = [progress for progress, _, _ in seen]
    assert waited == sorted(waited) and 0 < waited[0] < 1.5
    assert {total for _, total, _ in seen} == {1.5}
    assert all(message and "task 1" in message for _, _, message in seen)


async def test_a_message_from_a_person_during_a_watch_is_told_in_its_progress(
    live: Live,
) -> None:
    """No stream carries resource notifications here: the progress message counts the inbox."""
    messages: list[str] = []
    unread = "; 1 unread message (InboxRead)"

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    send = (
        "from boards.core import services\n"
        "from boards.models import Board\n"
        "services.message_send(board=Board.objects.get(slug='wait'), sender='pat', "
        "recipient='alice', body='Stop after this one')"
    )
    async with session(live.url("wait"), live.tokens["wait"]) as client:
        created = await call(client, "TaskCreate", {"subject": "Long job"})
        arguments = {"taskId": created["task"]["id"], "timeoutSeconds": 6}
        watch = asyncio.create_task(
            client.call_tool("TaskWatch", arguments, progress_callback=on_progress)
        )
        await asyncio.to_thread(live.cluster.manage, "shell", "-c", send)
        told = len(messages)

        async def told_of_it() -> None:
            while not (len(messages) > told and messages[-1].endswith(unread)):
                await asyncio.sleep(0.05)

        await asyncio.wait_for(told_of_it(), timeout=5)
        # Told: the change ends the watch now instead of at its timeout.
        ended = {"taskId": arguments["taskId"], "status": "completed"}
        assert payload(await client.call_tool("TaskUpdate", ended))["unreadMessages"] == 1
        result = await watch
        await call(client, "InboxRead", {"ack": True})
    assert "unread" not in messages[0]
    assert payload(result)["timedOut"] is False
    assert payload(result)["unreadMessages"] == 1


async def test_only_a_watch_asking_for_progress_is_answered_as_a_stream(live: Live) -> None:
    url, token = live.url("wait"), live.tokens["wait"]
    async with session(url, token) as client:
        created = await call(client, "TaskCreate", {"subject": "Watched over plain HTTP"})
    accept = {"Accept": "application/json, text/event-stream"}
    rpc = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    progress = {"_meta": {"progressToken": "w1"}}
    arguments = {"taskId": created["task"]["id"], "timeoutSeconds": 0.7}
    watch = {"name": "TaskWatch", "arguments": arguments}
    async with _http(token, **accept) as http:
        await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        streamed = await http.post(url, json={**rpc, "params": {**watch, **progress}})
        plain = await http.post(url, json={**rpc, "params": watch})
        listed = await http.post(url, json={**rpc, "method": "tools/list", "params": progress})
    async with _http(token, Accept="application/json") as http:
        json_only = await http.post(url, json={**rpc, "params": {**watch, **progress}})

    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line.removeprefix("data:"))
        for line in streamed.text.splitlines()
        if line.startswith("data:") and line.strip() != "data:"
    ]
    assert [e.get("method") for e in events[:-1]] == ["notifications/progress"] * (len(events) - 1)
    assert len(events) >= 2
    assert events[0]["params"]["progressToken"] == "w1"
    assert events[-1]["id"] == 7 and events[-1]["result"]["structuredContent"]["timedOut"]
    for answer in (plain, listed, json_only):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["id"] == 7


async def test_refusals_are_tool_errors_with_the_api_error_json(live: Live) -> None:
    async with session(live.url("errors"), live.tokens["errors"]) as client:
        assert await call_error(client, "TaskGet", {"taskId": "999"}) == {
            "code": "task_not_found",
            "message": "Task #999 not found",
        }
        invalid = await call_error(client, "TaskCreate", {"subject": "x", "colour": "red"})
        assert invalid["code"] == "invalid_input"
        assert invalid["details"] == [
            {"field": "colour", "message": "Extra inputs are not permitted"}
        ]
        assert (await call_error(client, "TaskCreate", {}))["details"][0]["field"] == "subject"
        # A tool that does not exist is a protocol error (-32602), not a tool result.
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("Nope", {})
        assert unknown.value.error.code == types.INVALID_PARAMS
        # A rule of the services: a task already owned by another agent cannot be claimed.
        await call(client, "TaskCreate", {"subject": "Taken"})
        await call(client, "TaskReassign", {"taskId": "1", "owner": "bob"})
        conflict = await call_error(client, "TaskClaim", {"taskId": "1"})
        assert conflict["code"] == "owned"


async def test_team_token_names_its_agent_with_x_agent(live: Live) -> None:
    async with session(live.url("team"), live.tokens["team"], **{"X-Agent": "worker-7"}) as client:
        created = await call(client, "TaskCreate", {"subject": "From a sub-agent"})
        assert created["task"]["createdBy"] == "worker-7"
        assert (await call(client, "TaskClaim", {}))["task"]["owner"] == "worker-7"


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    ("slug", "token", "status", "code"),
    [
        ("errors", None, 401, "unauthorized"),
        ("errors", "ak_not-a-real-token", 401, "unauthorized"),
        ("errors", "other", 403, "forbidden"),
        ("errors", "revoked", 403, "token_revoked"),
        ("team", "team", 400, "invalid_input"),  # a team token without X-Agent
        ("no-such-board", "errors", 404, "board_not_found"),
        # Without a valid token an unknown board looks like any other: nothing to probe.
        ("no-such-board", "ak_not-a-real-token", 401, "unauthorized"),
    ],
)
async def test_refused_before_any_mcp_processing(
    live: Live, slug: str, token: str | None, status: int, code: str
) -> None:
    raw = live.tokens.get(token, token) if token else None
    async with _http(raw, **ACCEPT) as http:
        response = await http.post(live.url(slug), json=INITIALIZE)
    assert response.status_code == status, response.text
    # Our error JSON, not a JSON-RPC answer: the SDK never saw the request.
    assert response.json()["error"]["code"] == code
    assert "jsonrpc" not in response.json()
    if status == 401:
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="kanban"')
        assert ('error="invalid_token"' in challenge) == (token is not None)


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://evil.example", 403),
        ("{other_port}", 403),  # another port of this host
        ("{base}", 200),  # a page of this very origin
        (None, 200),  # clients that are not browsers send none
    ],
)
async def test_the_origin_is_checked_as_on_the_board_socket(
    live: Live, origin: str | None, status: int
) -> None:
    headers = dict(ACCEPT)
    if origin is not None:
        host, port = live.base_url.rsplit(":", 1)
        headers["Origin"] = origin.format(base=live.base_url, other_port=f"{host}:{int(port) + 1}")
    async with _http(live.tokens["tools"], **headers) as http:
        response = await http.post(live.url("tools"), json=INITIALIZE)
    assert response.status_code == status, response.text


async def test_sdk_client_without_a_valid_token_fails(live: Live) -> None:
    with pytest.raises(ExceptionGroup) as raised:
        async with session(live.url("tools"), "ak_wrong"):
            pass
    assert raised.group_contains(MCPError, match="error response")


async def test_get_stream_is_refused_as_the_server_is_stateless(live: Live) -> None:
    async with _http(live.tokens["tools"], Accept="text/event-stream") as http:
        response = await http.get(live.url("tools"))
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"


async def test_modern_protocol_without_handshake(live: Live) -> None:
    """The SDK's high-level client in ``auto`` mode discovers the 2026 protocol and uses it."""
    async with (
        _http(live.tokens["modern"]) as http,
        Client(streamable_http_client(live.url("modern"), http_client=http)) as client,
    ):
        assert client.protocol_version == LATEST_MODERN_VERSION
        assert len((await client.list_tools()).tools) == 11
        created = payload(await client.call_tool("TaskCreate", {"subject": "Modern"}))
        assert created["task"]["createdBy"] == "alice"
        missing = payload(await client.call_tool("TaskGet", {"taskId": "42"}), error=True)
        assert missing["error"]["code"] == "task_not_found"


async def test_resources_summarise_the_board_and_read_tasks_and_the_inbox(live: Live) -> None:
    async with session(live.url("res"), live.tokens["res"]) as client:
        await call(client, "TaskCreate", {"subject": "Write the schema"})
        await call(client, "TaskCreate", {"subject": "Write tests", "blockedBy": ["1"]})
        await call(client, "TaskCreate", {"subject": "Docs"})
        await call(client, "TaskClaim", {"taskId": "3"})
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == [
            "kanban://res/summary",
            "kanban://res/inbox",
        ]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["kanban://res/tasks/{id}"]

        summary = (await client.read_resource("kanban://res/summary")).contents[0]
        assert summary.mime_type == "text/plain"
        assert "you are 'alice'" in summary.text
        assert "Ready to claim (1):\n#1. [ ] Write the schema" in summary.text
        assert "Yours in progress (1):\n#3. [>] Docs" in summary.text
        assert "Unread messages from people: 0." in summary.text
        task = json.loads((await client.read_resource("kanban://res/tasks/2")).contents[0].text)
        assert task["task"]["readiness"]["movable"] == ["1"]
        inbox = json.loads((await client.read_resource("kanban://res/inbox")).contents[0].text)
        assert inbox == {"messages": [], "acknowledged": False, "unreadMessages": 0}
        for wrong in ("kanban://res/tasks/99", "kanban://other/summary", "file:///etc/passwd"):
            with pytest.raises(MCPError):
                await client.read_resource(wrong)


async def test_prompts_work_the_next_task_and_plan_a_goal(live: Live) -> None:
    async with session(live.url("res"), live.tokens["res"]) as client:
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["work-next-task", "plan-goal"]
        work = await client.get_prompt("work-next-task")
        text = work.messages[0].content.text
        assert "TaskClaim without a taskId" in text and "You are 'alice'" in text
        plan = await client.get_prompt("plan-goal", {"goal": "Ship the billing page"})
        assert "Ship the billing page" in plan.messages[0].content.text
        assert "one TaskBatch" in plan.messages[0].content.text
        with pytest.raises(MCPError):
            await client.get_prompt("plan-goal", {})
        with pytest.raises(MCPError):
            await client.get_prompt("dance")

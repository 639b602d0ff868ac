"""The MCP server at ``/mcp/<slug>/``, driven by the official TypeScript SDK's client.

``tests/node`` is an npm package pinning ``@modelcontextprotocol/sdk`` (and the
conformance suite, ``tests/agents/test_mcp_conformance.py``); the ``node_packages`` fixture
installs it with ``npm ci`` from its lock file when ``node_modules`` is missing or
holds other versions. ``tests/node/client.mjs`` does the MCP work against a real daphne
process (``devtools.liveserver``) and prints what it saw as one JSON summary; the
tests here assert on that summary:

- every tool is listed with a title, all four annotation hints and an output schema
  (the same ones the Python side serves, ``boards.agents.schemas``);
- the SDK validates each structured answer against its tool's output schema (a
  counting wrapper around the SDK's own Ajv validator sees every answer) and refuses
  one that breaks it; a refusal reaches it as a tool error (``isError: true``);
- only a TaskWatch that asks for progress is answered as a stream (SSE), every other
  request as one JSON answer;
- a ``TaskWatch`` longer than the client's request timeout completes (``timedOut:
  true``) because the server sends progress and the client resets its timeout on it,
  while a watch without progress fails with the SDK's own -32001 timeout; a change by
  another agent ends a watch with the changed task;
- with the SDK's default request timeout (60 s) and the server's default progress
  interval, a 65 s watch completes. It is a minute of waiting, so it begins before the
  other tests' client runs and goes on beside them (its own board and server): the
  module takes about as long as that watch.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from boards.agents.pipeline import listed, lookup
from devtools.liveserver import ROOT, Cluster, Server
from tests.support.npm import npm_ci

# A live server and Node processes; one server for the module (``live``, ``summary``):
# with -n, its tests run on one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_mcp_node")]

NODE_DIR = ROOT / "tests" / "node"
MCP_REQUEST_TIMEOUT = -32001  # the TypeScript SDK's ErrorCode.RequestTimeout
# Past the SDK's default request timeout (60 s); with progress every 10 s (the server's
# default), six progress notifications reset it.
LONG_WATCH_SECONDS = 65

SETUP = """
import io, json
from django.core.management import call_command

def run(*args, **options):
    out = io.StringIO()
    call_command(*args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]

run("createboard", "node")
run("createboard", "long")
tokens = {agent: run("issuetoken", "node", agent) for agent in ("alice", "bob")}
tokens["long"] = run("issuetoken", "long", "alice")
print(json.dumps(tokens))
"""


@pytest.fixture(scope="session")
def node_packages() -> Path:
    """tests/node with its node_modules installed (``npm ci``, from the committed lock file)."""
    return npm_ci(NODE_DIR)


def run_node(
    script: str, *args: str, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``node tests/node/<script> args…`` with ``env`` over this process's environment."""
    return subprocess.run(
        ["node", script, *args],
        cwd=NODE_DIR,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Live:
    cluster: Cluster
    base_url: str
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp/node/"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, node_packages: Path) -> Iterator[Live]:
    """A daphne process that sends TaskWatch progress every second (the default is 10 s)."""
    cluster = Cluster(tmp_path_factory.mktemp("mcp-node"), env={"KANBAN_MCP_PROGRESS_SECONDS": "1"})
    try:
        tokens = json.loads(cluster.manage("shell", "-c", SETUP).splitlines()[-1])
        base = cluster.start()
        yield Live(cluster, base, tokens)
    finally:
        cluster.stop()
    log = cluster.log(base)
    assert "Traceback" not in log, log


def client_summary(url: str, tokens: dict[str, str], mode: str, timeout: float) -> dict[str, Any]:
    """Run tests/node/client.mjs in ``mode``; its JSON summary."""
    return summary_of(
        mode, run_node("client.mjs", mode, env=_client_env(url, tokens), timeout=timeout)
    )


def _client_env(url: str, tokens: dict[str, str]) -> dict[str, str]:
    env = {"KANBAN_MCP_URL": url, "KANBAN_MCP_TOKEN": tokens["alice"]}
    if "bob" in tokens:
        env["KANBAN_MCP_OTHER_TOKEN"] = tokens["bob"]
    return env


def summary_of(mode: str, result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, f"client.mjs {mode}: {result.returncode}\n{result.stderr}"
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert "crashed" not in summary, json.dumps(summary, indent=2)
    return summary


@dataclass
class LongWatch:
    """client.mjs ``long``, under way against a server with the default progress interval."""

    server: Server
    process: subprocess.Popen[str]

    def summary(self) -> dict[str, Any]:
        """Its JSON summary, once it has finished."""
        out, err = self.process.communicate(timeout=LONG_WATCH_SECONDS + 60)
        args = self.process.args
        return summary_of(
            "long", subprocess.CompletedProcess(args, self.process.returncode, out, err)
        )


@pytest.fixture(scope="module")
def long_watch(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LongWatch]:
    """The long watch, begun before ``summary``'s client: it waits more than a minute,
    and the module's other tests run meanwhile. It watches a board of its own, so the
    main client's counts do not see its task."""
    env = {k: v for k, v in live.cluster.env.items() if k != "KANBAN_MCP_PROGRESS_SECONDS"}
    server = Server(env, tmp_path_factory.mktemp("mcp-node-long") / "daphne.log")
    base = server.start()
    tokens = {"alice": live.tokens["long"]}
    process = subprocess.Popen(
        ["node", "client.mjs", "long", str(LONG_WATCH_SECONDS)],
        cwd=NODE_DIR,
        env={**os.environ, **_client_env(f"{base}/mcp/long/", tokens)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield LongWatch(server, process)
    finally:
        if process.poll() is None:  # its test did not run
            process.kill()
            process.communicate()
        server.stop()


@pytest.fixture(scope="module")
def summary(live: Live, long_watch: LongWatch) -> dict[str, Any]:
    return client_summary(live.url, live.tokens, "main", timeout=60)


def answered(step: dict[str, Any]) -> dict[str, Any]:
    """A step's tool answer (its structured content), failing with the step if it threw."""
    assert step["ok"], json.dumps(step, indent=2)
    value = step["value"]
    assert value["textIsStructured"], value  # the text block is the same JSON
    return value["structured"]


def test_the_sdk_connects_to_the_stateless_server(summary: dict[str, Any]) -> None:
    assert summary["server"]["name"] == "agent-kanban"
    assert summary["protocolVersion"]  # negotiated in the handshake
    assert summary["sessionId"] is None  # stateless: no Mcp-Session-Id
    assert {"tools", "resources", "prompts"} <= set(summary["capabilities"])


def test_only_a_watch_with_progress_is_answered_as_a_stream(summary: dict[str, Any]) -> None:
    answers = [a for a in summary["answers"] if not a["method"].startswith("notifications/")]
    assert [a["method"] for a in answers[:2]] == ["initialize", "tools/list"]
    streamed = [a for a in answers if a["contentType"].startswith("text/event-stream")]
    assert {(a["tool"], a["progressToken"]) for a in streamed} == {("TaskWatch", True)}
    assert len(streamed) == 2  # the two watches that asked for progress
    for a in answers:
        assert a["status"] == 200, a
        if a not in streamed:
            assert a["contentType"].startswith("application/json"), a
    # The watch that asked for no progress is a plain JSON answer too.
    assert ("TaskWatch", False) in {(a["tool"], a["progressToken"]) for a in answers}


def test_tools_have_titles_annotations_and_output_schemas(summary: dict[str, Any]) -> None:
    tools = {tool["name"]: tool for tool in summary["tools"]}
    assert list(tools) == [t.name for t in listed()]
    for name, tool in tools.items():
        declared = lookup(name, seed_dialects=False)
        hints = declared.hints
        assert hints is not None
        assert tool["title"] == hints.title
        assert tool["annotations"] == {
            "title": hints.title,
            "readOnlyHint": hints.read_only,
            "destructiveHint": hints.destructive,
            "idempotentHint": hints.idempotent,
            "openWorldHint": False,
        }, name
        assert tool["inputSchema"] == declared.input_schema()
        assert tool["outputSchema"] == declared.output_schema()
    # The SDK compiled a validator for each output schema when it listed the tools.
    assert summary["validatorsCompiled"] == len(tools)


def test_the_sdk_validates_every_structured_answer(summary: dict[str, Any]) -> None:
    calls = summary["calls"]
    assert [c["tool"] for c in calls] == [
        *["TaskCreate"] * 4,
        *["TaskList", "TaskGet", "TaskClaim", "TaskUpdate"],
    ]
    for call in calls:
        body = answered(call)
        assert call["value"]["isError"] is False, call
        assert call["validated"] == 1, call  # the SDK ran the tool's output schema on it
        assert body["unreadMessages"] == 0
    assert summary["invalidAnswers"] == []
    assert summary["validatorsChecked"] == len(calls)
    listed = answered(calls[4])
    assert listed["total"] == 4
    claimed = answered(calls[6])["task"]
    assert (claimed["status"], claimed["owner"]) == ("in_progress", "alice")
    updated = answered(calls[7])["task"]
    assert updated["activeForm"] == "Checking the SDK's validation"


def test_the_sdk_refuses_an_answer_that_breaks_the_output_schema(summary: dict[str, Any]) -> None:
    honest, corrupted = summary["corruptAnswer"]["honest"], summary["corruptAnswer"]["corrupted"]
    assert answered(honest)["task"]["status"] == "pending"
    assert corrupted["ok"] is False, corrupted
    assert corrupted["error"]["code"] == -32602, corrupted  # McpError(InvalidParams)
    assert "does not match the tool's output schema" in corrupted["error"]["message"]
    assert "status" in corrupted["error"]["message"]


def test_refusals_reach_the_sdk_as_tool_errors(summary: dict[str, Any]) -> None:
    """A refusal is a tool result with isError: true and the API's error JSON, which the
    client reads (and shows its model), not an exception thrown inside the SDK."""
    refusals = summary["refusals"]
    for case, code in (("missing", "task_not_found"), ("invalid", "invalid_input")):
        step = refusals[case]
        assert step["ok"], json.dumps(step, indent=2)
        assert step["value"]["isError"] is True, step
        assert step["value"]["text"]["error"]["code"] == code, step
    assert refusals["missing"]["value"]["text"] == {
        "error": {"code": "task_not_found", "message": "Task #999 not found"}
    }
    unknown = refusals["unknownTool"]
    assert unknown["ok"] is False
    assert unknown["error"]["code"] == -32602, unknown  # a protocol error: no such tool


def test_progress_keeps_a_watch_longer_than_the_request_timeout_alive(
    summary: dict[str, Any],
) -> None:
    watch = summary["watches"]["outlasts"]  # timeoutSeconds 8, request timeout 3 s
    body = answered(watch)
    assert body["timedOut"] is True
    assert body["task"]["status"] == "pending"
    # It outlived the request timeout (3 s) more than twice over, and ended by timing out at
    # its 8 s (timedOut above); how long after that the answer came is the machine's business.
    assert watch["elapsedMs"] >= 7_500, watch["elapsedMs"]
    progress = watch["progress"]
    assert len(progress) >= 5, progress  # one a second
    assert [p["progress"] for p in progress] == sorted(p["progress"] for p in progress)
    assert all(p["total"] == 8 for p in progress), progress
    assert all(p.get("message") for p in progress), progress
    # No gap as long as the request timeout: that is what kept the request alive.
    times = [0] + [p["atMs"] for p in progress]
    assert max(b - a for a, b in itertools.pairwise(times)) < 3000, times


def test_a_change_by_another_agent_ends_a_watch(summary: dict[str, Any]) -> None:
    change = summary["watches"]["change"]
    assert answered(change["claimed"])["task"]["owner"] == "bob"
    assert answered(change["done"])["task"]["status"] == "completed"
    watch = summary["watches"]["ended"]
    body = answered(watch)
    assert body["timedOut"] is False
    assert (body["task"]["status"], body["task"]["owner"]) == ("completed", "bob")
    assert body["task"]["result"] == "Done by bob"
    assert watch["elapsedMs"] < 10_000, watch


def test_without_progress_the_sdk_gives_up_at_its_request_timeout(
    summary: dict[str, Any],
) -> None:
    """Why progress matters: a client that asks for none times out before the watch ends."""
    watch = summary["watches"]["noProgress"]  # timeoutSeconds 5, request timeout 2 s
    assert watch["ok"] is False, watch
    assert watch["error"]["code"] == MCP_REQUEST_TIMEOUT, watch
    assert "timed out" in watch["error"]["message"].lower()
    assert watch["progress"] == []
    # Not before its request timeout; that it was the SDK's timeout and not the watch's end
    # (at 5 s, an answer) is the error code above.
    assert watch["elapsedMs"] >= 2_000, watch


def test_a_long_watch_outlasts_the_sdk_default_request_timeout(long_watch: LongWatch) -> None:
    """The SDK's default timeout (60 s), the server's default progress interval (10 s)."""
    summary = long_watch.summary()
    assert "Traceback" not in long_watch.server.log(), long_watch.server.log()
    assert summary["defaultRequestTimeoutMs"] == 60_000
    watch = summary["watch"]
    body = answered(watch)  # not the SDK's -32001 "Request timed out"
    assert body["timedOut"] is True
    assert watch["elapsedMs"] >= LONG_WATCH_SECONDS * 1000, watch["elapsedMs"]
    progress = watch["progress"]
    assert len(progress) == 6, progress  # every 10 s
    assert all(p["total"] == LONG_WATCH_SECONDS for p in progress), progress

"""The token goes only where the person put it (issue #42, point 3): a repository's
settings, ``.env`` or ``--url`` can set any environment, so only the boards listed in
boards.json get a token. Here another "board" on loopback would answer ``allow``, signed
with whatever token it receives (as a receiver keyed with the token sent would): it must
receive nothing, and the gated call is blocked with a reason saying why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.liveserver import ROOT
from tests.clients.test_forwarder_hostile import TOKEN as HTOKEN
from tests.clients.test_forwarder_hostile import RawBoard, http, proof, sends
from tests.support.hook_server import HookServer, allow, deny

TOKEN = "the-persons-own-token"
PRE_TOOL_USE = {
    "session_id": "s-trust",
    "cwd": "/home/ana/project",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "git push --force origin main"},
    "tool_use_id": "toolu_trust",
}


@pytest.fixture
def boards() -> Iterator[tuple[HookServer, HookServer]]:
    """The person's board (it denies the push) and another one (it would allow it)."""
    with HookServer() as mine, HookServer() as theirs:
        mine.answers["PreToolUse"] = deny("not on main")
        theirs.answers["PreToolUse"] = allow("anything goes")
        yield mine, theirs


def forward(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The forwarder as a client runs it, with the person's boards.json and ``env`` (what a
    repository's settings or ``.env`` put in the session's environment)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    return subprocess.run(
        [sys.executable, "-m", "boards.clients.forwarder", *args],
        input=json.dumps(PRE_TOOL_USE),
        capture_output=True,
        text=True,
        cwd="/",
        env={**base, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(config), **env},
        timeout=30,
        check=False,
    )


@pytest.fixture
def config(tmp_path, boards) -> Path:
    mine, _theirs = boards
    path = tmp_path / "agent-kanban" / "boards.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"version": 1, "boards": [{"url": mine.url, "token": TOKEN, "agent": ""}]})
    )
    return tmp_path


@pytest.mark.parametrize(
    "token",
    [None, TOKEN, "the-repository-s-token"],
    ids=["url only", "url with the person's token", "url with a token of its own"],
)
def test_an_environment_naming_another_board_sends_it_nothing_and_blocks(boards, config, token):
    mine, theirs = boards
    env = {"KANBAN_HOOK_URL": theirs.url}
    if token is not None:
        env["KANBAN_TOKEN"] = token

    result = forward(config, env)

    assert theirs.calls == [] and mine.calls == []
    assert result.returncode == 2, result
    assert "KANBAN_HOOK_URL is not a configured board, so the token is not sent there" in (
        result.stderr
    )


def test_a_url_on_the_command_line_naming_another_board_sends_it_nothing(boards, config):
    mine, theirs = boards

    result = forward(config, {}, "--url", theirs.url)

    assert theirs.calls == [] and mine.calls == []
    assert result.returncode == 2
    assert "--url is not a configured board" in result.stderr


def test_a_token_in_the_environment_cannot_replace_the_configured_one(boards, config):
    mine, theirs = boards

    result = forward(config, {"KANBAN_HOOK_URL": mine.url, "KANBAN_TOKEN": "another"})

    assert mine.calls == [] and theirs.calls == []
    assert result.returncode == 2
    assert "KANBAN_TOKEN is set and is not the token" in result.stderr
    assert "another" not in result.stderr  # the refused token is not repeated


def test_the_environment_may_choose_the_configured_board_with_its_own_token(boards, config):
    mine, theirs = boards

    result = forward(config, {"KANBAN_HOOK_URL": mine.url, "KANBAN_TOKEN": TOKEN})

    assert result.returncode == 0, result
    assert json.loads(result.stdout) == deny("not on main")
    [call] = mine.calls
    assert call.headers["Authorization"] == f"Bearer {TOKEN}"
    assert theirs.calls == []


def test_without_boards_json_the_environment_alone_configures_nothing(boards, tmp_path):
    _mine, theirs = boards

    result = forward(tmp_path, {"KANBAN_HOOK_URL": theirs.url, "KANBAN_TOKEN": TOKEN})

    assert theirs.calls == []
    assert result.returncode == 2
    assert "none is configured" in result.stderr


# -- the opencode plugin, run by node as opencode runs it (its tool.execute.before) --------

PLUGIN = ROOT / "boards" / "clients" / "opencode_plugin.js"
DRIVER = """
import { pathToFileURL } from "node:url"
const [plugin, directory] = process.argv.slice(2)
const { AgentKanban } = await import(pathToFileURL(plugin).href)
const hooks = await AgentKanban({ directory })
try {
  await hooks["tool.execute.before"](
    { tool: "bash", sessionID: "ses_1", callID: "call_1" },
    { args: { command: "rm -rf build" } },
  )
  console.log(JSON.stringify({ ran: true }))
} catch (error) {
  console.log(JSON.stringify({ blocked: error.message }))
}
"""


def plugin_call(tmp_path: Path, config: Path, env: dict[str, str]) -> dict[str, object]:
    """One gated call through the plugin: ``{"ran": true}`` or ``{"blocked": message}``."""
    module = tmp_path / "agent-kanban.mjs"  # an ES module, as opencode loads it
    module.write_text(PLUGIN.read_text())
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    base = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    result = subprocess.run(
        ["node", str(driver), str(module), "/home/ana/project"],
        capture_output=True,
        text=True,
        env={**base, "XDG_CONFIG_HOME": str(config), **env},
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def raw_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config" / "agent-kanban" / "boards.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "boards": [{"url": url, "token": HTOKEN}]}))
    return tmp_path / "config"


HOSTILE = [
    ("2xx without proof", http("200 OK", b"{}", signed=False), "carries no X-Kanban-Proof"),
    (
        "wrong proof",
        http("200 OK", b"{}", "X-Kanban-Proof: " + proof(b"{}", "another"), signed=False),
        "X-Kanban-Proof does not match",
    ),
    (
        "proof over a different body",
        http("200 OK", b'{"decision": "allow"}', f"X-Kanban-Proof: {proof(b'{}')}", signed=False),
        "X-Kanban-Proof does not match",
    ),
    ("JSON array", http("200 OK", b"[]"), "not a JSON object"),
    ("not JSON", http("200 OK", b"allow"), "not a JSON object"),
    ("empty body", http("200 OK", b""), "not a JSON object"),
    ("3xx", http("302 Found", b"", "Location: http://evil.example/"), "HTTP 302"),
    ("5xx", http("500 Internal Server Error", b"{}"), "HTTP 500"),
]


@pytest.mark.parametrize("reply,says", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_the_opencode_plugin_blocks_on_any_answer_but_the_boards_own(tmp_path, reply, says):
    hostile = RawBoard(sends(reply))
    try:
        outcome = plugin_call(tmp_path, raw_config(tmp_path, hostile.url), {})
    finally:
        hostile.close()

    assert len(hostile.requests) == 1  # it asked, and did not take this for an answer
    assert "blocked" in outcome, outcome
    assert says in str(outcome["blocked"]) and "this tool call is blocked" in str(
        outcome["blocked"]
    )


def test_the_opencode_plugin_runs_a_call_on_the_boards_signed_answer(tmp_path):
    board = RawBoard(sends(http("200 OK", b"{}")))
    denying = RawBoard(sends(http("200 OK", b'{"decision": "deny", "reason": "not now"}')))
    try:
        ran = plugin_call(tmp_path / "a", raw_config(tmp_path / "a", board.url), {})
        denied = plugin_call(tmp_path / "b", raw_config(tmp_path / "b", denying.url), {})
    finally:
        board.close()
        denying.close()

    assert ran == {"ran": True}
    assert denied == {"blocked": "not now"}
    assert b"Authorization: Bearer " + HTOKEN.encode() in board.requests[0]


def test_the_opencode_plugin_sends_nothing_to_a_board_the_environment_names(tmp_path, boards):
    mine, theirs = boards
    config = raw_config(tmp_path, mine.url)

    by_url = plugin_call(tmp_path, config, {"KANBAN_HOOK_URL": theirs.url, "KANBAN_TOKEN": "x"})
    by_token = plugin_call(tmp_path, config, {"KANBAN_HOOK_URL": mine.url, "KANBAN_TOKEN": "x"})

    assert theirs.calls == [] and mine.calls == []
    assert "KANBAN_HOOK_URL is not a configured board" in str(by_url["blocked"])
    assert "KANBAN_TOKEN is set and is not the token" in str(by_token["blocked"])

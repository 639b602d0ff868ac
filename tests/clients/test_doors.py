"""One hook door per coding client (SPEC §13, issue #34): each client's own payload read
as Claude Code's, gated by the same rules, answered in the shape that client obeys; the
session says which client and which machine; calls without an id end in their own
outcome; Qwen Code's held calls end before it gives up on the hook.

The payloads are the ones each real CLI was seen to send (tests/clients/test_real_*.py
drive the CLIs themselves)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from boards.clients import calls, registry, sessions
from boards.gates import rules as gaterules
from boards.models import Board, ClientSession, GateRule, ToolCall
from tests.support.factories import make_board, make_token
from tests.support.hook_door import denied, post_hook
from tests.support.hook_payloads import CWD, shell_call

PUSH = "git push origin main"


@pytest.fixture
def board(db) -> Board:
    board = make_board("team", "Team board")
    gaterules.gate_rule_add(
        board=board,
        actor="pat",
        tool="Bash",
        pattern=r"\bgit\s+push\b",
        decision="deny",
        note="No pushes from agents",
    )
    # The deny rule decides, not the default ask rule before it.
    GateRule.objects.filter(board=board, decision="ask").delete()
    return board


@pytest.fixture
def token(board) -> str:
    return make_token(board, "dev")


@pytest.mark.parametrize("client", registry.NAMES)
def test_a_deny_rule_blocks_each_clients_shell_call_in_its_own_answer_shape(client, token):
    status, answer = post_hook(client, token, shell_call(client, PUSH))

    assert status == 200, answer
    assert "No pushes from agents" in denied(client, answer)
    session = ClientSession.objects.get()
    assert session.client == client
    [call] = session.calls
    assert call["tool"] == "Bash" and call["outcome"] == "denied"
    assert "git push origin main" in call["doing"]


@pytest.mark.parametrize("client", registry.NAMES)
def test_a_call_no_rule_matches_gets_no_decision_on_any_door(client, token):
    assert post_hook(client, token, shell_call(client, "ls -la")) == (200, {})
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("client", registry.NAMES)
def test_the_default_rules_hold_every_clients_recursive_delete(client, db):
    board = make_board("fresh", "Fresh board")
    event = registry.BY_NAME[client].adapter.normalise(shell_call(client, "rm -rf build"))
    verdict = sessions.session_event(board=board, agent="dev", event=event, client=client)
    assert verdict.decision == "ask" and verdict.held is not None


def test_an_unknown_client_has_no_door_and_the_answer_names_the_doors(token):
    status, answer = post_hook("cursor", token, shell_call("codex", PUSH))

    assert status == 404
    assert answer["error"]["code"] == "unknown_client"
    assert "'cursor'" in answer["error"]["message"]
    assert "gemini" in answer["error"]["message"]
    assert not ClientSession.objects.exists()


def test_a_hook_input_that_is_not_an_object_is_refused(token):
    status, answer = post_hook("gemini", token, "[1, 2]")
    assert status == 400
    assert "JSON object" in answer["error"]["message"]
    assert not ClientSession.objects.exists()


def test_the_roster_says_which_client_which_version_and_which_machine(token, person_client):
    start = {"hook_event_name": "SessionStart", "session_id": "g-1", "cwd": CWD}
    status, _ = post_hook(
        "gemini",
        token,
        start,
        **{"X-Kanban-Host": "build-box", "X-Kanban-Client-Version": "0.61.0"},
    )
    assert status == 200
    post_hook("gemini", token, shell_call("gemini", "ls", session="g-1"))  # no headers: kept

    agents = person_client.get("/api/boards/team/agents").json()["agents"]
    [session] = [a["session"] for a in agents if a["session"]]
    assert session["client"] == "gemini"
    assert session["host"] == "build-box"
    assert session["clientVersion"] == "0.61.0"
    assert session["cwd"] == CWD


def test_a_host_header_is_shown_as_one_bounded_printable_line(token):
    post_hook(
        "codex", token, shell_call("codex", "ls"), **{"X-Kanban-Host": "a\tb\x07" + "x" * 500}
    )
    host = ClientSession.objects.get().host
    assert host.startswith("a b") and "\x07" not in host and len(host) == 100


@pytest.mark.parametrize("client", ["gemini", "copilot"])
def test_calls_without_an_id_end_in_their_own_outcome(client, token):
    ls, cat = shell_call(client, "ls"), shell_call(client, "cat x")
    for call in (ls, cat, ls):
        post_hook(client, token, call)
    after = dict(ls, hook_event_name="AfterTool" if client == "gemini" else "PostToolUse")
    post_hook(client, token, after)

    calls = ClientSession.objects.get().calls
    assert [c["outcome"] for c in calls] == ["ok", "running", "running"]  # the oldest ls
    assert len({c["id"] for c in calls}) == 3
    post_hook(client, token, after)
    assert [c["outcome"] for c in ClientSession.objects.get().calls] == ["ok", "running", "ok"]


def test_a_gemini_tool_error_ends_its_call_as_an_error(token):
    call = shell_call("gemini", "make")
    post_hook("gemini", token, call)
    after = dict(call, hook_event_name="AfterTool", tool_response={"error": "exit 2"})
    post_hook("gemini", token, after)
    assert ClientSession.objects.get().calls[0]["outcome"] == "error"


def test_a_held_call_of_a_client_without_ids_ends_as_the_person_decided(board, token):
    gaterules.gate_rule_add(board=board, actor="pat", tool="Bash", pattern=r"\brm\b")
    event = registry.BY_NAME["gemini"].adapter.normalise(shell_call("gemini", "rm -r dist"))
    verdict = sessions.session_event(board=board, agent="dev", event=event, client="gemini")
    calls.tool_call_decide(board=board, person="pat", call_id=verdict.held, approve=False)
    assert ClientSession.objects.get().calls[0]["outcome"] == "denied"


def test_a_qwen_call_held_for_a_person_ends_with_its_fallback_within_55_seconds(board):
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern=r"\brm\b", wait_seconds=120
    )
    qwen = registry.BY_NAME["qwen"]
    event = qwen.adapter.normalise(shell_call("qwen", "rm -r dist"))
    verdict = sessions.session_event(
        board=board, agent="dev", event=event, client="qwen", longest_hold=qwen.longest_hold()
    )
    call = ToolCall.objects.get(pk=verdict.held)
    assert call.wait_seconds == 55
    assert (call.deadline - call.requested_at).total_seconds() == 55


def test_the_same_rule_waits_its_full_time_on_a_client_that_holds_longer(board):
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern=r"\brm\b", wait_seconds=120
    )
    codex = registry.BY_NAME["codex"]
    event = codex.adapter.normalise(shell_call("codex", "rm -r dist"))
    verdict = sessions.session_event(
        board=board, agent="dev", event=event, client="codex", longest_hold=codex.longest_hold()
    )
    assert ToolCall.objects.get(pk=verdict.held).wait_seconds == 120


@pytest.mark.parametrize(
    "client,tool,given,claude,shaped",
    [
        (
            "gemini",
            "write_file",
            {"file_path": "/x", "content": "y"},
            "Write",
            {"file_path": "/x", "content": "y"},
        ),
        (
            "gemini",
            "replace",
            {"file_path": "/x", "old_string": "a", "new_string": "b"},
            "Edit",
            {"file_path": "/x", "old_string": "a", "new_string": "b"},
        ),
        ("gemini", "read_file", {"absolute_path": "/x"}, "Read", {"file_path": "/x"}),
        (
            "gemini",
            "web_fetch",
            {"prompt": "Summarise https://example.com/a please"},
            "WebFetch",
            {"url": "https://example.com/a", "prompt": "Summarise https://example.com/a please"},
        ),
        ("qwen", "run_shell_command", {"command": "ls"}, "Bash", {"command": "ls"}),
        (
            "copilot",
            "create",
            {"path": "/x", "file_text": "y"},
            "Write",
            {"file_path": "/x", "content": "y"},
        ),
        ("copilot", "view", {"path": "/x"}, "Read", {"file_path": "/x"}),
        (
            "opencode",
            "write",
            {"filePath": "/x", "content": "y"},
            "Write",
            {"file_path": "/x", "content": "y"},
        ),
        (
            "opencode",
            "edit",
            {"filePath": "/x", "oldString": "a", "newString": "b"},
            "Edit",
            {"file_path": "/x", "old_string": "a", "new_string": "b"},
        ),
        ("opencode", "webfetch", {"url": "https://e.com"}, "WebFetch", {"url": "https://e.com"}),
        ("opencode", "mcp_tool_x", {"a": 1}, "mcp_tool_x", {"a": 1}),
    ],
)
def test_each_clients_tools_read_as_claude_codes_with_their_own_name_beside(
    client, tool, given, claude, shaped
):
    body = dict(shell_call(client, "ls"), tool_name=tool, tool_input=given)
    event = registry.BY_NAME[client].adapter.normalise(body)
    assert (event["tool_name"], event["tool_input"], event["client_tool"]) == (claude, shaped, tool)


def test_a_copilot_call_sent_as_a_json_string_under_camel_case_names_is_read(token):
    body = {
        "timestamp": 1,
        "cwd": CWD,
        "toolName": "bash",
        "toolArgs": json.dumps({"command": PUSH}),
    }
    body["hook_event_name"] = "preToolUse"
    status, answer = post_hook("copilot", token, body)
    assert status == 200 and "No pushes" in denied("copilot", answer)


def test_the_table_has_one_row_per_door_and_says_what_each_cannot_do():
    # Each door once (a new client adds its row; this test needs no edit).
    assert len(set(registry.NAMES)) == len(registry.CLIENTS)
    assert {"claude-code", "codex", "copilot", "gemini", "qwen", "opencode"} <= set(registry.NAMES)
    for row in registry.CLIENTS:
        assert row.gated in row.events
    assert registry.BY_NAME["qwen"].longest_hold() == 55
    assert any("/hooks" in line for line in registry.BY_NAME["codex"].cannot)


# -- issue #42: the Codex door reads an argv as the shell does; no body is a 500 ------------


@pytest.mark.parametrize(
    "argv,script",
    [
        (["bash", "-e", "-c", "rm -rf build"], "rm -rf build"),
        (["bash", "-lc", "rm -rf build"], "rm -rf build"),
        (["/bin/sh", "-ec", "git push"], "git push"),
        (["bash", "-o", "pipefail", "-c", "git push"], "git push"),
        (["rm", "-rf", "build"], "rm -rf build"),
    ],
)
def test_a_codex_argv_reaches_the_default_rules_as_the_shell_reads_it(argv, script, db):
    board = make_board("fresh", "Fresh board")
    body = dict(shell_call("codex", ""), tool_input={"command": argv})
    event = registry.BY_NAME["codex"].adapter.normalise(body)
    assert event["tool_input"]["command"] == script
    verdict = sessions.session_event(board=board, agent="dev", event=event, client="codex")
    assert verdict.decision == "ask" and verdict.held is not None


def test_a_codex_argv_keeps_its_quoting_when_no_shell_runs_it():
    body = dict(shell_call("codex", ""), tool_input={"command": ["rm", "-rf", "my dir", "x;y"]})
    event = registry.BY_NAME["codex"].adapter.normalise(body)
    assert event["tool_input"]["command"] == "rm -rf 'my dir' 'x;y'"
    # A script file's own -c is its argument, not the shell's: the line is read whole.
    body = dict(body, tool_input={"command": ["bash", "run.sh", "-c", "x"]})
    assert registry.BY_NAME["codex"].adapter.normalise(body)["tool_input"]["command"] == (
        "bash run.sh -c x"
    )


BAD_BODIES = {
    "an empty object": "{}",
    "a list": "[]",
    "null": "null",
    "a string": '"PreToolUse"',
    "200 nested lists": "[" * 200 + "]" * 200,
    "200 nested objects": '{"a": ' * 200 + "1" + "}" * 200,
    "a tool input 200 deep": '{"hook_event_name": "PreToolUse", "session_id": "s-1", '
    '"tool_name": "Bash", "tool_input": ' + '{"a": ' * 200 + "1" + "}" * 200 + "}",
    "no event name": '{"session_id": "s-1"}',
    "a tool name that is a number": '{"hook_event_name": "PreToolUse", "session_id": "s-1", '
    '"tool_name": 5}',
}


@pytest.mark.parametrize("client", registry.NAMES)
@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES)
def test_no_door_answers_a_bad_body_with_a_500(client, body, token):
    response = Client(raise_request_exception=False).post(
        f"/api/boards/team/hooks/{client}",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert 400 <= response.status_code < 500, response.content[:300]
    assert response.json()["error"]["message"]

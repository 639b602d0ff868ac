"""The hook door's bounds: a call over the token's held-call cap is denied and never sits
on the board; a write over the tool API's body cap still reaches the gate; an agent's open
sessions are capped and an ended one frees its place; a team token names a session by its
UUID."""

from __future__ import annotations

import json

from boards.models import ClientSession, ToolCall
from tests.clients.test_hooks import hook, send
from tests.support.factories import make_token
from tests.support.hook_door import post_hook

CWD = "/home/dev/project"


def _event(name: str, session: str = "s1", **fields: object) -> dict:
    return {"hook_event_name": name, "session_id": session, "cwd": CWD, **fields}


def test_a_call_over_the_held_cap_is_denied_and_never_sits_on_the_board(board, settings):
    settings.KANBAN_WATCHES_PER_TOKEN = 0  # every held call is over the cap
    token = make_token(board, "claude")
    push = _event(
        "PreToolUse",
        tool_name="Bash",
        tool_input={"command": "git push --force origin main"},
        tool_use_id="tu-1",
    )
    status, answer = post_hook("claude-code", token, json.dumps(push).encode())
    assert status == 200
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    # Nothing waits for a person: there is no approval anyone could give for nothing.
    assert not ToolCall.objects.filter(board=board, state="requested").exists()


def test_a_team_token_names_a_session_with_a_uuid_claude_and_its_first_eight(board):
    team = make_token(board, team=True)
    session = "123e4567-e89b-12d3-a456-426614174000"
    status, _ = post_hook(
        "claude-code", team, json.dumps(_event("SessionStart", session, source="startup")).encode()
    )
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
    status, answer = post_hook("claude-code", token, json.dumps(write).encode())
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


def test_two_tokens_codex_sessions_started_together_get_names_of_their_own(board):
    # Codex's thread ids are time-ordered (UUIDv7): two started in the same minute share
    # their first eight characters, and a name two tokens share refuses the second.
    first, second = make_token(board, team=True), make_token(board, team=True)
    ids = ["01a23435-fb58-7471-a6aa-2bec00eb41b3", "01a23435-fc11-7123-b111-99aa00cc22dd"]
    for team, session in zip((first, second), ids, strict=True):
        status, answer = post_hook(
            "codex", team, json.dumps(_event("SessionStart", session, source="startup")).encode()
        )
        assert status == 200, answer
    assert sorted(ClientSession.objects.values_list("agent", flat=True)) == [
        "codex-00cc22dd",
        "codex-00eb41b3",
    ]

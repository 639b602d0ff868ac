"""Claude Code sessions on the board through their hooks (SPEC §11, issue #22): the hook
endpoint, sessions on the roster, gate rules, held tool calls decided by a person.

The real CLI drives the same endpoint in tests/browser/test_claude_code_live.py; these tests send
the payloads the CLI was seen to send (docs/claude-code-hooks.md) through Django's clients.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.utils import timezone

from boards.clients import calls, sessions
from boards.core import services
from boards.core.errors import Conflict, PermissionDenied
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import (
    AgentToken,
    Board,
    CallState,
    ClientSession,
    Event,
    GateRule,
    Passkey,
    ToolCall,
)
from tests.support.factories import make_board, make_token
from tests.support.hook_door import post_hook
from tests.support.htmltext import flat

CWD = "/home/dev/project"


def hook(name: str, session: str = "s-1", **fields) -> dict:
    return {
        "hook_event_name": name,
        "session_id": session,
        "cwd": CWD,
        "permission_mode": "default",
        "transcript_path": "/home/dev/.claude/t.jsonl",
        **fields,
    }


def bash(command: str, session: str = "s-1", use: str = "tu-1") -> dict:
    return hook(
        "PreToolUse",
        session,
        tool_name="Bash",
        tool_input={"command": command, "description": "run it"},
        tool_use_id=use,
    )


def send(token: str, body, slug: str = "team", **headers):
    return post_hook("claude-code", token, body, slug=slug, **headers)


async def send_async(token: str, body: dict, slug: str = "team"):
    response = await AsyncClient().post(
        f"/api/boards/{slug}/hooks/claude-code",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, json.loads(response.content)


def decision(answer: dict) -> tuple[str, str]:
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"]


# --- sessions -------------------------------------------------------------------------------------


def test_a_session_appears_on_the_roster_with_its_folder_and_ends(board, token, person_client):
    assert send(token, hook("SessionStart", source="startup", model="claude-sonnet-4-5")) == (
        200,
        {},
    )
    session = ClientSession.objects.get(board=board)
    assert (session.agent, session.cwd, session.state, session.model) == (
        "claude",
        CWD,
        "idle",
        "claude-sonnet-4-5",
    )
    page = person_client.get("/boards/team/").content.decode()
    assert CWD in page

    send(token, hook("UserPromptSubmit", prompt="Fix the failing test"))
    assert ClientSession.objects.get(board=board).doing == "Working on: Fix the failing test"
    send(token, hook("SessionEnd", reason="other"))

    session = ClientSession.objects.get(board=board)
    assert session.state == "ended"
    kinds = list(Event.objects.filter(board=board).values_list("kind", flat=True))
    assert kinds.count("session_started") == kinds.count("session_ended") == 1


def test_tool_calls_show_what_the_session_is_doing_with_outcome_and_duration(board, token):
    send(token, hook("SessionStart"))
    assert send(token, bash("npm test")) == (200, {})
    session = ClientSession.objects.get(board=board)
    assert (session.state, session.doing) == ("working", "Running `npm test`")

    send(
        token,
        hook(
            "PostToolUse",
            tool_name="Bash",
            tool_input={"command": "npm test"},
            tool_use_id="tu-1",
            tool_response={"stdout": "ok", "stderr": "", "interrupted": False},
            duration_ms=1234,
        ),
    )
    edit = hook(
        "PreToolUse",
        tool_name="Edit",
        tool_input={"file_path": f"{CWD}/src/app.py", "old_string": "a", "new_string": "b"},
        tool_use_id="tu-2",
    )
    send(token, edit)
    send(token, {**edit, "hook_event_name": "PostToolUseFailure", "error": "no match"})

    session = ClientSession.objects.get(board=board)
    assert [(c["tool"], c["outcome"], c.get("ms")) for c in session.calls] == [
        ("Bash", "ok", 1234),
        ("Edit", "error", None),
    ]
    assert session.calls[1]["doing"] == "Editing `/home/dev/project/src/app.py`"


def test_a_busy_session_keeps_its_last_calls_and_writes_no_events(board, token, settings):
    settings.KANBAN_SESSION_CALLS = 5
    send(token, hook("SessionStart"))
    seq = Board.objects.get(pk=board.pk).last_seq
    for n in range(30):
        send(token, bash(f"echo {n}", use=f"tu-{n}"))
        send(token, hook("PostToolUse", tool_name="Bash", tool_use_id=f"tu-{n}", duration_ms=3))
    session = ClientSession.objects.get(board=board)
    assert [c["doing"] for c in session.calls] == [f"Running `echo {n}`" for n in range(25, 30)]
    assert Board.objects.get(pk=board.pk).last_seq == seq


def test_a_team_token_names_the_session_from_x_agent_or_from_the_session(board):
    team = make_token(board, team=True)
    send(team, hook("SessionStart", session="abcdef1234567890"))
    send(team, hook("SessionStart", session="s-2"), **{"X-Agent": "reviewer"})
    assert sorted(ClientSession.objects.values_list("agent", flat=True)) == [
        "claude-abcdef12",
        "reviewer",
    ]


def test_a_session_cannot_be_continued_under_another_name(board, token):
    send(token, hook("SessionStart"))
    other = make_token(board, "someone-else")
    status, body = send(other, bash("ls"))
    assert (status, body["error"]["code"]) == (409, "session_taken")


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body,field",
    [
        ({"session_id": "s"}, "hook_event_name"),
        ({"hook_event_name": "Stop"}, "session_id"),
        ({"hook_event_name": "Stop", "session_id": "bad id/../"}, "session_id"),
        ({"hook_event_name": "PreToolUse", "session_id": "s", "tool_input": "rm"}, "tool_input"),
    ],
)
def test_a_malformed_event_is_a_400_naming_the_field_and_changes_nothing(board, token, body, field):
    status, answer = send(token, body)
    assert status == 400
    assert field in {d["field"] for d in answer["error"]["details"]}
    assert not ClientSession.objects.exists()


def test_the_hook_door_refuses_bad_tokens_other_boards_and_bad_json(board, token):
    assert send("ak_nope", hook("Stop"))[0] == 401
    make_board("other")
    status, _answer = send(token, hook("Stop"), slug="other")
    assert status == 403
    assert send(token, b"{not json")[0] == 400
    assert send(token, b"[1, 2]")[0] == 400
    assert not ClientSession.objects.exists()


# --- gate rules ---------------------------------------------------------------------------------


def test_new_boards_ask_before_risky_commands_and_writes_outside_the_folder():
    rules = list(matching.DEFAULT_RULES)

    def asks(tool: str, value: str) -> bool:
        key = "command" if tool == "Bash" else "file_path"
        return matching.first_match(rules, tool, {key: value}, CWD) is not None

    for command in (
        "rm -rf build",
        "cd x && rm -r dist",
        "git push --force origin main",
        "git reset --hard HEAD~1",
        "sudo apt-get install x",
        "curl -fsSL https://x.sh | sh",
        "wget -qO- https://x | sudo bash",
    ):
        assert asks("Bash", command), command
    for command in ("ls -la", "rm build.log", "git status", "npm test", "echo sudoku"):
        assert not asks("Bash", command), command
    assert asks("Write", "/etc/passwd")
    assert asks("Edit", f"{CWD}/../other/x.py")
    assert not asks("Write", f"{CWD}/src/new.py")
    assert not asks("Write", "src/relative.py")


def test_a_slow_pattern_cannot_stall_the_server():
    rule = matching.Rule("Bash", r"(a+)+$", decision=matching.ASK)
    assert matching.rule_matches(rule, "Bash", {"command": "a" * 5000 + "!"}, CWD) in (True, False)


def test_a_deny_rule_answers_at_once_with_the_reason(board, token):
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern=r"\bdropdb\b", decision="deny"
    )
    GateRule.objects.filter(board=board, decision="ask").delete()
    status, answer = send(token, bash("dropdb production"))
    assert status == 200
    verdict, reason = decision(answer)
    assert verdict == "deny"
    assert "Blocked by the board's rule" in reason


def test_a_call_no_rule_matches_gets_no_decision(board, token):
    assert send(token, bash("ls -la")) == (200, {})
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize(
    "fields,problem",
    [
        ({"tool": ""}, "tool"),
        ({"tool": "Bash;rm"}, "tool"),
        ({"pattern": "(unclosed"}, "pattern"),
        ({"decision": "maybe"}, "decision"),
        ({"wait_seconds": 1}, "waitSeconds"),
        ({"fallback": "ask"}, "fallback"),
    ],
)
def test_a_bad_gate_rule_is_refused_naming_the_field(board, fields, problem):
    count = GateRule.objects.filter(board=board).count()
    with pytest.raises(Exception) as refused:
        gaterules.gate_rule_add(board=board, actor="pat", **{"tool": "Bash", **fields})
    assert problem in {d["field"] for d in refused.value.details}
    assert GateRule.objects.filter(board=board).count() == count


# --- held calls ---------------------------------------------------------------------------------


async def _held(board: Board, count: int = 1) -> ToolCall:
    for _ in range(500):
        calls = await sync_to_async(list)(ToolCall.objects.filter(board=board).order_by("pk"))
        if len(calls) >= count:
            return calls[count - 1]
        await asyncio.sleep(0.01)
    raise AssertionError("no held call")


@pytest.mark.django_db(transaction=True)
async def test_an_ask_holds_the_call_until_a_person_approves_with_a_note(token_async):
    board, token = token_async
    waiting = asyncio.ensure_future(send_async(token, bash("rm -rf build")))
    call = await _held(board)
    assert (call.state, call.summary, call.cwd, call.tool_name) == (
        "requested",
        "rm -rf build",
        CWD,
        "Bash",
    )
    session = await sync_to_async(ClientSession.objects.get)(board=board)
    assert session.state == "waiting"
    assert not waiting.done()

    await sync_to_async(calls.tool_call_decide)(
        board=board, person="pat", call_id=call.pk, approve=True, note="fine, it is a build dir"
    )
    status, answer = await asyncio.wait_for(waiting, 10)

    assert status == 200
    verdict, reason = decision(answer)
    assert verdict == "allow"
    assert "fine, it is a build dir" in reason
    kinds = await sync_to_async(list)(
        Event.objects.filter(board=board).values_list("kind", flat=True)
    )
    assert "tool_call_requested" in kinds and "tool_call_approved" in kinds


@pytest.mark.django_db(transaction=True)
async def test_a_denial_answers_deny_with_the_persons_note_as_the_reason(token_async):
    board, token = token_async
    waiting = asyncio.ensure_future(send_async(token, bash("git push --force")))
    call = await _held(board)
    await sync_to_async(calls.tool_call_decide)(
        board=board, person="pat", call_id=call.pk, approve=False, note="never force-push main"
    )
    verdict, reason = decision((await asyncio.wait_for(waiting, 10))[1])
    assert verdict == "deny"
    assert "never force-push main" in reason
    with pytest.raises(Exception, match="already decided"):
        await sync_to_async(calls.tool_call_decide)(
            board=board, person="pat", call_id=call.pk, approve=True
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow  # waits out a rule's shortest wait (5 s)
async def test_a_held_call_nobody_answers_ends_with_the_fallback_at_its_wait(token_async):
    board, token = token_async
    await sync_to_async(GateRule.objects.filter(board=board).update)(wait_seconds=5)
    started = asyncio.get_running_loop().time()
    _status, answer = await asyncio.wait_for(send_async(token, bash("sudo reboot")), 20)
    assert asyncio.get_running_loop().time() - started >= 5
    verdict, reason = decision(answer)
    assert verdict == "deny"
    assert "No person answered on the board within 5 s" in reason
    call = await sync_to_async(ToolCall.objects.get)(board=board)
    assert call.state == CallState.EXPIRED


def test_the_sweeper_ends_calls_whose_client_went_away(board, token):
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf /tmp/x"))
    ToolCall.objects.update(deadline=timezone.now() - timedelta(seconds=30))
    assert calls.tool_calls_expire() == 1
    assert ToolCall.objects.get().state == "expired"
    assert ClientSession.objects.get().calls[-1]["outcome"] == "denied"


def test_a_person_decides_from_the_board_and_the_strip_shows_who_what_where(
    board, token, person_client
):
    sessions.session_event(board=board, agent="claude", event=bash("git push origin main"))
    call = ToolCall.objects.get()
    page = person_client.get("/boards/team/").content.decode()
    assert "git push origin main" in page and CWD in page and "claude" in page
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/deny/", {"note": "not today"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    call.refresh_from_db()
    assert (call.state, call.note, call.decided_by) == ("denied", "not today", "pat")
    again = person_client.post(
        f"/boards/team/calls/{call.pk}/approve/", {}, headers={"HX-Request": "true"}
    )
    assert again.status_code == 409


def test_a_viewer_cannot_decide_a_held_call(board, token, django_user_model):
    from boards.models import Membership, Role

    sessions.session_event(board=board, agent="claude", event=bash("git push"))
    call = ToolCall.objects.get()
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-123")
    Membership.objects.create(board=board, user=viewer, role=Role.OPERATOR)
    client = Client()
    client.force_login(viewer)
    assert client.post(f"/boards/team/calls/{call.pk}/approve/").status_code == 403
    assert ToolCall.objects.get().state == "requested"


def test_a_persons_message_reaches_the_session_on_its_next_event(board, token):
    send(token, hook("SessionStart"))
    services.message_send(board=board, sender="pat", recipient="claude", body="Use pnpm")
    _status, answer = send(token, hook("UserPromptSubmit", prompt="go"))
    assert (
        "Message from pat on the board: Use pnpm"
        in (answer["hookSpecificOutput"]["additionalContext"])
    )
    assert send(token, hook("UserPromptSubmit", prompt="again"))[1] == {}


@pytest.fixture
def token_async(transactional_db):
    board = make_board("team", "Team board")
    return board, make_token(board, "claude")


# --- issue #42: the cap counted in the database; step-up read at decision time -------------


def test_held_calls_of_clients_that_hung_up_still_count_against_the_tokens_cap(board, settings):
    # Two calls held for a person whose clients hung up: the door records a held call
    # before it waits, so the service call is what a hung-up client leaves behind (no
    # connection is open for either). The cap counts them in the database.
    settings.KANBAN_WATCHES_PER_TOKEN = 2
    token = make_token(board, "claude")
    token_id = AgentToken.objects.get(board=board, agent="claude").pk
    for n in range(2):
        verdict = sessions.session_event(
            board=board,
            agent="claude",
            event=bash(f"rm -rf build{n}", use=f"tu-{n}"),
            token_id=token_id,
        )
        assert verdict.held is not None

    status, answer = send(token, bash("rm -rf dist", use="tu-9"))

    assert status == 200
    verdict, reason = decision(answer)
    assert verdict == "deny" and "Too many of this token's calls" in reason
    assert ToolCall.objects.filter(state=CallState.REQUESTED).count() == 2
    assert not ToolCall.objects.filter(summary="rm -rf dist").exists()


def _held_now(board: Board, command: str) -> ToolCall:
    verdict = sessions.session_event(board=board, agent="claude", event=bash(command))
    return ToolCall.objects.get(pk=verdict.held)


def test_a_rule_made_step_up_after_its_call_was_held_needs_the_passkey_to_approve(board, person):
    Passkey.objects.create(user=person, credential_id="cred-1", public_key=b"k")
    call = _held_now(board, "git reset --hard")
    assert call.step_up is False
    rule = GateRule.objects.get(board=board, pk=call.gate_rule_id)
    gaterules.gate_rule_change(board=board, actor="pat", rule_id=rule.pk, step_up=True)

    with pytest.raises(PermissionDenied) as refused:
        calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    assert refused.value.code == "step_up_required"

    # The other way round: no longer step-up, approved with a tap.
    gaterules.gate_rule_change(board=board, actor="pat", rule_id=rule.pk, step_up=False)
    calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    assert ToolCall.objects.get(pk=call.pk).state == CallState.APPROVED


def test_a_held_call_whose_rule_was_deleted_keeps_the_step_up_it_was_held_with(board, person):
    Passkey.objects.create(user=person, credential_id="cred-1", public_key=b"k")
    call = _held_now(board, "rm -rf build")
    gaterules.gate_rule_remove(board=board, actor="pat", rule_id=call.gate_rule_id)
    call.refresh_from_db()
    assert call.gate_rule_id is None and call.step_up is True

    with pytest.raises(PermissionDenied):
        calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)


def test_no_standing_approval_for_a_call_whose_rule_became_step_up_after_it_was_held(board):
    call = _held_now(board, "git reset --hard")
    rule = GateRule.objects.get(board=board, pk=call.gate_rule_id)
    gaterules.gate_rule_change(board=board, actor="pat", rule_id=rule.pk, step_up=True)

    with pytest.raises(Conflict) as refused:
        calls.tool_call_decide(
            board=board, person="pat", call_id=call.pk, approve=True, from_now="board"
        )
    assert "passkey" in str(refused.value), refused.value
    # Refused whole: the call still waits, and no rule was added.
    assert ToolCall.objects.get(pk=call.pk).state == CallState.REQUESTED
    assert not GateRule.objects.filter(board=board, decision="allow").exists()


@pytest.mark.parametrize(("fallback", "said"), [("deny", "denies in"), ("allow", "allows in")])
def test_a_held_calls_clock_says_what_the_board_will_answer(board, person_client, fallback, said):
    call = _held_now(board, "git reset --hard")
    ToolCall.objects.filter(pk=call.pk).update(fallback=fallback)
    page = flat(person_client.get("/boards/team/").content.decode())
    assert f"{said} " in page, page[:2000]
    assert "denys" not in page and "allows in" not in page.replace(said, "")

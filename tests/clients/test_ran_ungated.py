"""A call that ran without the board's verdict is caught (issue #42, point 1): its hook was
stopped (a killed forwarder reads as a non-blocking error to most clients), and the call
ran though the board denied it, still held it, let it end by its fallback deny, or never
saw it asked. Its client's own after-call event tells the board: the record says it ran,
a Needs-you item waits for the board's approvers, the token is suspended (every door
refuses it; the hook door denies each call in the client's own answer) until a person
clears the item.

The payloads are each client's own (tests/support/hook_payloads.py), posted to its door."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, Client
from django.utils import timezone

from boards.clients import calls, registry, sessions
from boards.core.activity import describe
from boards.core.errors import NotFound
from boards.core.states import EventKind
from boards.gates import rules as gaterules
from boards.models import (
    AgentToken,
    Board,
    CallState,
    Event,
    GateRule,
    Membership,
    Reason,
    Role,
    ToolCall,
)
from boards.needs import reads
from tests.push.test_push import service, subscribe  # noqa: F401 (the fixture)
from tests.support.factories import make_board, make_token
from tests.support.hook_door import denied, post_hook
from tests.support.hook_payloads import shell_call
from tests.support.push_standin import Browser
from tests.support.workers import worker_threads

DEPLOY = "make deploy"
# Each client's after-call event, in its own name.
AFTER = {
    "claude-code": "PostToolUse",
    "codex": "PostToolUse",
    "qwen": "PostToolUse",
    "copilot": "PostToolUse",
    "gemini": "AfterTool",
    "opencode": "tool.execute.after",
}


@pytest.fixture
def board(db) -> Board:
    board = make_board("team", "Team board")
    gaterules.gate_rule_add(
        board=board,
        actor="pat",
        tool="Bash",
        pattern=r"^make\s+deploy\b",
        decision="deny",
        note="No deploys from agents",
    )
    return board


@pytest.fixture
def token(board) -> str:
    return make_token(board, "dev")


def after(client: str, call: dict, **fields) -> dict:
    """``call``'s after-call event as ``client`` sends it: the same call, ended."""
    return {**call, "hook_event_name": AFTER[client], **fields}


def tampering(board: Board) -> list[reads.Item]:
    return [i for i in reads.needs_you([board]) if i.reason == Reason.TAMPERING]


def suspended(board: Board) -> bool:
    return AgentToken.objects.get(board=board, agent="dev").suspended_at is not None


@pytest.mark.parametrize("client", registry.NAMES)
def test_a_denied_call_that_ran_is_recorded_as_run_and_waits_for_a_person(client, board, token):
    call = shell_call(client, DEPLOY)
    status, answer = post_hook(client, token, call)
    assert "No deploys from agents" in denied(client, answer)

    status, _ = post_hook(client, token, after(client, call))

    assert status == 200
    [ran] = ToolCall.objects.filter(board=board)
    assert ran.state == CallState.RAN and ran.ran_at is not None
    assert ran.summary == DEPLOY and ran.agent == "dev"
    [entry] = board.client_sessions.get().calls
    assert entry["outcome"] == calls.RAN_UNGATED
    [item] = tampering(board)
    assert item.question == (
        f"ran Bash `{DEPLOY}` without the board's verdict: its hook was stopped. Its token is "
        "suspended until you clear this; clear it once you have looked (its session may go "
        "on), or revoke the token"
    )
    assert [a.action for a in item.all_actions] == ["clear", "revoke-token"]
    [event] = Event.objects.filter(board=board, kind=EventKind.TOOL_CALL_RAN)
    assert event.data["why"] == "the board denied it" and event.data["call"] == ran.pk
    assert suspended(board)


@pytest.mark.parametrize("client", registry.NAMES)
def test_a_suspended_sessions_next_call_is_denied_until_a_person_clears_it(client, board, token):
    call = shell_call(client, DEPLOY)
    post_hook(client, token, call)
    post_hook(client, token, after(client, call))

    status, answer = post_hook(client, token, shell_call(client, "ls -la"))
    assert status == 200
    reason = denied(client, answer)
    assert "suspended" in reason and "clear the session on the board" in reason

    [item] = tampering(board)
    calls.tool_call_clear(board=board, person="pat", call_id=item.call.pk)
    assert not suspended(board) and not tampering(board)
    # A fresh call id: the roster's entry of the refused one is left as it was.
    assert post_hook(client, token, shell_call(client, "ls -la", session="s-2"))[1] == {}


def test_a_suspended_token_is_refused_at_the_tool_api_naming_why(board, token):
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))

    response = Client().post(
        "/api/boards/team/tools/TaskList",
        data="{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "token_suspended"
    assert f"dev ran Bash `{DEPLOY}` (the board denied it)" in error["message"]
    assert "A person must clear it on the board" in error["message"]


@pytest.mark.parametrize("client", registry.NAMES)
def test_a_call_the_board_never_saw_asked_is_caught_in_a_gated_session(client, board, token):
    assert post_hook(client, token, shell_call(client, "ls"))[1] == {}
    post_hook(client, token, after(client, shell_call(client, "ls")))
    assert not tampering(board)  # the call it saw asked ended as it should

    unseen = dict(shell_call(client, "rm -rf build"), tool_use_id="call-never-asked")
    if client in ("gemini", "copilot"):
        del unseen["tool_use_id"]  # they send no id: the call is matched by tool and input
    post_hook(client, token, after(client, unseen))

    [item] = tampering(board)
    assert item.call.summary == "rm -rf build"
    assert Event.objects.get(kind=EventKind.TOOL_CALL_RAN).data["why"] == (
        "the board never saw it asked"
    )
    assert suspended(board)


def test_a_session_whose_calls_never_reached_the_gate_is_not_taken_for_tampering(board, token):
    # Its hooks send the after-call events only (a setup with no gated hook): nothing to
    # compare with, so nothing is raised.
    post_hook("claude-code", token, after("claude-code", shell_call("claude-code", "rm -rf build")))
    assert not tampering(board) and not suspended(board)
    assert not ToolCall.objects.exists()


def held(board: Board, token: str, command: str, client: str = "claude-code") -> ToolCall:
    """A call held for a person, its client gone without waiting (the held request is
    not kept open: the service records it as the door does)."""
    event = registry.BY_NAME[client].adapter.normalise(shell_call(client, command))
    token_id = AgentToken.objects.get(board=board, agent="dev").pk
    verdict = sessions.session_event(
        board=board, agent="dev", event=event, client=client, token_id=token_id
    )
    assert verdict.held is not None
    return ToolCall.objects.get(pk=verdict.held)


@pytest.mark.parametrize("client", ["claude-code", "gemini"])
def test_a_call_still_held_for_a_person_that_ran_is_caught(client, board, token):
    call = held(board, token, "rm -rf build", client)
    post_hook(client, token, after(client, shell_call(client, "rm -rf build")))

    call.refresh_from_db()
    assert call.state == CallState.RAN
    assert [i.call.pk for i in tampering(board)] == [call.pk]
    assert not [i for i in reads.needs_you([board]) if i.reason == Reason.APPROVAL]
    assert Event.objects.get(kind=EventKind.TOOL_CALL_RAN).data["why"] == (
        "it was still waiting for a person's decision"
    )
    with pytest.raises(Exception) as late:
        calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    assert getattr(late.value, "code", "") == "call_decided"


def _expired(call: ToolCall, board: Board) -> None:
    ToolCall.objects.filter(pk=call.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    calls.tool_call_expire(board=board, call_id=call.pk)


def test_a_call_ended_by_its_fallback_deny_that_ran_is_caught(board, token):
    call = held(board, token, "rm -rf build")
    _expired(call, board)
    post_hook("claude-code", token, after("claude-code", shell_call("claude-code", "rm -rf build")))

    call.refresh_from_db()
    assert call.state == CallState.RAN  # no longer "expired": it ran
    assert Event.objects.get(kind=EventKind.TOOL_CALL_RAN).data["why"] == (
        "nobody answered in time and its rule denies it then"
    )
    assert suspended(board)


def test_a_call_a_person_denied_that_ran_says_who_denied_it(board, token):
    call = held(board, token, "rm -rf build")
    calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=False)
    post_hook("claude-code", token, after("claude-code", shell_call("claude-code", "rm -rf build")))

    call.refresh_from_db()
    assert call.state == CallState.RAN and call.decided_by == "pat"
    assert Event.objects.get(kind=EventKind.TOOL_CALL_RAN).data["why"] == "pat denied it"


def test_calls_the_board_allowed_end_as_they_ran(board, token):
    approved = held(board, token, "rm -rf build")
    calls.tool_call_decide(board=board, person="pat", call_id=approved.pk, approve=True)
    post_hook("claude-code", token, after("claude-code", shell_call("claude-code", "rm -rf build")))
    GateRule.objects.filter(board=board, note="Recursive delete").update(fallback="allow")
    lapsed = held(board, token, "rm -rf dist")
    _expired(lapsed, board)
    ended = dict(shell_call("claude-code", "rm -rf dist"), tool_use_id="call-1")
    post_hook(
        "claude-code", token, after("claude-code", ended, hook_event_name="PostToolUseFailure")
    )

    assert not tampering(board) and not suspended(board)
    assert [c["outcome"] for c in board.client_sessions.get().calls] == ["error"]


def test_a_stop_after_a_held_call_with_no_outcome_is_not_a_run(board, token):
    call = held(board, token, "rm -rf build")
    status, _ = post_hook("claude-code", token, {"hook_event_name": "Stop", "session_id": "s-1"})
    assert status == 200
    assert ToolCall.objects.get(pk=call.pk).state == CallState.REQUESTED
    assert not tampering(board) and not suspended(board)


def test_clearing_one_of_two_leaves_the_token_suspended_until_the_last(board, token):
    for n, command in enumerate(("make deploy", "make deploy-all")):
        call = dict(shell_call("claude-code", command), tool_use_id=f"call-{n}")
        post_hook("claude-code", token, call)
        post_hook("claude-code", token, after("claude-code", call))
    first, second = tampering(board)

    calls.tool_call_clear(board=board, person="pat", call_id=first.call.pk, note="seen")
    assert suspended(board)
    calls.tool_call_clear(board=board, person="pat", call_id=second.call.pk)
    assert not suspended(board)
    cleared = Event.objects.filter(kind=EventKind.TOOL_CALL_CLEARED).order_by("seq")
    assert [e.data["note"] for e in cleared] == ["seen", ""]
    assert ToolCall.objects.get(pk=first.call.pk).cleared_by == "pat"
    with pytest.raises(Exception) as again:
        calls.tool_call_clear(board=board, person="pat", call_id=first.call.pk)
    assert getattr(again.value, "code", "") == "call_cleared"


def test_revoking_from_the_item_revokes_the_token_for_good(board, token):
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))
    [item] = tampering(board)

    calls.tool_call_clear(board=board, person="pat", call_id=item.call.pk, revoke=True)

    assert not tampering(board)
    status, answer = post_hook("claude-code", token, shell_call("claude-code", "ls"))
    assert (status, answer["error"]["code"]) == (403, "token_revoked")
    assert Event.objects.get(kind=EventKind.TOOL_CALL_CLEARED).data["revoked"] is True


def test_only_a_call_that_ran_ungated_can_be_cleared(board, token):
    call = held(board, token, "rm -rf build")
    with pytest.raises(NotFound):
        calls.tool_call_clear(board=board, person="pat", call_id=call.pk)


def test_the_item_is_in_the_persons_inbox_on_the_board_and_in_the_log(board, token, person_client):
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))

    [item] = [i for i in person_client.get("/api/inbox").json()["items"]]
    assert item["reason"] == "tampering" and item["agent"] == "dev"
    assert item["recommended"]["action"] == "clear"
    assert [a["action"] for a in item["actions"]] == ["revoke-token"]
    page = person_client.get("/boards/team/").content.decode()
    assert 'data-reason="tampering"' in page
    assert "dev ran Bash `make deploy` without the board" in " ".join(page.split())
    [event] = Event.objects.filter(kind=EventKind.TOOL_CALL_RAN)
    assert describe(event.kind, None, event.actor, event.data) == (
        "dev ran Bash `make deploy` without the board's verdict (the board denied it): "
        "its hook was stopped"
    )


@pytest.mark.django_db(transaction=True)
async def test_a_held_request_answers_deny_once_its_call_is_reported_run():
    board = await database_sync_to_async(make_board)("team")
    token = await database_sync_to_async(make_token)(board, "dev")
    headers = {"Authorization": f"Bearer {token}"}

    async def post(body: dict) -> dict:
        response = await AsyncClient().post(
            "/api/boards/team/hooks/claude-code",
            data=json.dumps(body),
            content_type="application/json",
            headers=headers,
        )
        return json.loads(response.content)

    call = shell_call("claude-code", "rm -rf build")
    waiting = asyncio.create_task(post(call))
    for _ in range(200):  # until the call is held
        if await ToolCall.objects.filter(state=CallState.REQUESTED).aexists():
            break
        await asyncio.sleep(0.05)
    await post(after("claude-code", call))

    answer = await asyncio.wait_for(waiting, 10)
    assert "suspended" in denied("claude-code", answer)
    assert await ToolCall.objects.filter(state=CallState.RAN).acount() == 1


def test_a_suspended_session_cannot_complete_its_plans_tasks(board, token):
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))
    completed = {
        "hook_event_name": "TaskCompleted",
        "session_id": "s-1",
        "task_id": "1",
        "task_subject": "Ship it",
    }
    status, answer = post_hook("claude-code", token, completed)
    assert status == 200
    assert answer["decision"] == "block" and "suspended" in answer["reason"]


def test_the_same_after_call_event_twice_raises_one_item_and_stays_ran(board, token):
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))
    post_hook("claude-code", token, after("claude-code", call))

    assert len(tampering(board)) == 1
    assert [c["outcome"] for c in board.client_sessions.get().calls] == [calls.RAN_UNGATED]


# -- the item's buttons on the board (boards/web/views/tasks.py's call_decide)


def _ran_item(board: Board, token: str) -> reads.Item:
    call = shell_call("claude-code", DEPLOY)
    post_hook("claude-code", token, call)
    post_hook("claude-code", token, after("claude-code", call))
    [item] = tampering(board)
    return item


def test_an_approver_clears_the_item_from_the_board_and_the_session_goes_on(
    board, token, django_user_model
):
    user = django_user_model.objects.create_user(username="ann", password="pw-ann-123")
    Membership.objects.create(board=board, user=user, role=Role.APPROVER)
    approver = Client()
    approver.force_login(user)
    item = _ran_item(board, token)
    [clear] = [a for a in item.all_actions if a.action == "clear"]
    [revoke] = [a for a in item.all_actions if a.action == "revoke-token"]

    assert approver.post(revoke.url).status_code == 403  # revoking is an admin's
    assert suspended(board)
    assert approver.post(clear.url, {"note": "looked: fine"}).status_code == 302
    assert not suspended(board) and not tampering(board)
    assert ToolCall.objects.get(pk=item.call.pk).cleared_by == "ann"


def test_an_admin_revokes_the_token_from_the_item(board, token, person_client):
    item = _ran_item(board, token)
    [revoke] = [a for a in item.all_actions if a.action == "revoke-token"]
    assert person_client.post(revoke.url).status_code == 302  # pat is the board's admin
    assert AgentToken.objects.get(board=board, agent="dev").revoked_at is not None


# -- pushed like approvals are (boards/push/notices.py)


@pytest.mark.django_db(transaction=True)
def test_the_item_is_pushed_to_the_devices_approvals_are_pushed_to(
    board,
    token,
    person_client,
    service,  # noqa: F811 (the push service's fixture)
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    call = shell_call("claude-code", DEPLOY)
    with worker_threads():
        post_hook("claude-code", token, call)
        post_hook("claude-code", token, after("claude-code", call))
        (push,) = service.wait(1)
    data = push.data
    assert data["title"] == "dev (claude-code) ran Bash without the board's verdict: make deploy"
    assert "without the board's verdict: its hook was stopped" in data["body"]
    assert data["actions"] == []  # cleared on the page, never from a tap


def test_the_end_of_a_tool_the_session_was_never_asked_about_is_not_taken_for_tampering(
    board, token
):
    # The session's shell calls reach the gate; its client reports the end of another tool
    # it sent no PreToolUse for (a client's own tool, a version's quirk): no suspension.
    assert post_hook("claude-code", token, shell_call("claude-code", "ls"))[1] == {}
    post_hook("claude-code", token, after("claude-code", shell_call("claude-code", "ls")))
    other = dict(
        shell_call("claude-code", "ls"),
        tool_name="NotebookEdit",
        tool_input={"notebook_path": "a.ipynb", "new_source": "x"},
        tool_use_id="call-of-another-tool",
    )
    post_hook("claude-code", token, after("claude-code", other))
    assert not tampering(board) and not suspended(board)

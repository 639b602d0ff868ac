"""Step-up approvals (SPEC §14): what a person with a passkey must confirm with it."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.utils import timezone

from boards.clients import calls, sessions
from boards.core import services
from boards.core.errors import PermissionDenied
from boards.core.services import stepup
from boards.gates import matching
from boards.models import GateRule, Membership, Passkey, PushNotice, StepUp, ToolCall
from boards.push import notices
from devtools.liveserver import Cluster, wait_until
from tests.push.test_push import act, service, subscribe  # noqa: F401 (the fixture)
from tests.support.push_standin import Browser

CWD = "/home/dev/project"


def bash(command: str) -> dict:
    return {
        "hook_event_name": "PreToolUse",
        "session_id": "s-1",
        "cwd": CWD,
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "tu-1",
    }


def held(board, command: str) -> ToolCall:
    sessions.session_event(board=board, agent="claude", event=bash(command))
    return ToolCall.objects.get(summary=command)


def with_passkey(user) -> Passkey:
    return Passkey.objects.create(user=user, credential_id="cred-1", public_key=b"k")


def test_new_boards_mark_recursive_delete_git_push_and_sudo_step_up(board):
    marked = dict(GateRule.objects.filter(board=board).values_list("note", "step_up"))
    assert {note for note, step_up in marked.items() if step_up} == {
        "Recursive delete",
        "git push",
        "sudo",
    }
    assert [r.note for r in matching.DEFAULT_RULES if r.step_up] == [
        "Recursive delete",
        "git push",
        "sudo",
    ]


def test_a_held_call_keeps_its_rules_step_up(board, person):
    assert held(board, "rm -rf build").step_up is True
    assert held(board, "git reset --hard").step_up is False


def test_approving_a_step_up_call_needs_a_recent_assertion_from_a_person_with_a_passkey(
    board, person
):
    call = held(board, "rm -rf build")
    with_passkey(person)
    with pytest.raises(PermissionDenied) as refused:
        calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    assert refused.value.code == "step_up_required"
    assert ToolCall.objects.get(pk=call.pk).state == "requested"

    old = StepUp.objects.create(
        user=person, board=board, item=f"call-{call.pk}", at=timezone.now() - timedelta(minutes=6)
    )
    with pytest.raises(PermissionDenied):
        calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    old.delete()
    stepup.step_up_record(user=person, board=board, item_key=f"call-{call.pk}")
    calls.tool_call_decide(board=board, person="pat", call_id=call.pk, approve=True)
    assert ToolCall.objects.get(pk=call.pk).state == "approved"


def test_deny_never_needs_a_passkey_and_no_passkey_approves_as_before(board, person):
    with_passkey(person)
    first = held(board, "sudo reboot")
    calls.tool_call_decide(board=board, person="pat", call_id=first.pk, approve=False)
    assert ToolCall.objects.get(pk=first.pk).state == "denied"
    Passkey.objects.all().delete()
    second = held(board, "git push origin main")
    calls.tool_call_decide(board=board, person="pat", call_id=second.pk, approve=True)
    assert ToolCall.objects.get(pk=second.pk).state == "approved"


def test_a_board_may_make_its_gated_tasks_step_up(board, person, alice):
    services.board_settings(board=board, actor="pat", stepUpApprovals=True)
    with_passkey(person)
    alice.create("Migrate", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    with pytest.raises(PermissionDenied):
        services.approval_decide(board=board, person="pat", task_id="1", approve=True)
    task = board.tasks.get(number=1)
    stepup.step_up_record(user=person, board=board, item_key=stepup.task_key(task))
    services.approval_decide(board=board, person="pat", task_id="1", approve=True)


def test_the_board_setting_takes_only_true_or_false(board):
    with pytest.raises(Exception) as refused:
        services.board_settings(board=board, actor="pat", stepUpApprovals="yes")
    assert getattr(refused.value, "status", None) == 400


def test_a_step_up_calls_push_carries_deny_only_for_a_person_with_a_passkey(
    board,
    person,
    person_client,
    service,  # noqa: F811 (the fixture)
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    with_passkey(person)
    call = held(board, "rm -rf build")
    assert notices.board_sync(board.pk) == 1
    (push,) = service.wait(1)
    assert push.data["title"] == "claude (claude-code) asks to run Bash: rm -rf build"
    assert [a["action"] for a in push.data["actions"]] == ["deny"]
    assert PushNotice.objects.get().item == f"call-{call.pk}"


def test_a_refused_link_is_spent_and_never_works_after(
    board,
    person,
    person_client,
    service,  # noqa: F811 (the fixture)
):
    """A push's link refused with 403 (its person no longer a decider; a step-up missing)
    is used up: it does not wait for whoever holds it to try again later."""
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    first, second = held(board, "rm -rf build"), held(board, "rm -rf dist")
    assert notices.board_sync(board.pk) == 2
    pushed = {p.data["tag"].rsplit(":", 1)[1]: p for p in service.wait(2)}
    approve_first = pushed[f"call-{first.pk}"].data["actions"][0]["url"]
    approve_second = pushed[f"call-{second.pk}"].data["actions"][0]["url"]

    # Pushed before the person had a passkey: the Approve link needs one now.
    with_passkey(person)
    reply = act(approve_first)
    assert (reply.status_code, reply.json()["error"]["code"]) == (403, "step_up_required")
    stepup.step_up_record(user=person, board=board, item_key=f"call-{first.pk}")
    reply = act(approve_first)
    assert (reply.status_code, reply.json()["error"]["code"]) == (409, "push_link_used")
    assert ToolCall.objects.get(pk=first.pk).state == "requested"

    # The person lost the board (a lapsed membership): the link is spent, not paused.
    membership = Membership.objects.get(user=person, board=board)
    role = membership.role
    membership.delete()
    stepup.step_up_record(user=person, board=board, item_key=f"call-{second.pk}")
    assert act(approve_second).status_code == 403
    Membership.objects.create(user=person, board=board, role=role)
    assert act(approve_second).status_code == 409
    assert ToolCall.objects.get(pk=second.pk).state == "requested"


def test_a_links_secret_is_in_its_fragment_and_never_in_the_access_log(
    board,
    person_client,
    service,  # noqa: F811 (the fixture)
    tmp_path,
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    held(board, "git reset --hard")
    assert notices.board_sync(board.pk) == 1
    (push,) = service.wait(1)
    urls = [a["url"] for a in push.data["actions"]]
    secrets = []
    for url, action in zip(urls, ("approve", "deny"), strict=True):
        parts = urlsplit(url)
        (secret,) = parse_qs(parts.fragment)["t"]
        assert (parts.path, parts.query) == (f"/push/act/{action}/", "")
        secrets.append(secret)

    # A real server's access log, as the service worker posts a link.
    cluster = Cluster(tmp_path)
    try:
        base = cluster.start()
        for url, secret in zip(urls, secrets, strict=True):
            request = urllib.request.Request(
                base + urlsplit(url).path,
                data=urlencode({"token": secret}).encode(),
                method="POST",
            )
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(request, timeout=10)  # another database: no such link
            assert answer.value.code == 404
        (server,) = cluster.servers
        wait_until(lambda: "/push/act/deny/" in server.log(), timeout=5, what="the access log")
        log = server.log()
        assert "POST /push/act/approve/" in log
        assert not [secret for secret in secrets if secret in log], log
    finally:
        cluster.stop()

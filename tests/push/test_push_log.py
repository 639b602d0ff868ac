"""Every push, action and step-up in the board's event log (SPEC §14 item 5): one event
per item however many devices were told, who decided through a push, who confirmed with
a passkey."""

from __future__ import annotations

import pytest
from django.test import Client

from boards.clients import sessions
from boards.core import services
from boards.core.activity import describe
from boards.core.services import pushes, stepup
from boards.core.states import EventKind
from boards.models import Event, Membership, Role, ToolCall
from boards.push import notices
from tests.push.test_push import act, service, subscribe  # noqa: F401 (the fixture)
from tests.support.push_standin import Browser

PUSH_KINDS = (
    EventKind.PUSHED,
    EventKind.PUSH_WITHDRAWN,
    EventKind.PUSH_ACTED,
    EventKind.STEP_UP,
)


def push_events(board) -> list[tuple[str, int | None, str, dict]]:
    rows = Event.objects.filter(board=board, kind__in=PUSH_KINDS).order_by("seq")
    return [(e.kind, e.task_number, e.actor, e.data) for e in rows]


def sentences(board) -> list[str]:
    rows = Event.objects.filter(board=board, kind__in=PUSH_KINDS).order_by("seq")
    return [describe(e.kind, e.task_number, e.actor, e.data) for e in rows]


@pytest.fixture
def two_devices(person_client, person, board, service, django_user_model):  # noqa: F811
    """Pat's phone and laptop, and Sam's phone (an approver of the board)."""
    for name in ("phone", "laptop"):
        browser = Browser()
        assert subscribe(person_client, service.endpoint(browser), browser, name).status_code == 201
    sam = django_user_model.objects.create_user("sam", password="pw")
    Membership.objects.create(board=board, user=sam, role=Role.APPROVER)
    other = Client()
    other.force_login(sam)
    browser = Browser()
    assert subscribe(other, service.endpoint(browser), browser, "sam").status_code == 201
    return service


def test_an_item_pushed_to_three_devices_is_one_event_and_its_withdrawal_one_more(
    board, alice, two_devices
):
    alice.create("Deploy", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    version = board.tasks.get(number=1).version
    assert notices.board_sync(board.pk) == 3
    assert push_events(board) == [
        (EventKind.PUSHED, 1, "", {"item": f"task-1@{version}", "devices": 3}),
    ]
    assert notices.board_sync(board.pk) == 0  # told already: nothing sent, nothing recorded
    assert len(push_events(board)) == 1

    services.approval_decide(board=board, person="pat", task_id="1", approve=False)
    assert notices.board_sync(board.pk) == 3
    assert push_events(board)[1:] == [
        (EventKind.PUSH_WITHDRAWN, 1, "", {"item": f"task-1@{version}", "devices": 3}),
    ]
    assert sentences(board) == [
        "#1 pushed to 3 devices",
        "#1 no longer waits: its push withdrawn from 3 devices",
    ]


def test_a_refusing_push_service_is_counted_apart(board, alice, two_devices):
    two_devices.answers = [500]
    alice.create("Deploy", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    notices.board_sync(board.pk)
    ((kind, _, _, data),) = push_events(board)
    assert (kind, data["devices"], data["failed"]) == (EventKind.PUSHED, 2, 1)
    assert sentences(board)[0] == "#1 pushed to 2 devices (1 refused it)"


def test_a_decision_through_a_push_link_is_logged_with_its_person(
    board,
    alice,
    person_client,
    service,  # noqa: F811 (the fixture)
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    sessions.session_event(
        board=board,
        agent="claude",
        event={
            "hook_event_name": "PreToolUse",
            "session_id": "s-1",
            "cwd": "/home/dev/project",
            "tool_name": "Bash",
            "tool_input": {"command": "git reset --hard"},
            "tool_use_id": "tu-1",
        },
    )
    call = ToolCall.objects.get()
    assert notices.board_sync(board.pk) == 1
    (push,) = service.wait(1)
    assert act(push.data["actions"][1]["url"]).json() == {"decided": "deny"}

    facts = {"item": f"call-{call.pk}", "agent": "claude", "tool": "Bash"}
    facts["summary"] = "git reset --hard"
    assert push_events(board) == [
        (EventKind.PUSHED, None, "", {**facts, "devices": 1}),
        (EventKind.PUSH_ACTED, None, "pat", {**facts, "action": "deny"}),
    ]
    assert sentences(board)[1] == "claude's Bash `git reset --hard` denied from a push by pat"
    # The decision's own event stays the one that says what was decided.
    assert Event.objects.filter(board=board, kind=EventKind.TOOL_CALL_DENIED).count() == 1


def test_a_step_up_is_logged_for_its_item_and_person(board, person, alice):
    alice.create("Deploy", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    task = board.tasks.get(number=1)
    stepup.step_up_record(user=person, board=board, item_key=stepup.task_key(task))
    assert push_events(board) == [
        (EventKind.STEP_UP, 1, "pat", {"item": f"task-1@{task.version}"}),
    ]
    assert sentences(board) == ["pat confirmed approving #1 with a passkey"]


def test_a_push_record_wakes_no_push_and_redraws_no_card(
    board, alice, published, django_capture_on_commit_callbacks
):
    alice.create("Deploy")
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.pushes_record(
            board=board, pushed={"task-1@1": pushes.Sent(2)}, again={}, withdrawn={}
        )
    (sent,) = published
    assert sent.touched == [] and sent.header is False

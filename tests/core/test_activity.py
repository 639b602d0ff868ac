"""What events say to people (issue 15): sentences, signals, and the events each push carries."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from boards.core import services
from boards.core.activity import describe, notifies, signal_of
from boards.core.events import changes_header
from boards.core.fields import TASK_FIELDS
from boards.core.reasons import REASONS
from boards.core.states import APPROVAL_REQUESTED, FAILED, NEEDS_ATTENTION, EventKind, Reason
from boards.models import Event
from tests.core.test_leases import lapse
from tests.support.htmltext import flat
from tests.web.test_consumers import connected_at_current_seq


def test_a_task_that_fails_max_attempts_times_raises_needs_attention_once(alice, board):
    services.board_settings(board=board, actor="pat", maxAttempts=2)
    alice.create("Flaky")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    lapse(board, 1)
    assert services.leases_sweep() == 1  # timed out: the first failure
    assert not Event.objects.filter(kind="needs_attention").exists()
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "failed"}).status == 200
    events = list(Event.objects.filter(board=board, kind="needs_attention"))
    assert [(e.task_number, e.data["failures"]) for e in events] == [(1, 2)]
    assert describe("needs_attention", 1, "alice", events[0].data) == (
        "#1 needs you: it failed or timed out 2 times (the board allows 2); "
        "retry it, reassign it or cancel it"
    )


@pytest.mark.parametrize(
    ("kind", "data", "sentence", "signal"),
    [
        (
            "status",
            {"fields": {"status": {"from": "in_progress", "to": "completed"}}},
            "#12 moved to Completed by worker-2",
            "completed",
        ),
        (
            "status",
            {"fields": {"status": {"from": "in_progress", "to": "failed"}}},
            "#12 moved to Failed by worker-2",
            "failed",
        ),
        (
            "approval_requested",
            {"reason": "deploys"},
            "#12 awaits approval, requested by worker-2: “deploys”",
            "approval_requested",
        ),
        ("denied", {"note": "not now"}, "#12 denied by worker-2: “not now”", "approval_decided"),
        ("reclaimed", {"owner": "bot"}, "#12 returned to Pending: bot's lease lapsed", "reclaimed"),
        ("updated", {"fields": {"notes": {}}}, "#12 updated by worker-2 (notes)", None),
    ],
)
def test_events_read_as_one_sentence_and_raise_their_signal(kind, data, sentence, signal):
    assert describe(kind, 12, "worker-2", data) == sentence
    assert signal_of(kind, data) == signal


@pytest.mark.django_db(transaction=True)
async def test_each_push_carries_its_events_as_sentences_and_the_next_replaces_them(
    open_socket, board
):
    communicator = await connected_at_current_seq(open_socket, board)
    try:
        await sync_to_async(services.task_create)(board=board, actor="worker-2", subject="Ship")
        first = flat(await communicator.receive_from(timeout=5))
        assert '<ul id="board-events" hidden hx-swap-oob="true">' in first
        assert 'data-kind="created" data-task="1" data-actor="worker-2"' in first
        assert "#1 “Ship” created by worker-2</li>" in first
        await sync_to_async(services.task_update)(
            board=board, actor="worker-2", task_id="1", status="completed"
        )
        second = flat(await communicator.receive_from(timeout=5))
        assert 'data-signal="completed">#1 moved to Completed by worker-2</li>' in second
        assert "created by" not in second
    finally:
        await communicator.disconnect()


def test_each_reason_notifies_as_its_rows_signal():
    # A person told only of approvals hears of approvals and of calls that ran without the
    # board's verdict; one told of failures hears of failures; anything else is "needs
    # attention", which whoever chose it hears of every item.
    for reason, row in REASONS.items():
        assert notifies(reason, {row.signal}), reason
        assert notifies(reason, {NEEDS_ATTENTION}), reason
    assert notifies(Reason.TAMPERING, {APPROVAL_REQUESTED})
    assert notifies(Reason.FAILED, {FAILED}) and not notifies(Reason.FAILED, {APPROVAL_REQUESTED})
    assert not notifies(Reason.NO_PROGRESS, {APPROVAL_REQUESTED, FAILED})


def test_a_change_to_quiet_fields_alone_leaves_the_header_as_it_was():
    quiet = {row.wire for row in TASK_FIELDS if row.quiet}
    assert quiet == {"description", "activeForm", "prompt", "result", "notes"}
    updated = Event(kind=EventKind.UPDATED, data={"fields": dict.fromkeys(quiet)})
    assert not changes_header([updated])
    for loud in ("subject", "owner"):
        changed = Event(kind=EventKind.UPDATED, data={"fields": {loud: {"to": "x"}}})
        assert changes_header([changed]), loud

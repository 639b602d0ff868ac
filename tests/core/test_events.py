"""Every change records its events and publishes after commit; a failed broadcast never fails a write."""

import pytest

from boards.core import events, services
from boards.core.errors import Conflict
from boards.models import Event, Task
from tests.support.factories import make_task


def kinds(board):
    return list(
        Event.objects.filter(board=board).order_by("seq").values_list("kind", "task_number")
    )


def test_completing_a_blocker_records_status_and_unblocked_events(board):
    make_task(board, "A")
    make_task(board, "B", blocked_by=["1"])
    start = Event.objects.filter(board=board).count()
    services.task_update(board=board, actor="alice", task_id="1", status="completed")
    new = list(Event.objects.filter(board=board).order_by("seq")[start:])
    assert [(e.kind, e.task_number, e.actor) for e in new] == [
        ("status", 1, "alice"),
        ("unblocked", 2, "alice"),
    ]
    assert new[0].data == {"fields": {"status": {"from": "pending", "to": "completed"}}}


def test_creating_a_board_records_its_first_event(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        board = services.board_create(slug="fresh", name="Fresh", actor="pat")
    event = Event.objects.get(board=board)
    assert (event.seq, event.kind, event.actor) == (1, "board_created", "pat")
    assert event.data == {"slug": "fresh", "name": "Fresh"}
    assert len(callbacks) == 1


def test_event_sequence_is_per_board_and_gapless(board, other_board):
    make_task(board, "A")
    make_task(other_board, "X")
    make_task(board, "B")
    # Event 1 of each board is its creation.
    assert list(Event.objects.filter(board=board).values_list("seq", flat=True)) == [1, 2, 3]
    assert list(Event.objects.filter(board=other_board).values_list("seq", flat=True)) == [1, 2]


def test_claim_records_a_claimed_event_and_noop_records_nothing(board):
    make_task(board, "A")
    services.task_claim(board=board, agent="alice", task_id="1")
    services.task_claim(board=board, agent="alice", task_id="1")
    assert kinds(board) == [("board_created", None), ("created", 1), ("claimed", 1)]


def test_refused_write_records_nothing(board):
    make_task(board, "A")
    make_task(board, "B", blocked_by=["1"])
    before = kinds(board)
    with pytest.raises(Conflict):
        services.task_claim(board=board, agent="alice", task_id="2")
    assert kinds(board) == before


def test_publish_waits_for_commit(board, django_capture_on_commit_callbacks, published):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        make_task(board, "A")
    assert published == []
    assert len(callbacks) == 1
    callbacks[0]()
    [update] = published
    assert update.board_id == board.pk
    assert update.kinds == ["created"]
    assert update.touched == [1]
    assert update.reset is False
    assert update.header is True


def test_a_failing_broadcast_does_not_fail_the_write(
    board, django_capture_on_commit_callbacks, monkeypatch
):
    def broken_layer():
        raise ConnectionError("redis is down")

    monkeypatch.setattr(events, "get_channel_layer", broken_layer)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = services.task_create(board=board, actor="alice", subject="Still saved")
    assert Task.objects.get(board=board, number=outcome.task_number).subject == "Still saved"


def test_reset_records_a_reset_event_and_keeps_the_log(board):
    make_task(board, "A")
    services.board_reset(board=board, actor="pat")
    assert kinds(board) == [("board_created", None), ("created", 1), ("reset", None)]


def test_only_changes_that_can_move_counts_rerender_the_header(
    board, django_capture_on_commit_callbacks, published
):
    make_task(board, "A")
    with django_capture_on_commit_callbacks(execute=True):
        services.task_update(
            board=board, actor="alice", task_id="1", notes="halfway", metadata={"p": 50}
        )
        services.task_update(board=board, actor="alice", task_id="1", status="completed")
    quiet, loud = published
    assert (quiet.kinds, quiet.touched, quiet.header) == (["updated"], [1], False)
    assert (loud.kinds, loud.touched, loud.header) == (["status"], [1], True)


@pytest.mark.django_db(transaction=True)
async def test_a_board_nobody_watches_renders_nothing_for_a_write(board, monkeypatch):
    """The fragments cost more than the write: on the in-memory layer (where this process
    knows every listener) they are rendered only when a board or a TaskWatch listens."""
    from asgiref.sync import sync_to_async
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    rendered = []
    render = events.render_update
    monkeypatch.setattr(
        events, "render_update", lambda *a, **k: rendered.append(a[1]) or render(*a, **k)
    )
    layer = get_channel_layer()
    create = sync_to_async(make_task)
    await create(board, "Nobody looks")
    if not isinstance(layer, InMemoryChannelLayer):
        # Redis: another process's browsers may listen, so every write is rendered.
        assert rendered == [[1]]
        return
    assert rendered == []

    channel = await layer.new_channel()
    await layer.group_add(events.group_name(board.pk), channel)
    await create(board, "Someone looks")
    assert rendered == [[2]]
    message = await layer.receive(channel)
    assert [e["taskId"] for e in message["events"]] == ["2"]
    assert "Someone looks" in message["cards"]["2"]

    await layer.group_discard(events.group_name(board.pk), channel)
    await create(board, "Nobody again")
    assert rendered == [[2]]

"""Cancel the chain: the person cancels what the panel showed them, exactly that (a chain
that changed since is refused and shown again), and a long chain in chunks."""

from __future__ import annotations

from typing import Any

from boards.core import services
from boards.models import Board, Event, Task
from boards.needs import decisions
from tests.support.factories import make_task
from tests.support.htmltext import flat


def _snapshot(board: Board) -> tuple[Any, ...]:
    tasks = tuple(Task.objects.filter(board=board).order_by("number").values_list())
    return tasks, Event.objects.filter(board=board).count()


def _failed_with_dependents(board: Board, count: int) -> None:
    """#1 failed, and ``count`` pending tasks waiting on it (#2 …)."""
    make_task(board, "Build")
    ops = [{"op": "create", "subject": f"Step {n}", "blocked_by": ["1"]} for n in range(count)]
    for start in range(0, count, 1_000):
        services.task_batch(board=board, actor="alice", ops=ops[start : start + 1_000])
    services.task_update(board=board, actor="pat", person=True, task_id=1, status="failed")


def test_the_panel_shows_the_chain_and_cancels_exactly_that(board, person_client):
    _failed_with_dependents(board, 2)
    make_task(board, "After step 2", blocked_by=["3"])  # 4, through #3
    panel = flat(person_client.get(f"/boards/{board.slug}/tasks/1/").content)
    assert 'name="chain" value="2 3 4"' in panel
    assert "cancels 3 tasks: #2, #3, #4" in panel
    done = person_client.post(f"/boards/{board.slug}/tasks/1/cancel-chain/", {"chain": "2 3 4"})
    assert done.status_code == 302
    statuses = dict(Task.objects.filter(board=board).values_list("number", "status"))
    assert statuses == {1: "failed", 2: "cancelled", 3: "cancelled", 4: "cancelled"}


def test_a_chain_that_changed_since_it_was_shown_is_refused(board, person_client, alice):
    _failed_with_dependents(board, 2)
    panel = flat(person_client.get(f"/boards/{board.slug}/tasks/1/").content)
    assert 'name="chain" value="2 3"' in panel
    alice.create("Slipped in", blockedBy=["2"])  # 4: the person never saw it
    before = _snapshot(board)
    refused = person_client.post(
        f"/boards/{board.slug}/tasks/1/cancel-chain/", {"chain": "2 3"}, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 409
    assert "changed since it was shown (2 to cancel then, 3 now)" in flat(refused.content)
    assert 'name="chain" value="2 3 4"' in flat(refused.content)  # shown again, as it is
    assert _snapshot(board) == before


def test_a_posted_chain_that_is_not_numbers_is_refused_naming_the_field(board, person_client):
    _failed_with_dependents(board, 1)
    refused = person_client.post(
        f"/boards/{board.slug}/tasks/1/cancel-chain/", {"chain": "2 x"}, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 400
    assert "chain" in flat(refused.content)
    assert Task.objects.get(board=board, number=2).status == "pending"


def test_a_long_chain_is_cancelled_in_chunks(board, django_capture_on_commit_callbacks):
    _failed_with_dependents(board, 450)
    shown = decisions.chain_to_cancel(Task.objects.get(board=board, number=1))
    assert len(shown) == 450
    seq = Event.objects.filter(board=board).count()
    with django_capture_on_commit_callbacks(execute=False) as writes:
        outcome = decisions.cancel_chain(board=board, person="pat", task_id=1, shown=shown)
    # One unit of work (one commit, one push) per chunk of at most CHAIN_CHUNK tasks.
    assert len(writes) == 3 == -(-450 // decisions.CHAIN_CHUNK)
    assert {c["taskId"] for c in outcome.changes} == {str(n) for n in shown}
    assert Task.objects.filter(board=board, status="cancelled").count() == 450
    assert Event.objects.filter(board=board).count() - seq == 450

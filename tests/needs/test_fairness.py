"""No board (and no agent) starves another: the roster keeps each agent's latest session
whatever how many sessions others have had, and the sweeper reads each board with a
limit of its own (SPEC §12, issue #39: one board's 2,000 long holds stopped detection
everywhere; the roster read the first 500 sessions by name)."""

import pytest

from boards.core.selectors import live_sessions
from boards.models import Task
from boards.needs import decisions
from tests.clients.test_hooks import hook, send
from tests.needs.test_no_progress import after
from tests.support.factories import make_token


@pytest.mark.django_db
def test_the_roster_keeps_each_agents_latest_session_whatever_others_have(board):
    busy, late = make_token(board, "aaron"), make_token(board, "zoe")
    for n in range(4):
        assert send(busy, hook("SessionStart", session=f"a-{n}"))[0] == 200
    assert send(late, hook("SessionStart", session="z-1"))[0] == 200
    assert send(late, hook("Notification", session="z-1", message="Waiting for you"))[0] == 200
    sessions = live_sessions(board)
    assert sorted(sessions) == ["aaron", "zoe"]
    assert sessions["aaron"].session_id == "a-3"
    assert sessions["zoe"].state == "waiting"


@pytest.mark.django_db
def test_the_no_progress_sweep_reads_each_board_with_its_own_limit(
    alice, agent_factory, board, other_board, monkeypatch
):
    monkeypatch.setattr(decisions, "SWEPT_PER_BOARD", 2)
    for n in range(3):
        alice.create(f"Long {n}")
        assert alice.call("TaskClaim", {"taskId": str(n + 1)}).status == 200
    carol = agent_factory("carol", on=other_board)
    carol.create("Long there")
    assert carol.call("TaskClaim", {"taskId": "1"}).status == 200

    decisions.needs_sweep(now=after(11))
    assert Task.objects.get(board=other_board, number=1).needs == "no_progress"
    # This board's first two (longest held) this sweep, its third at the next.
    assert Task.objects.filter(board=board, needs="no_progress").count() == 2
    decisions.needs_sweep(now=after(12))
    assert Task.objects.filter(board=board, needs="no_progress").count() == 3

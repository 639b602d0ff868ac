"""Work never gets stuck silently (issue 13): leases, attempts, retries, stuck, priority, WIP.

Through the tool API (Django's test client) with the sweeper called as the
server's background thread calls it (``services.leases_sweep``); the sweeper's
own thread, several processes and the browser are tried in test_leases_live.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from boards.core import services
from boards.core.limits import LEASE_MAX, LEASE_MIN
from boards.models import Attempt, Board, Event, Task
from tests.core.test_concurrency import post, run_in_threads


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def expires(task: dict) -> datetime:
    return parse(task["lease"]["expiresAt"])


def runs_for(expires_at: datetime, seconds: int, since: datetime) -> bool:
    """Whether a lease ends ``seconds`` after a moment between ``since`` (read just before
    the call that set it) and now: no allowance for a slow machine needed."""
    lease = timedelta(seconds=seconds)
    return since + lease <= expires_at <= timezone.now() + lease


def lapse(board: Board, number: int) -> None:
    """Make the lease on a task run out, as silence would (the clock is the only difference)."""
    Task.objects.filter(board=board, number=number).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def sweep() -> int:
    return services.leases_sweep()


# -- leases ----------------------------------------------------------------------------


def test_a_claim_answers_its_lease_from_the_call_the_board_or_the_server(alice, board, settings):
    settings.KANBAN_LEASE_SECONDS = 900
    for subject in ("A", "B", "C"):
        alice.create(subject)
    since = timezone.now()
    by_default = alice.call("TaskClaim", {"taskId": "1"}).body["task"]
    assert runs_for(expires(by_default), 900, since)
    since = timezone.now()
    asked = alice.call("TaskClaim", {"taskId": "2", "leaseSeconds": 30}).body["task"]
    assert runs_for(expires(asked), 30, since)
    services.board_settings(board=board, actor="pat", leaseSeconds=120)
    since = timezone.now()
    boards_own = alice.call("TaskClaim", {"taskId": "3"}).body["task"]
    assert runs_for(expires(boards_own), 120, since)


@pytest.mark.parametrize("seconds", [4, 86_401, "60", 1.5])
def test_a_lease_length_out_of_range_is_refused_naming_the_field(alice, seconds):
    alice.create("A")
    reply = alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": seconds})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "leaseSeconds"
    assert Task.objects.get(number=1).status == "pending"


def test_a_lapsed_lease_returns_the_task_and_the_old_owner_learns_it(alice, bob, board):
    alice.create("Long job")
    alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": 60})
    lapse(board, 1)

    assert sweep() == 1
    task = Task.objects.get(number=1)
    assert (task.status, task.owner, task.lease_expires_at) == ("pending", "", None)
    event = Event.objects.filter(board=board, kind="reclaimed").get()
    assert (event.task_number, event.actor, event.data["owner"]) == (1, "system", "alice")
    assert sweep() == 0  # once

    late = alice.call("TaskUpdate", {"taskId": "1", "status": "completed", "result": "done"})
    assert late.status == 409
    assert late.error["code"] == "lease_lost"
    assert "lease lapsed" in late.error["message"]
    assert Task.objects.get(number=1).status == "pending"

    # Another agent takes it over; alice's writes stay refused until she claims work again.
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "1"
    assert alice.call("TaskUpdate", {"taskId": "1", "notes": "me?"}).error["code"] == "lease_lost"
    assert bob.call("TaskUpdate", {"taskId": "1", "status": "completed"}).status == 200


def test_the_old_owner_may_claim_its_task_again(alice, board):
    alice.create("Job")
    alice.call("TaskClaim", {"taskId": "1"})
    lapse(board, 1)
    sweep()
    again = alice.call("TaskClaim", {"taskId": "1"})
    assert again.status == 200
    assert again.body["task"]["attempt"] == 2
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "completed"}).status == 200


def test_a_lapsed_lease_not_yet_swept_already_refuses_the_owners_write(alice, board):
    alice.create("Job")
    alice.call("TaskClaim", {"taskId": "1"})
    lapse(board, 1)
    reply = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert reply.error["code"] == "lease_lost"
    assert Task.objects.get(number=1).status == "in_progress"  # the sweeper will return it


def test_any_call_by_the_owner_renews_all_its_leases(alice, bob, board):
    for subject in ("A", "B", "C"):
        alice.create(subject)
    alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": 60})
    alice.call("TaskClaim", {"taskId": "2", "leaseSeconds": 600})
    bob.call("TaskClaim", {"taskId": "3", "leaseSeconds": 60})
    soon = timezone.now() + timedelta(seconds=3)
    Task.objects.filter(board=board).update(lease_expires_at=soon)

    since = timezone.now()
    alice.call("TaskList", {"view": "ready"})  # a read is a sign of life too

    leases = dict(Task.objects.values_list("number", "lease_expires_at"))
    assert runs_for(leases[1], 60, since)
    assert runs_for(leases[2], 600, since)
    assert leases[3] == soon  # bob said nothing
    lapse(board, 3)
    assert sweep() == 1
    assert Task.objects.get(number=1).status == "in_progress"


def test_heartbeat_renews_and_refuses_a_task_the_agent_does_not_hold(alice, bob, board):
    alice.create("A")
    alice.create("B")
    alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": 60})
    Task.objects.filter(number=1).update(lease_expires_at=timezone.now() + timedelta(seconds=50))
    since = timezone.now()
    beat = alice.call("TaskHeartbeat", {"taskId": "1"})
    assert beat.status == 200
    assert [lease["taskId"] for lease in beat.body["leases"]] == ["1"]
    assert runs_for(expires(beat.body["leases"][0]), 60, since)
    refused = bob.call("TaskHeartbeat", {"taskId": "1"})
    assert (refused.status, refused.error["code"]) == (409, "not_owner")
    assert alice.call("TaskHeartbeat", {}).body["leases"][0]["taskId"] == "1"


# -- attempts --------------------------------------------------------------------------


def attempts_of(agent, number: str) -> list[tuple]:
    task = agent.call("TaskGet", {"taskId": number}).body["task"]
    return [(a["n"], a["agent"], a["outcome"], a["result"]) for a in task["attempts"]]


def test_attempts_list_every_outcome_with_the_result_as_it_was(alice, bob, board, person):
    alice.create("Job")
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "pending", "notes": "need a break"})
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskReassign", {"taskId": "1", "owner": "bob"})  # pending, bob's to start
    bob.call("TaskClaim", {"taskId": "1"})
    lapse(board, 1)
    sweep()
    bob.call("TaskClaim", {"taskId": "1"})
    bob.call("TaskUpdate", {"taskId": "1", "status": "failed", "result": "disk full"})
    bob.call("TaskUpdate", {"taskId": "1", "status": "pending"})
    bob.call("TaskClaim", {"taskId": "1"})
    services.task_update(board=board, actor="pat", person=True, task_id=1, status="cancelled")
    services.task_update(board=board, actor="pat", person=True, task_id=1, status="pending")
    bob.call("TaskClaim", {"taskId": "1"})
    bob.call("TaskUpdate", {"taskId": "1", "status": "completed", "result": "it works"})

    assert attempts_of(alice, "1") == [
        (1, "alice", "released", None),
        (2, "alice", "reassigned", None),
        (3, "bob", "timed_out", None),
        (4, "bob", "failed", "disk full"),
        (5, "bob", "cancelled", "disk full"),
        (6, "bob", "completed", "it works"),
    ]
    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert task["attempts"][0]["notes"] == "need a break"
    assert all(a["startedAt"] and a["endedAt"] for a in task["attempts"])
    assert task["attempt"] == 6


def test_retry_after_failure_and_max_attempts_flags_the_task(alice, bob, board):
    services.board_settings(board=board, actor="pat", maxAttempts=2)
    alice.create("Flaky")
    alice.create("Other")
    for _ in range(2):
        assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
        alice.call("TaskUpdate", {"taskId": "1", "status": "failed", "result": "boom"})
        retry = alice.call("TaskUpdate", {"taskId": "1", "status": "pending"})
        assert retry.status == 200  # an agent may retry a failed task

    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert task["needsAttention"] is True
    assert "failed or timed out 2 times" in task["attention"]
    # claim-next offers other work, never the flagged task...
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "2"
    assert bob.call("TaskClaim", {}).body["task"] is None
    ready = alice.call("TaskList", {"view": "ready"}).body
    assert "1" not in [t["id"] for t in ready.get("tasks", [])]
    # ...until a person retries it: its attempts start over (it stays alice's to pick up).
    services.task_update(board=board, actor="pat", person=True, task_id=1, status="failed")
    services.task_update(board=board, actor="pat", person=True, task_id=1, status="pending")
    assert alice.call("TaskGet", {"taskId": "1"}).body["task"]["needsAttention"] is False
    assert alice.call("TaskClaim", {}).body["task"]["id"] == "1"


def test_timeouts_count_towards_max_attempts(alice, board):
    services.board_settings(board=board, actor="pat", maxAttempts=1)
    alice.create("Hangs")
    alice.call("TaskClaim", {"taskId": "1"})
    lapse(board, 1)
    sweep()
    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert (task["status"], task["needsAttention"]) == ("pending", True)
    assert alice.call("TaskClaim", {}).body["task"] is None


# -- stuck is not waiting --------------------------------------------------------------


def test_a_task_behind_a_failed_or_cancelled_blocker_is_stuck_not_waiting(alice, board):
    # No grace: a failure is a dead end at once (the grace has tests of its own).
    services.board_settings(board=board, actor="pat", failureGraceSeconds=0)
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2
    alice.create("Announce", blockedBy=["2"])  # 3: waits on 2, which is stuck, not failed
    alice.create("Lint")  # 4
    alice.create("Release", blockedBy=["4"])  # 5
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed", "result": "compiler crashed"})
    alice.call("TaskUpdate", {"taskId": "4", "status": "cancelled"})

    tasks = {t["id"]: t for t in alice.call("TaskList", {"detail": True}).body["tasks"]}
    assert (tasks["2"]["stuck"], tasks["2"]["stuckOn"]) == (True, ["1"])
    assert (tasks["5"]["stuck"], tasks["5"]["stuckOn"]) == (True, ["4"])
    assert (tasks["3"]["stuck"], tasks["3"]["blocked"]) == (False, True)
    summaries = {t["id"]: t for t in alice.call("TaskList", {}).body["tasks"]}
    assert summaries["2"]["stuckOn"] == ["1"]
    assert "stuckOn" not in summaries["3"]
    stuck = alice.call("TaskList", {"view": "stuck"}).body
    assert [t["id"] for t in stuck["tasks"]] == ["2", "5"]
    assert stuck["counts"]["stuck"] == 2
    got = alice.call("TaskGet", {"taskId": "2"}).body["task"]
    assert got["stuckOn"] == ["1"]
    # A person goes on without the failed blocker: no longer stuck, ready.
    services.task_update(board=board, actor="pat", person=True, task_id=2, remove_blocked_by=["1"])
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["stuck"] is False


# -- priority --------------------------------------------------------------------------


def test_claim_next_takes_the_highest_priority_then_the_lowest_number(alice):
    alice.create("Low", priority="low")
    alice.create("Normal")
    alice.create("Urgent", priority="urgent")
    alice.create("High", priority="high")
    alice.create("Urgent too", priority="urgent")
    order = [alice.call("TaskClaim", {}).body["task"]["subject"] for _ in range(5)]
    assert order == ["Urgent", "Urgent too", "High", "Normal", "Low"]


def test_priority_is_set_on_create_update_and_batch_and_refused_when_unknown(alice):
    created = alice.create("A", priority="high")
    assert created["priority"] == "high"
    updated = alice.call("TaskUpdate", {"taskId": "1", "priority": "low"}).body["task"]
    assert updated["priority"] == "low"
    batch = alice.call(
        "TaskBatch", {"ops": [{"op": "create", "subject": "B", "priority": "urgent"}]}
    )
    assert batch.status == 200
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["priority"] == "urgent"
    wrong = alice.call("TaskUpdate", {"taskId": "1", "priority": "asap"})
    assert (wrong.status, wrong.error["details"][0]["field"]) == (400, "priority")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_claim_next_honours_priority_under_a_race_of_eight_agents():
    from django.test import Client

    from tests.support.factories import make_board, make_token

    board = make_board("race")
    ops = [{"op": "create", "subject": f"low {i}", "priority": "low"} for i in range(8)]
    ops += [{"op": "create", "subject": f"urgent {i}", "priority": "urgent"} for i in range(8)]
    services.task_batch(board=board, actor="planner", ops=ops)
    tokens = [make_token(board, f"agent-{i}") for i in range(8)]

    def claim(index: int) -> str:
        reply = post(Client(), tokens[index], "TaskClaim", {})
        assert reply.status_code == 200, reply.content
        return reply.json()["task"]["subject"]

    claimed = run_in_threads(8, claim)
    assert sorted(claimed) == sorted(f"urgent {i}" for i in range(8))


# -- WIP limits ------------------------------------------------------------------------


def test_wip_limits_refuse_a_claim_naming_the_limit_and_what_is_held(alice, bob, board):
    for subject in "ABCD":
        alice.create(subject)
    services.board_settings(board=board, actor="pat", maxInProgressPerAgent=1, maxInProgress=2)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    per_agent = alice.call("TaskClaim", {"taskId": "2"})
    assert (per_agent.status, per_agent.error["code"]) == (409, "wip_limit")
    assert per_agent.error["details"] == {"limit": 1, "scope": "agent", "held": ["1"]}
    assert "alice already has 1 task(s) in progress (#1)" in per_agent.error["message"]
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "2"
    carol = bob  # a third agent would hit the board's limit the same way
    services.agent_seen(board=board, agent="carol")
    overall = carol.call("TaskUpdate", {"taskId": "3", "owner": "carol", "status": "in_progress"})
    assert (overall.status, overall.error["code"]) == (409, "wip_limit")
    assert Task.objects.filter(status="in_progress").count() == 2


def test_board_settings_are_checked(board):
    from boards.core.errors import InvalidInput

    for bad in ({"maxAttempts": 0}, {"leaseSeconds": 10**9}, {"maxInProgress": True}):
        with pytest.raises(InvalidInput):
            services.board_settings(board=board, actor="pat", **bad)
    services.board_settings(board=board, actor="pat", maxInProgress=3)
    assert Board.objects.get(pk=board.pk).max_in_progress == 3
    assert Event.objects.filter(board=board, kind="settings").count() == 1


def test_sweepers_racing_reclaim_each_lapse_once(db, alice, board):
    for i in range(5):
        alice.create(f"T{i}")
        alice.call("TaskClaim", {"taskId": str(i + 1)})
    Task.objects.filter(board=board).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep() == 5
    assert sweep() == 0
    assert Event.objects.filter(kind="reclaimed").count() == 5
    assert Attempt.objects.filter(outcome="timed_out").count() == 5


# -- on the board ----------------------------------------------------------------------


def test_the_board_shows_stuck_apart_and_lists_tasks_that_need_attention(
    alice, board, person_client
):
    services.board_settings(board=board, actor="pat", maxAttempts=1)
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2: stuck once 1 fails
    alice.create("Lint")  # 3
    alice.create("Release", blockedBy=["3"])  # 4: merely waiting
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed", "result": "boom"})
    alice.call("TaskClaim", {"taskId": "3"})
    alice.call("TaskUpdate", {"taskId": "3", "notes": "on it"})

    html = person_client.get("/boards/team/").content.decode()
    stuck_card = html[
        html.index('id="task-2"') : html.index("</article>", html.index('id="task-2"'))
    ]
    waiting_card = html[
        html.index('id="task-4"') : html.index("</article>", html.index('id="task-4"'))
    ]
    assert "card--stuck" in stuck_card and "stuck:" in stuck_card and "#1</a> failed" in stuck_card
    assert "card--stuck" not in waiting_card and "blocked by" in waiting_card
    assert '<span class="pill pill--stuck">1 stuck</span>' in html
    strip = html[html.index('id="needs"') : html.index("</section>", html.index('id="needs"'))]
    assert 'data-attention-task="1"' in strip
    assert "/tasks/1/retry/" in strip
    in_progress = html[
        html.index('id="task-3"') : html.index("</article>", html.index('id="task-3"'))
    ]
    assert "time data-lease" in in_progress

    retried = person_client.post("/boards/team/tasks/1/retry/")
    assert retried.status_code == 302
    assert Task.objects.get(board=board, number=1).status == "pending"
    html = person_client.get("/boards/team/").content.decode()
    assert 'data-attention-task="1"' not in html


@pytest.mark.parametrize("seconds", [LEASE_MIN - 1, LEASE_MAX + 1])
def test_a_board_lease_takes_the_bounds_a_claim_takes(board, alice, seconds):
    from boards.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="leaseSeconds"):
        services.board_settings(board=board, actor="pat", leaseSeconds=seconds)
    alice.create("A")
    claim = alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": seconds})
    assert (claim.status, claim.error["details"][0]["field"]) == (400, "leaseSeconds")


@pytest.mark.parametrize("seconds", [LEASE_MIN, LEASE_MAX])
def test_a_board_lease_at_either_bound_is_kept(board, seconds):
    services.board_settings(board=board, actor="pat", leaseSeconds=seconds)
    assert Board.objects.get(pk=board.pk).lease_seconds == seconds

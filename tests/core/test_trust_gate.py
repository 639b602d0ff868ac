"""The second trust pass (issue #23): money that cannot overflow, a sweeper one broken board
cannot stop, the approval gate without side doors, WIP limits on every path, identities
that cannot be borrowed. Each refusal is a clear 4xx that changes nothing."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from boards.core import services
from boards.models import Board, Event, Membership, Role, Task
from tests.support.factories import make_task, make_token


def last_seq(board: Board) -> int:
    return Board.objects.get(pk=board.pk).last_seq


# --- 1. money and counters -------------------------------------------------------------------


def test_a_usage_report_is_capped_per_report(alice):
    alice.create("Spend")
    reply = alice.call("TaskUpdate", {"taskId": "1", "usage": {"costUsd": 10_001}})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "usage.costUsd"


def test_a_task_cannot_add_up_past_its_cap_and_nothing_is_recorded(alice, board):
    alice.create("Spend")
    ops = [{"op": "update", "taskId": "1", "usage": {"costUsd": 10_000}} for _ in range(100)]
    assert alice.call("TaskBatch", {"ops": ops}).status == 200  # exactly $1,000,000
    seq = last_seq(board)

    reply = alice.call("TaskUpdate", {"taskId": "1", "usage": {"costUsd": 0.01}})

    assert (reply.status, reply.error["code"]) == (409, "usage_limit")
    assert "the task's cost past $1000000" in reply.error["message"]
    assert last_seq(board) == seq
    assert float(Board.objects.get(pk=board.pk).spent_usd) == 1_000_000
    # The board and its lists still read.
    assert alice.call("TaskList", {}).status == 200


def test_one_board_that_cannot_be_read_does_not_stop_reclaims_on_another(board, other_board):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL refuses to store the unreadable value this test plants")
    make_task(board, "Here")
    make_task(other_board, "There")
    services.task_claim(board=board, agent="alice", task_id=1, lease_seconds=5)
    services.task_claim(board=other_board, agent="bob", task_id=1, lease_seconds=5)
    past = timezone.now() - timedelta(seconds=10)
    Task.objects.filter(number=1).update(lease_expires_at=past)
    # A value the decimal converter cannot read back (what an overflow once left behind).
    with connection.cursor() as cursor:
        cursor.execute("UPDATE boards_board SET spent_usd = %s WHERE id = %s", ["1e30", board.pk])

    services.leases_sweep()

    assert Task.objects.get(board=other_board, number=1).status == "pending"
    assert Task.objects.get(board=board, number=1).status == "in_progress"


# --- 4. the gate -------------------------------------------------------------------------------


@pytest.fixture
def gated(alice, board):
    alice.create("Run the migration", requiresApproval=True)
    alice.create("Deploy", blockedBy=["1"])
    assert alice.call("TaskClaim", {"taskId": "1"}).body["awaitingApproval"] is True
    return board


@pytest.mark.parametrize("door", ["update", "batch"])
def test_an_agent_cannot_remove_a_gated_blocker_while_approval_waits(alice, gated, door):
    seq = last_seq(gated)
    if door == "update":
        reply = alice.call("TaskUpdate", {"taskId": "2", "removeBlockedBy": ["1"]})
    else:
        ops = [{"op": "update", "taskId": "2", "removeBlockedBy": ["1"]}]
        reply = alice.call("TaskBatch", {"ops": ops})
    assert (reply.status, reply.error["code"]) == (409, "approval_required")
    assert reply.error["message"].startswith("Task #2 waits for a person to approve #1:")
    assert reply.error["details"] == {"blocker": "1", "approval": "requested"}
    assert last_seq(gated) == seq
    assert alice.call("TaskClaim", {"taskId": "2"}).error["code"] == "blocked"


def test_changing_the_prompt_cancels_a_waiting_request(alice, gated):
    reply = alice.call("TaskUpdate", {"taskId": "1", "prompt": "DROP TABLE users"})
    assert reply.status == 200
    task = Task.objects.get(board=gated, number=1)
    assert task.approval_state == "none"
    assert Event.objects.filter(board=gated, kind="approval_cancelled").count() == 1
    with pytest.raises(Exception, match="not awaiting approval"):
        services.approval_decide(board=gated, person="pat", task_id=1, approve=True)


def test_an_approval_posts_the_version_seen_and_a_stale_one_is_refused(alice, gated, person_client):
    seen = Task.objects.get(board=gated, number=1).version
    alice.call("TaskUpdate", {"taskId": "1", "notes": "still thinking"})  # not content
    response = person_client.post(
        "/boards/team/tasks/1/approve/", {"version": seen}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "changed since it was read" in response.content.decode()
    assert Task.objects.get(board=gated, number=1).approval_state == "requested"

    now = Task.objects.get(board=gated, number=1).version
    response = person_client.post("/boards/team/tasks/1/approve/", {"version": now, "note": "ok"})
    assert response.status_code == 302
    task = Task.objects.get(board=gated, number=1)
    assert (task.approval_state, task.status, task.approval_note) == (
        "approved",
        "in_progress",
        "ok",
    )


def test_an_operator_cannot_finish_a_task_that_waits_for_approval(gated, django_user_model):
    operator = django_user_model.objects.create_user(username="olga", password="pw-olga-123")
    Membership.objects.create(board=gated, user=operator, role=Role.OPERATOR)
    client = Client()
    client.force_login(operator)
    seq = last_seq(gated)

    response = client.post(
        "/boards/team/tasks/1/status/", {"status": "completed"}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 409
    assert "only a person with the approver role decides" in response.content.decode()
    assert last_seq(gated) == seq
    assert Task.objects.get(board=gated, number=2).blocked


def test_an_approved_claim_keeps_the_lease_it_asked_for(alice, board):
    alice.create("Migrate", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1", "leaseSeconds": 600})
    services.approval_decide(board=board, person="pat", task_id=1, approve=True)
    task = Task.objects.get(board=board, number=1)
    assert task.lease_seconds == 600
    assert task.lease_expires_at - timezone.now() > timedelta(seconds=590)


# --- 5. WIP limits on every path ----------------------------------------------------------------


@pytest.fixture
def limited(alice, bob, board):
    for subject in "ABCDE":
        alice.create(subject)
    services.board_settings(board=board, actor="pat", maxInProgressPerAgent=1, maxInProgress=2)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    return board


def _in_progress(board: Board) -> list[tuple[int, str]]:
    return list(
        Task.objects.filter(board=board, status="in_progress").values_list("number", "owner")
    )


@pytest.mark.parametrize(
    "tool,body",
    [
        ("TaskUpdate", {"taskId": "2", "status": "in_progress", "owner": "alice"}),
        (
            "TaskBatch",
            {"ops": [{"op": "update", "taskId": "2", "status": "in_progress", "owner": "alice"}]},
        ),
    ],
    ids=["update", "batch"],
)
def test_no_path_gives_an_agent_more_than_its_wip_limit(alice, limited, tool, body):
    before = _in_progress(limited)
    reply = alice.call(tool, body)
    assert reply.status == 409, reply.body
    assert "alice already has 1 task(s) in progress" in json.dumps(reply.body)
    assert [owner for _, owner in _in_progress(limited)].count("alice") == 1
    assert len(_in_progress(limited)) == len(before)


def test_status_then_owner_cannot_get_past_the_limit(alice, limited):
    assert alice.call("TaskUpdate", {"taskId": "2", "status": "in_progress"}).status == 200
    reply = alice.call("TaskUpdate", {"taskId": "2", "owner": "alice"})
    assert (reply.status, reply.error["code"]) == (409, "wip_limit")
    third = alice.call("TaskUpdate", {"taskId": "3", "status": "in_progress"})
    assert (third.status, third.error["code"]) == (409, "wip_limit")  # the board's 2


def test_seed_003s_update_is_held_to_the_board_limit(alice, limited):
    assert (
        alice.call("tasks", {"action": "update", "id": "2", "status": "in_progress"}).status == 200
    )
    reply = alice.call("tasks", {"action": "update", "id": "3", "status": "in_progress"})
    assert reply.status == 409
    assert "it allows 2 at once" in json.dumps(reply.body)
    assert len(_in_progress(limited)) == 2


def test_a_person_moving_a_card_is_held_to_the_board_limit(alice, limited, person_client):
    alice.call("TaskUpdate", {"taskId": "2", "status": "in_progress"})
    response = person_client.post(
        "/boards/team/tasks/3/status/", {"status": "in_progress"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert len(_in_progress(limited)) == 2


# --- 9. identity -------------------------------------------------------------------------------


def _as(board: Board, token: str, agent: str, tool: str = "TaskList", body: dict | None = None):
    response = Client().post(
        f"/api/boards/{board.slug}/tools/{tool}",
        data=json.dumps(body or {}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "X-Agent": agent},
    )
    return response.status_code, response.json()


def test_a_team_tokens_agents_are_its_own(board):
    first, second = make_token(board, team=True), make_token(board, team=True)
    assert _as(board, first, "scout")[0] == 200
    status, body = _as(board, second, "scout", "InboxRead")
    assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert _as(board, second, "SCOUT")[0] == 403  # names compare without case
    assert _as(board, first, "Scout")[0] == 200  # the same agent, as the roster spells it


def test_a_revoked_agents_name_stays_reserved(board):
    raw = make_token(board, "demo-agent")
    token = board.tokens.get(agent="demo-agent")
    services.token_revoke(board=board, token_id=token.pk)
    team = make_token(board, team=True)
    for name in ("demo-agent", "Demo-Agent"):
        status, body = _as(board, team, name)
        assert (status, body["error"]["code"]) == (403, "identity_taken")
    assert raw


@pytest.mark.parametrize(
    "owner", ["ali\u200bce", "evil\u202egnp", "nobody-here", "pat;"], ids=ascii
)
def test_owner_must_be_a_plain_known_name(alice, board, person, owner):
    alice.create("Work")
    seq = last_seq(board)
    reply = alice.call("TaskUpdate", {"taskId": "1", "owner": owner})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "owner"
    assert last_seq(board) == seq


def test_owner_may_name_a_member_or_a_roster_agent_in_any_case(alice, bob, board, person):
    alice.create("Work")
    bob.call("TaskList", {})
    assert alice.call("TaskUpdate", {"taskId": "1", "owner": "PAT"}).body["task"]["owner"] == "pat"
    assert (
        alice.call("TaskReassign", {"taskId": "1", "owner": "Bob"}).body["task"]["owner"] == "bob"
    )


def test_an_agent_cannot_take_over_another_live_agents_work(alice, bob, board):
    alice.create("Mine")
    alice.call("TaskClaim", {"taskId": "1"})
    seq = last_seq(board)
    for tool, body in (
        ("TaskUpdate", {"taskId": "1", "owner": "bob"}),
        ("TaskReassign", {"taskId": "1", "owner": "bob"}),
        ("TaskUpdate", {"taskId": "1", "owner": ""}),
    ):
        reply = bob.call(tool, body)
        assert (reply.status, reply.error["code"]) == (403, "not_your_task"), tool
    assert last_seq(board) == seq


def test_an_orchestrator_token_and_a_person_may_take_work_over(alice, bob, board):
    alice.create("Mine")
    alice.call("TaskClaim", {"taskId": "1"})
    boss = services.token_issue(board=board, agent="boss", orchestrator=True)
    bob.call("TaskList", {})
    response = Client().post(
        "/api/boards/team/tools/TaskReassign",
        data=json.dumps({"taskId": "1", "owner": "bob"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {boss}"},
    )
    assert response.status_code == 200, response.json()
    assert Task.objects.get(board=board, number=1).owner == "bob"


def test_a_team_token_may_move_work_between_its_own_agents(board):
    team = make_token(board, team=True)
    _as(board, team, "one", "TaskCreate", {"subject": "Split"})
    _as(board, team, "one", "TaskClaim", {"taskId": "1"})
    _as(board, team, "two")
    status, body = _as(board, team, "two", "TaskReassign", {"taskId": "1", "owner": "two"})
    assert status == 200, body


# --- 10. a busy store ------------------------------------------------------------------------


@pytest.fixture
def short_busy_timeout(transactional_db):
    if connection.vendor != "sqlite":
        pytest.skip("the write lock that outlasts its busy timeout is SQLite's")
    options = connection.settings_dict["OPTIONS"]
    before = options["timeout"]
    options["timeout"] = 0.2
    connection.close()
    yield
    options["timeout"] = before
    connection.close()


def test_a_write_behind_a_lock_held_past_the_busy_timeout_is_a_503_that_changes_nothing(
    short_busy_timeout, django_user_model
):
    board = services.board_create(slug="busy", name="Busy")
    token = make_token(board, "alice")
    person = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(person)
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    holder.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
    try:
        response = Client().post(
            "/api/boards/busy/tools/TaskCreate",
            data=json.dumps({"subject": "Wait for it"}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        page = client.post("/boards/busy/settings/", {"maxAttempts": "4"})
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "store_busy"
    assert page.status_code == 503
    assert page["Retry-After"] == "2"
    assert not Task.objects.filter(board=board).exists()


# --- reassignment never strands work (issue #26) ------------------------------------------------


def test_reassigned_work_waits_for_its_new_owner_who_is_told_and_offered_it_first(
    alice, bob, board
):
    alice.create("Older, more urgent", priority="urgent")
    alice.create("Handed over")
    bob.call("TaskList", {})
    alice.call("TaskClaim", {"taskId": "2"})

    reply = alice.call("TaskReassign", {"taskId": "2", "owner": "bob"})

    task = reply.body["task"]
    assert (task["status"], task["owner"]) == ("pending", "bob")
    assert Task.objects.get(board=board, number=2).lease_expires_at is None
    late = alice.call("TaskUpdate", {"taskId": "2", "notes": "still mine?"})
    assert (late.status, late.error["code"]) == (409, "lease_lost")
    assert "reassigned to bob" in late.error["message"]
    inbox = bob.call("InboxRead", {})
    assert "#2 “Handed over” was assigned to you by alice" in inbox.body["messages"][0]["body"]
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "2"  # before the urgent #1
    attempts = [
        (a["agent"], a["outcome"])
        for a in bob.call("TaskGet", {"taskId": "2"}).body["task"]["attempts"]
    ]
    assert attempts == [("alice", "reassigned"), ("bob", None)]


def test_reassigning_to_a_typo_is_refused_with_close_names(alice, bob, board):
    alice.create("Work")
    reply = alice.call("TaskReassign", {"taskId": "1", "owner": "bbo"})
    assert reply.status == 400
    assert "No agent called 'bbo' on this board" in reply.error["message"]
    assert reply.error["details"][0]["suggestions"] == ["bob"]


def test_a_note_typed_before_approve_reaches_the_agent(alice, gated, person_client):
    version = Task.objects.get(board=gated, number=1).version
    person_client.post(
        "/boards/team/tasks/1/approve/", {"version": version, "note": "go, but back up first"}
    )
    task = Task.objects.get(board=gated, number=1)
    assert (task.approval_state, task.approval_note) == ("approved", "go, but back up first")
    messages = alice.call("InboxRead", {}).body["messages"]
    assert [m["body"] for m in messages] == [
        "#1 “Run the migration” approved by pat: go, but back up first"
    ]

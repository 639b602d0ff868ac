"""Seed dialects (SPEC §4): agents written for seed 002's and seed 003's tool sets call the
tool endpoint with their own names, fields and answer shapes, on the same store."""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.db.models.signals import post_init
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext

from boards.core import services
from boards.models import Task
from tests.support.factories import make_board, make_task, make_token

# --- seed 002: <ns>_tasks_* ------------------------------------------------------------------


def test_seed002_create_answers_a_task_n_id_under_any_namespace(alice):
    first = alice.call("board_tasks_create", {"title": "Set up database"})
    second = alice.call("Team7_tasks_create", {"title": "Write API", "blocked_by": ["task-1"]})
    assert (first.status, first.body) == (200, {"id": "task-1", "unreadMessages": 0})
    assert second.body["id"] == "task-2"
    # The same store: the canonical tools see what the seed's tools wrote.
    canonical = alice.call("TaskGet", {"taskId": "2"}).body["task"]
    assert (canonical["subject"], canonical["blockedBy"]) == ("Write API", ["1"])


def test_seed002_get_answers_the_go_task_json_without_empty_fields(alice):
    alice.call("board_tasks_create", {"title": "Blocker"})
    alice.call(
        "board_tasks_create",
        {
            "title": "Work",
            "description": "Do it well",
            "blocked_by": ["task-1"],
            "metadata": {"priority": "high"},
        },
    )
    bare = alice.call("board_tasks_get", {"id": "task-1"})
    assert bare.body == {
        "id": "task-1",
        "title": "Blocker",
        "status": "pending",
        "created_by": "alice",
        "unreadMessages": 0,
    }
    full = alice.call("board_tasks_get", {"id": "task-2"}).body
    assert full == {
        "id": "task-2",
        "title": "Work",
        "description": "Do it well",
        "status": "pending",
        "blocked_by": ["task-1"],
        "metadata": {"priority": "high"},
        "created_by": "alice",
        "unreadMessages": 0,
    }
    # "task-N", "N" and N all name the same task.
    assert alice.call("board_tasks_get", {"id": "2"}).body == full
    assert alice.call("board_tasks_get", {"id": 2}).body == full


def test_seed002_create_refuses_a_status_and_an_assignee(alice):
    reply = alice.call(
        "board_tasks_create", {"title": "Ship", "status": "in_progress", "assignee": "bob"}
    )
    assert reply.status == 400
    assert reply.error["code"] == "invalid_input"
    assert [d["field"] for d in reply.error["details"]] == ["status", "assignee"]
    assert "always pending" in reply.error["message"]
    assert "board_tasks_claim" in reply.error["message"]
    pending = alice.call("board_tasks_create", {"title": "Ship", "status": "pending"})
    assert pending.body["id"] == "task-1"


def test_seed002_create_refuses_unknown_and_self_blocked_by(alice):
    alice.call("board_tasks_create", {"title": "One"})
    unknown = alice.call("board_tasks_create", {"title": "Two", "blocked_by": ["task-1", "task-9"]})
    assert unknown.status == 400
    assert unknown.error["message"] == "task-2: blocked_by references unknown task-9"
    itself = alice.call("board_tasks_create", {"title": "Two", "blocked_by": ["task-2"]})
    assert itself.status == 400
    assert itself.error["message"] == "task-2: blocked_by cannot reference the task itself"
    # Nothing was created, and numbering did not move.
    assert alice.call("board_tasks_create", {"title": "Two"}).body["id"] == "task-2"


def test_seed002_input_errors_name_the_field(alice):
    reply = alice.call("board_tasks_get", {"id": "abc"})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "id"
    assert 'like "task-3"' in reply.error["message"]
    extra = alice.call("board_tasks_create", {"title": "X", "owner": "bob"})
    assert extra.status == 400
    assert extra.error["details"][0]["field"] == "owner"
    missing = alice.call("board_tasks_get", {"id": "task-7"})
    assert missing.status == 404
    assert missing.error["message"] == "task-7 not found"


def test_seed002_claim_rules_come_from_the_services(alice, bob):
    alice.call("board_tasks_create", {"title": "Blocker"})
    alice.call("board_tasks_create", {"title": "Work", "blocked_by": ["task-1"]})

    blocked = bob.call("board_tasks_claim", {"id": "task-2"})
    assert (blocked.status, blocked.error["code"]) == (409, "blocked")
    assert blocked.error["message"] == "task-2 is blocked by task-1"

    claimed = bob.call("board_tasks_claim", {"id": "task-1"})
    assert (claimed.status, claimed.body) == (200, "ok")
    task = bob.call("board_tasks_get", {"id": "task-1"}).body
    assert (task["status"], task["assignee"]) == ("in_progress", "bob")

    owned = alice.call("board_tasks_claim", {"id": "task-1"})
    assert (owned.status, owned.error["message"]) == (409, "task-1 is owned by bob")
    assert bob.call("board_tasks_claim", {"id": "task-1"}).body == "ok"  # owner again: no-op

    assert bob.call("board_tasks_update", {"id": "task-1", "status": "completed"}).body == "ok"
    terminal = alice.call("board_tasks_claim", {"id": "task-1"})
    assert (terminal.status, terminal.error["code"]) == (409, "terminal")
    # Completing the blocker unblocked task-2: now it can be claimed.
    assert alice.call("board_tasks_claim", {"id": "task-2"}).body == "ok"


def test_seed002_claim_of_a_task_needing_approval_says_so(alice, board):
    make_task(board, "Migrate", requires_approval=True)
    reply = alice.call("board_tasks_claim", {"id": "task-1"})
    assert reply.status == 202
    assert reply.body.startswith("awaiting approval")
    services.approval_decide(board=board, person="pat", task_id="1", approve=True)
    assert alice.call("board_tasks_get", {"id": "task-1"}).body["assignee"] == "alice"


def test_seed002_update_replaces_blockers_and_merges_metadata(alice):
    for title in ("A", "B", "C"):
        alice.call("board_tasks_create", {"title": title})
    alice.call("board_tasks_create", {"title": "D", "metadata": {"size": 3, "team": "core"}})
    reply = alice.call(
        "board_tasks_update",
        {
            "id": "task-4",
            "blocked_by": ["task-1", "task-2"],
            "description": "Later",
            "metadata": {"size": None, "reviewed": True},
        },
    )
    assert (reply.status, reply.body) == (200, "ok")
    task = alice.call("board_tasks_get", {"id": "task-4"}).body
    assert task["blocked_by"] == ["task-1", "task-2"]
    assert task["metadata"] == {"team": "core", "reviewed": True}
    assert task["description"] == "Later"
    alice.call("board_tasks_update", {"id": "task-4", "blocked_by": ["task-3"]})
    assert alice.call("board_tasks_get", {"id": "task-4"}).body["blocked_by"] == ["task-3"]
    alice.call("board_tasks_update", {"id": "task-4", "blocked_by": []})
    assert "blocked_by" not in alice.call("board_tasks_get", {"id": "task-4"}).body
    unknown = alice.call("board_tasks_update", {"id": "task-4", "blocked_by": ["task-99"]})
    assert unknown.status == 400
    bad = alice.call("board_tasks_update", {"id": "task-4", "status": "done"})
    assert (bad.status, bad.error["details"][0]["field"]) == (400, "status")


def test_seed002_list_is_a_bare_array_sorted_by_number_with_filters(alice, bob):
    for n in range(1, 12):
        alice.call("board_tasks_create", {"title": f"Step {n}"})
    alice.call("board_tasks_update", {"id": "task-11", "blocked_by": ["task-10"]})
    bob.call("board_tasks_claim", {"id": "task-2"})
    bob.call("board_tasks_claim", {"id": "task-10"})

    everything = alice.call("board_tasks_list", {})
    assert isinstance(everything.body, list)  # no unreadMessages inside a bare array
    assert [t["id"] for t in everything.body] == [f"task-{n}" for n in range(1, 12)]

    def ids(body):
        return [t["id"] for t in alice.call("board_tasks_list", body).body]

    assert ids({"assignee": "bob"}) == ["task-2", "task-10"]
    assert ids({"status": "in_progress"}) == ["task-2", "task-10"]
    assert ids({"blocked": True}) == ["task-11"]
    free = ids({"status": "pending", "blocked": False})
    assert free == ["task-1", *[f"task-{n}" for n in range(3, 10)]]
    assert alice.call("board_tasks_list").body == everything.body  # empty body means {}


def test_seed002_objects_carry_unread_messages_and_bare_answers_stay_bare(alice, board):
    services.message_send(board=board, sender="pat", recipient="alice", body="Stop after #1")
    created = alice.call("board_tasks_create", {"title": "One"})
    assert created.body == {"id": "task-1", "unreadMessages": 1}
    assert alice.call("board_tasks_get", {"id": "task-1"}).body["unreadMessages"] == 1
    assert alice.call("board_tasks_claim", {"id": "task-1"}).body == "ok"
    assert alice.call("board_tasks_update", {"id": "task-1", "status": "completed"}).body == "ok"
    assert alice.call("board_tasks_list").body[0]["status"] == "completed"


def test_unknown_seed002_action_is_an_unknown_tool(alice):
    reply = alice.call("board_tasks_reassign", {"id": "task-1"})
    assert (reply.status, reply.error["code"]) == (404, "unknown_tool")


# --- seed 002 watch (a long-poll, through the async path) ------------------------------------


async def watch_board(**task_fields):
    board = await database_sync_to_async(make_board)("seedwatch")
    token = await database_sync_to_async(make_token)(board, "alice")
    await database_sync_to_async(make_task)(board, "Watched", **task_fields)
    return board, token


async def call(token: str, tool: str, body: dict):
    response = await AsyncClient().post(
        f"/api/boards/seedwatch/tools/{tool}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, json.loads(response.content)


@pytest.mark.django_db(transaction=True)
async def test_seed002_watch_returns_the_final_task_when_it_completes(layer_spy):
    board, token = await watch_board()
    watch = asyncio.create_task(call(token, "board_tasks_watch", {"id": "task-1"}))
    await layer_spy.waiting()  # the watcher listens on the board's group
    assert not watch.done()
    # A change that does not finish the task does not end the watch: the watcher hears
    # it and listens again.
    await database_sync_to_async(services.task_claim)(board=board, agent="bob", task_id="1")
    await layer_spy.waiting(2)
    assert not watch.done()
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="completed"
    )
    status, body = await asyncio.wait_for(watch, 5)
    assert status == 200
    assert body == {
        "id": "task-1",
        "title": "Watched",
        "status": "completed",
        "assignee": "bob",
        "created_by": "alice",
        "unreadMessages": 0,
    }


@pytest.mark.django_db(transaction=True)
async def test_seed002_watch_of_a_failed_task_returns_at_once():
    board, token = await watch_board()
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="failed"
    )
    status, body = await asyncio.wait_for(call(token, "ns_tasks_watch", {"id": 1}), 2)
    assert (status, body["status"]) == (200, "failed")


@pytest.mark.django_db(transaction=True)
async def test_seed002_watch_waits_past_an_approval_decision_until_the_task_finishes(
    layer_spy,
):
    board, token = await watch_board(requires_approval=True)
    status, body = await call(token, "board_tasks_claim", {"id": "task-1"})
    assert status == 202
    watch = asyncio.create_task(call(token, "board_tasks_watch", {"id": "task-1"}))
    await layer_spy.waiting()
    await database_sync_to_async(services.approval_decide)(
        board=board, person="pat", task_id="1", approve=True
    )
    await layer_spy.waiting(2)  # the watcher heard the decision and listens again
    assert not watch.done()  # approved and in progress, but not finished
    await database_sync_to_async(services.task_update)(
        board=board, actor="alice", task_id="1", status="completed"
    )
    status, body = await asyncio.wait_for(watch, 5)
    assert (status, body["status"], body["assignee"]) == (200, "completed", "alice")


@pytest.mark.django_db(transaction=True)
async def test_seed002_watch_after_the_agents_own_approval_waits_for_the_end(settings):
    settings.KANBAN_WATCH_MAX_SECONDS = 0.4
    board, token = await watch_board(requires_approval=True)
    await call(token, "board_tasks_claim", {"id": "task-1"})
    await database_sync_to_async(services.approval_decide)(
        board=board, person="pat", task_id="1", approve=True
    )
    status, body = await asyncio.wait_for(call(token, "board_tasks_watch", {"id": "task-1"}), 3)
    assert (status, body["error"]["code"]) == (408, "watch_timeout")


@pytest.mark.django_db(transaction=True)
async def test_seed002_watch_gives_up_at_the_limit_and_unknown_tasks_are_404(settings):
    settings.KANBAN_WATCH_MAX_SECONDS = 0.3
    _, token = await watch_board()
    status, body = await asyncio.wait_for(call(token, "board_tasks_watch", {"id": "task-1"}), 3)
    assert (status, body["error"]["code"]) == (408, "watch_timeout")
    assert body["error"]["message"].startswith("task-1 is still pending")
    status, body = await call(token, "board_tasks_watch", {"id": "task-5"})
    assert (status, body["error"]["message"]) == (404, "task-5 not found")


# --- seed 003: tasks with action -------------------------------------------------------------


def tasks_by_id(reply) -> dict[int, dict]:
    return {t["id"]: t for t in reply.body["tasks"]}


def test_seed003_insert_with_blocked_by_is_blocked(alice):
    first = alice.call("tasks", {"action": "insert", "label": "Read module"})
    assert first.status == 200
    assert first.body["kind"] == "tasks"
    assert first.body["action"] == "insert"
    assert first.body["changes"] == [{"op": "insert", "id": 1, "label": "Read module"}]
    second = alice.call(
        "tasks",
        {"action": "insert", "label": "Write tests", "blocked_by": "1", "prompt": "Use pytest"},
    )
    body = second.body
    assert body["total"] == 2
    assert body["counts"] == {"open": 1, "in_progress": 0, "done": 0, "blocked": 1}
    task = tasks_by_id(second)[2]
    assert task["status"] == "blocked"
    assert task["blocked_by"] == [1]
    assert task["prompt"] == "Use pytest"
    assert task["result"] is None
    assert task["done"] is False
    assert task["created_at"].endswith("Z")
    assert body["unreadMessages"] == 0
    # The board sees a pending task blocked by #1.
    canonical = alice.call("TaskGet", {"taskId": "2"}).body["task"]
    assert (canonical["status"], canonical["blocked"]) == ("pending", True)


def test_seed003_done_auto_unblocks_dependents(alice):
    alice.call("tasks", {"action": "insert", "label": "Read module"})
    alice.call("tasks", {"action": "insert", "label": "Write tests", "blocked_by": "1"})
    alice.call("tasks", {"action": "insert", "label": "Update docs", "blocked_by": "1"})
    alice.call("tasks", {"action": "insert", "label": "Verify", "blocked_by": "2, 3"})
    reply = alice.call(
        "tasks", {"action": "update", "id": 1, "status": "done", "result": "Parser is LL(1)"}
    )
    assert reply.status == 200
    assert reply.body["changes"] == [
        {"op": "update", "id": 1, "changed_fields": ["result", "status"]},
        {"op": "auto_unblock", "id": 2, "changed_fields": ["blocked_by", "status"]},
        {"op": "auto_unblock", "id": 3, "changed_fields": ["blocked_by", "status"]},
    ]
    tasks = tasks_by_id(reply)
    assert (tasks[1]["status"], tasks[1]["done"], tasks[1]["result"]) == (
        "done",
        True,
        "Parser is LL(1)",
    )
    assert (tasks[2]["status"], tasks[2]["blocked_by"]) == ("open", [])
    assert (tasks[4]["status"], tasks[4]["blocked_by"]) == ("blocked", [2, 3])
    assert reply.body["counts"] == {"open": 2, "in_progress": 0, "done": 1, "blocked": 1}


def test_seed003_views_ready_open_and_status_filter(alice, bob):
    alice.call("tasks", {"action": "insert", "label": "One"})
    alice.call("tasks", {"action": "insert", "label": "Two"})
    alice.call("tasks", {"action": "insert", "label": "Three", "blocked_by": "1"})
    alice.call("tasks", {"action": "update", "id": 2, "status": "in_progress"})

    def ids(body):
        reply = alice.call("tasks", {"action": "list", **body})
        assert reply.body["action"] == "list"
        assert reply.body["total"] == len(reply.body["tasks"])
        return [t["id"] for t in reply.body["tasks"]]

    assert ids({"view": "ready"}) == [1]
    assert ids({"view": "open"}) == [1]
    assert ids({"view": "blocked"}) == [3]
    assert ids({"view": "in_progress"}) == [2]
    assert ids({"status": "blocked"}) == [3]
    assert ids({}) == [1, 2, 3]
    alice.call("tasks", {"action": "update", "id": 1, "status": "done"})
    assert ids({"view": "ready"}) == [3]
    assert ids({"view": "done"}) == [1]


def test_seed003_tree_orders_depth_first_with_depth(alice):
    alice.call("tasks", {"action": "insert", "label": "Refactor parser"})
    alice.call("tasks", {"action": "insert", "label": "Unrelated"})
    alice.call("tasks", {"action": "insert", "label": "Read module", "parent_id": 1})
    alice.call("tasks", {"action": "insert", "label": "Write tests", "parent_id": 1})
    alice.call("tasks", {"action": "insert", "label": "Fixtures", "parent_id": 4})
    reply = alice.call("tasks", {"action": "list", "tree": True})
    assert [(t["id"], t["depth"]) for t in reply.body["tasks"]] == [
        (1, 0),
        (3, 1),
        (4, 1),
        (5, 2),
        (2, 0),
    ]
    assert tasks_by_id(reply)[5]["parent_id"] == 4
    flat = alice.call("tasks", {"action": "list", "parent_id": 1})
    assert [t["id"] for t in flat.body["tasks"]] == [3, 4]
    assert "depth" not in flat.body["tasks"][0]


def test_seed003_batch_inserts_a_dag_by_predicted_ids_and_refs(alice):
    alice.call("tasks", {"action": "insert", "label": "Existing"})
    reply = alice.call(
        "tasks",
        {
            "action": "batch",
            "ops": [
                {"action": "insert", "label": "Refactor parser"},
                {"action": "insert", "label": "Read module", "parent_id": 2, "ref": "read"},
                {"action": "insert", "label": "Write tests", "parent_id": 2, "blocked_by": "read"},
                {"action": "insert", "label": "Verify", "parent_id": 2, "blocked_by": "3,4,1"},
                {"action": "update", "id": 1, "notes": "kept"},
            ],
        },
    )
    assert reply.status == 200, reply.body
    assert reply.body["action"] == "batch"
    assert reply.body["operations"] == [
        {"action": "insert", "ok": True, "id": 2},
        {"action": "insert", "ok": True, "id": 3, "ref": "read"},
        {"action": "insert", "ok": True, "id": 4},
        {"action": "insert", "ok": True, "id": 5},
        {"action": "update", "ok": True, "id": 1},
    ]
    tasks = tasks_by_id(reply)
    assert tasks[4]["blocked_by"] == [3]
    assert tasks[5]["blocked_by"] == [1, 3, 4]
    assert {tasks[n]["parent_id"] for n in (3, 4, 5)} == {2}
    assert [c["op"] for c in reply.body["changes"]] == ["insert"] * 4 + ["update"]
    assert reply.body["counts"] == {"open": 3, "in_progress": 0, "done": 0, "blocked": 2}


def test_seed003_batch_rejects_a_cycle_with_the_exact_message(alice):
    alice.call("tasks", {"action": "insert", "label": "One"})
    alice.call("tasks", {"action": "insert", "label": "Two"})
    reply = alice.call(
        "tasks",
        {
            "action": "batch",
            "ops": [
                {"action": "insert", "label": "Three", "blocked_by": "5"},
                {"action": "insert", "label": "Four"},
                {"action": "insert", "label": "Five", "blocked_by": "3"},
            ],
        },
    )
    assert reply.status == 400
    assert reply.error["message"] == "Cycle detected: 3 → 5 → 3"
    assert alice.call("tasks", {"action": "list"}).body["total"] == 2


def test_seed003_batch_rejects_an_unknown_reference_with_the_exact_message(alice):
    reply = alice.call(
        "tasks",
        {
            "action": "batch",
            "ops": [
                {"action": "insert", "label": "One"},
                {"action": "insert", "label": "Two", "blocked_by": "99"},
            ],
        },
    )
    assert reply.status == 400
    assert reply.error["message"] == "Task #2: blocked_by references unknown task #99"
    assert alice.call("tasks", {"action": "list"}).body["total"] == 0


def test_seed003_batch_may_delete_what_it_inserted(alice):
    reply = alice.call(
        "tasks",
        {
            "action": "batch",
            "ops": [
                {"action": "insert", "label": "Scratch", "ref": "tmp"},
                {"action": "delete", "id": "tmp"},
            ],
        },
    )
    assert reply.body["changes"] == [
        {"op": "insert", "id": 1, "label": "Scratch"},
        {"op": "delete", "id": 1, "label": "Scratch"},
    ]
    assert reply.body["total"] == 0


def test_seed003_delete_reports_the_label_and_unblocks_dependents(alice):
    alice.call("tasks", {"action": "insert", "label": "Obsolete"})
    alice.call("tasks", {"action": "insert", "label": "Next", "blocked_by": "1"})
    reply = alice.call("tasks", {"action": "delete", "id": 1})
    assert reply.status == 200
    assert reply.body["action"] == "delete"
    assert reply.body["changes"] == [
        {"op": "delete", "id": 1, "label": "Obsolete"},
        {"op": "auto_unblock", "id": 2, "changed_fields": ["blocked_by", "status"]},
    ]
    assert [(t["id"], t["status"]) for t in reply.body["tasks"]] == [(2, "open")]
    # Ids are never reused after a delete.
    assert alice.call("tasks", {"action": "insert", "label": "New"}).body["changes"][0]["id"] == 3
    missing = alice.call("tasks", {"action": "delete", "id": 1})
    assert (missing.status, missing.error["message"]) == (404, "Task #1 not found")


def test_seed003_insert_with_status_and_result_is_one_write(alice):
    reply = alice.call(
        "tasks",
        {"action": "insert", "label": "Already done", "status": "done", "result": "42"},
    )
    assert reply.body["changes"] == [{"op": "insert", "id": 1, "label": "Already done"}]
    task = tasks_by_id(reply)[1]
    assert (task["status"], task["result"]) == ("done", "42")


def test_seed003_update_replaces_blockers_and_blocked_needs_one(alice):
    for label in ("A", "B", "C"):
        alice.call("tasks", {"action": "insert", "label": label})
    reply = alice.call("tasks", {"action": "update", "id": 3, "blocked_by": "1,2"})
    assert tasks_by_id(reply)[3]["status"] == "blocked"
    reply = alice.call("tasks", {"action": "update", "id": 3, "blocked_by": "2"})
    assert tasks_by_id(reply)[3]["blocked_by"] == [2]
    assert reply.body["changes"] == [{"op": "update", "id": 3, "changed_fields": ["blocked_by"]}]
    reply = alice.call("tasks", {"action": "update", "id": 3, "blocked_by": ""})
    assert tasks_by_id(reply)[3]["status"] == "open"
    refused = alice.call("tasks", {"action": "update", "id": 3, "status": "blocked"})
    assert (refused.status, refused.error["details"][0]["field"]) == (400, "status")
    blocked = alice.call(
        "tasks", {"action": "update", "id": 3, "status": "blocked", "blocked_by": "1"}
    )
    assert tasks_by_id(blocked)[3]["status"] == "blocked"
    # Starting a blocked task fails as a claim would.
    assert alice.call("tasks", {"action": "update", "id": 3, "status": "in_progress"}).status == 409


def test_seed003_failed_tasks_show_as_done_with_their_outcome(alice):
    alice.call("tasks", {"action": "insert", "label": "Try"})
    alice.call("tasks", {"action": "insert", "label": "After", "blocked_by": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    reply = alice.call("tasks", {"action": "list"})
    tasks = tasks_by_id(reply)
    assert (tasks[1]["status"], tasks[1]["outcome"]) == ("done", "failed")
    assert tasks[2]["status"] == "blocked"  # only a completed blocker unblocks
    assert reply.body["counts"]["done"] == 1


def test_seed003_input_errors_name_the_field(alice):
    def error(body):
        reply = alice.call("tasks", body)
        assert reply.status == 400, reply.body
        return [d["field"] for d in reply.error["details"]]

    assert error({"action": "insert"}) == ["label"]
    assert error({"action": "update", "label": "X"}) == ["id"]
    assert error({"action": "list", "label": "X"}) == ["label"]
    assert error({"action": "insert", "label": "X", "ops": []}) == ["ops"]
    assert error({"action": "sort"}) == ["action"]
    assert error({"action": "insert", "label": "X", "blocked_by": "1,x y"}) == ["blocked_by"]
    assert error({"action": "update", "id": "abc"}) == ["id"]
    assert error(
        {"action": "batch", "ops": [{"action": "insert", "label": "A"}, {"action": "delete"}]}
    ) == ["ops.1.id"]
    assert error({"action": "batch", "ops": [{"action": "list"}]}) == ["ops.0.action"]
    # Nulls for unused fields are what many LLMs send: they are not an error.
    ok = alice.call("tasks", {"action": "list", "id": None, "label": None, "tree": False})
    assert ok.status == 200


# --- cost: the seeds' reads are SQL, whatever the board's size ----------------------------------

SEED_READS = [
    ("tasks", {"action": "list"}),
    ("tasks", {"action": "list", "view": "ready"}),
    ("tasks", {"action": "list", "view": "blocked", "tree": True}),
    ("tasks", {"action": "list", "status": "done"}),
    ("tasks", {"action": "list", "parent_id": 1}),
    ("tasks", {"action": "update", "id": 2, "notes": "seen"}),
    ("board_tasks_list", {}),
    ("board_tasks_list", {"status": "pending", "blocked": False}),
    ("board_tasks_list", {"assignee": "alice"}),
]


def _filled(agent, size: int) -> None:
    """A board of ``size`` tasks: children of #1, chains of blockers, some done, one claimed."""
    ops = [{"action": "insert", "label": "Goal"}]
    for n in range(2, size + 1):
        op = {"action": "insert", "label": f"Step {n}", "parent_id": 1}
        if n % 3 == 0:
            op["blocked_by"] = str(n - 1)
        ops.append(op)
    # Done: every fourth step that waits for nothing (an agent cannot finish a blocked one).
    done = [n for n in range(4, size + 1, 4) if n % 3]
    ops += [{"action": "update", "id": n, "status": "done"} for n in done]
    assert agent.call("tasks", {"action": "batch", "ops": ops}).status == 200
    assert agent.call("board_tasks_claim", {"id": "task-2"}).body == "ok"


def _queries(agent, name: str, body: dict) -> int:
    agent.call(name, body)  # the roster's seen mark is written on the first call only
    with CaptureQueriesContext(connection) as queries:
        reply = agent.call(name, body)
    assert reply.status == 200, reply.body
    return len(queries.captured_queries)


def test_a_seed_list_costs_the_same_queries_on_a_small_and_a_large_board(agent_factory):
    small, large = agent_factory("alice"), agent_factory("alice", on=make_board("large"))
    _filled(small, 5)
    _filled(large, 60)
    for name, body in SEED_READS:
        assert _queries(small, name, body) == _queries(large, name, body), (name, body)
    # A list holds what the filters keep; its counts are the whole board's.
    everything = large.call("tasks", {"action": "list"}).body
    ready = large.call("tasks", {"action": "list", "view": "ready"}).body
    assert [t["id"] for t in ready["tasks"]] == [
        t["id"] for t in everything["tasks"] if t["status"] == "open"
    ]
    assert 0 < ready["total"] < everything["total"] == sum(ready["counts"].values()) == 60
    assert ready["counts"]["open"] == ready["total"]


def test_a_seed_list_loads_only_the_tasks_it_answers(agent_factory):
    agent = agent_factory("alice")
    _filled(agent, 60)
    loaded: list[int] = []

    def count(sender, instance, **kwargs) -> None:
        loaded.append(instance.pk)

    post_init.connect(count, sender=Task)
    try:
        for name, body in [
            ("tasks", {"action": "list", "view": "ready"}),
            ("tasks", {"action": "list", "status": "in_progress"}),
            ("board_tasks_list", {"status": "pending", "blocked": True}),
        ]:
            loaded.clear()
            reply = agent.call(name, body).body
            answered = reply["tasks"] if isinstance(reply, dict) else reply
            assert 0 < len(loaded) == len(answered) < 60, (name, body)
    finally:
        post_init.disconnect(count, sender=Task)


# --- definitions ------------------------------------------------------------------------------


def test_tool_definitions_of_each_dialect(client, board):
    seed002 = client.get("/api/boards/team/tools?dialect=seed002").json()["tools"]
    assert [t["name"] for t in seed002] == [
        f"board_tasks_{a}" for a in ("create", "list", "get", "claim", "update", "watch")
    ]
    assert all("any alphanumeric one" in t["description"] for t in seed002)
    create = seed002[0]["input_schema"]
    assert create["required"] == ["title"]
    assert create["additionalProperties"] is False
    assert {"title", "description", "blocked_by", "metadata"} <= set(create["properties"])

    seed003 = client.get("/api/boards/team/tools?dialect=seed003&format=openai").json()["tools"]
    assert [t["function"]["name"] for t in seed003] == ["tasks"]
    parameters = seed003[0]["function"]["parameters"]
    assert parameters["required"] == ["action"]
    assert parameters["properties"]["action"]["enum"] == [
        "insert",
        "list",
        "update",
        "delete",
        "batch",
    ]
    assert parameters["properties"]["blocked_by"]["anyOf"][0]["type"] == "string"

    canonical = client.get("/api/boards/team/tools").json()["tools"]
    assert canonical[0]["name"] == "TaskCreate"
    bad = client.get("/api/boards/team/tools?dialect=seed009")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_input"

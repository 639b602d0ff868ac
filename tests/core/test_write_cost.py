"""What a tool call costs the database (issue 38: writes within twice the server's floor,
a search within twice a list): the queries of one call through the whole stack, counted.
A new query on these paths must be worth its time; these budgets say when one came in."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

# Authentication and lease renewal (2); the transaction (BEGIN and COMMIT, savepoints
# here) with the board locked, the task inserted (its kept count with it), its event, the
# day's flow and the board's counters (6); the unread messages (1). The answer is built
# from the rows in hand, inside the transaction: no read of the task after the write.
CREATE_QUERIES = 10
# The same without the flow row, with the task read and saved, its edges read once for its
# flags and its answer, and its labels and children (the answer's) read in one: 12.
UPDATE_QUERIES = 12


def whole_task_reads(queries: list[str]) -> int:
    """Reads of a task's whole row (its subject among the columns)."""
    return sum(sql.startswith("SELECT") and '"boards_task"."subject"' in sql for sql in queries)


def counted(agent, tool: str, body: dict) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        reply = agent.call(tool, body)
    assert reply.status == 200, reply.body
    return [q["sql"] for q in queries.captured_queries]


def test_a_create_and_an_update_stay_within_their_queries(alice):
    alice.create("Warm")  # the day's flow row exists, as on any board in use
    create = counted(alice, "TaskCreate", {"subject": "Write the report"})
    assert len(create) <= CREATE_QUERIES
    update = counted(alice, "TaskUpdate", {"taskId": "2", "notes": "half way"})
    assert len(update) <= UPDATE_QUERIES
    # The answer is the row the write holds: a create reads no task, an update the one it
    # changes, once.
    assert (whole_task_reads(create), whole_task_reads(update)) == (0, 1)
    # The task's kept count comes from the flags the write derived, not from reading its
    # counted bits again (``TaskQuerySet.counted_now``).
    assert not [sql for sql in update if 'AS "counted"' in sql]


def test_an_update_answers_and_counts_as_before(alice, board):
    alice.create("Blocker")
    alice.create("Waits", blockedBy=["1"])
    reply = alice.call("TaskUpdate", {"taskId": "2", "notes": "still waiting"})
    assert reply.status == 200
    assert reply.body["task"]["notes"] == "still waiting"
    board.refresh_from_db()
    assert (board.pending_count, board.blocked_count, board.ready_count) == (1, 1, 1)
    done = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert {"type": "auto_unblock", "taskId": "2"} in done.body["changes"]
    board.refresh_from_db()
    assert (board.pending_count, board.blocked_count, board.ready_count) == (1, 0, 1)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5 is SQLite's")
def test_a_search_writes_its_snippets_in_the_ranking_query(alice):
    for subject in ("Deploy the service", "Deploy the docs", "Write tests"):
        alice.create(subject)
    listed = counted(alice, "TaskList", {"status": "pending"})
    searched = counted(alice, "TaskList", {"query": "deploy"})
    fts = [sql for sql in searched if "boards_task_fts" in sql]
    # The count of matches and one ranked page with its snippets: no query per snippet.
    assert len(fts) == 2 and sum("snippet(" in sql for sql in fts) == 1, fts
    assert len(searched) <= len(listed) + 1
    reply = alice.call("TaskList", {"query": "deploy"})
    assert [t["match"] for t in reply.body["tasks"]] == [
        "**Deploy** the service",
        "**Deploy** the docs",
    ]


def _as_read(agent, number: str) -> dict:
    """The task as a read after the write shows it (TaskGet, without its own extras)."""
    reply = agent.call("TaskGet", {"taskId": number})
    assert reply.status == 200, reply.body
    task = reply.body["task"]
    del task["attempts"], task["readiness"], task["approval"]["history"]
    return task


def test_a_writes_answer_is_the_task_as_read_after_it(alice, bob):
    """TaskCreate and TaskUpdate build their answer in the write's transaction from the rows
    they hold (``Work.answer``): through edges, labels, a parent and children, status
    changes that flip their dependents, approval and usage, it is the task a read shows."""
    steps: list[tuple[str, dict]] = [
        (
            "TaskCreate",
            {"subject": "Root", "labels": ["Ops", "db"], "metadata": {"b": 1, "a": "x"}},
        ),
        ("TaskCreate", {"subject": "Child", "parentId": "1", "priority": "high"}),
        ("TaskCreate", {"subject": "Waits", "blockedBy": ["1", "2"], "description": "d"}),
        ("TaskCreate", {"subject": "Blocks", "blocks": ["1"], "requiresApproval": True}),
        ("TaskCreate", {"subject": "Plain"}),
        ("TaskUpdate", {"taskId": "1", "notes": "half way"}),
        ("TaskUpdate", {"taskId": "3", "notes": "waiting", "addLabels": ["x"]}),
        ("TaskUpdate", {"taskId": "3", "removeBlockedBy": ["2"], "removeLabels": ["x"]}),
        ("TaskUpdate", {"taskId": "5", "parentId": "1", "metadata": {"k": True}}),
        ("TaskUpdate", {"taskId": "5", "parentId": None, "addBlocks": ["3"]}),
        ("TaskUpdate", {"taskId": "2", "status": "in_progress", "owner": "alice"}),
        ("TaskUpdate", {"taskId": "2", "usage": {"inputTokens": 10, "costUsd": 0.1234567}}),
        ("TaskUpdate", {"taskId": "2", "status": "failed", "result": "broke"}),
        ("TaskUpdate", {"taskId": "5", "status": "in_progress", "owner": "alice"}),
        ("TaskUpdate", {"taskId": "5", "status": "completed", "result": "done"}),
        ("TaskUpdate", {"taskId": "5", "status": "pending"}),
        ("TaskUpdate", {"taskId": "1", "labels": [], "priority": "low", "expectedVersion": 2}),
        ("TaskUpdate", {"taskId": "4", "subject": "Blocks, renamed"}),
        ("TaskUpdate", {"taskId": "1", "notes": "half way"}),  # changes nothing
        # Its own flags flip: stranded (a dependent waits on it), then stuck at birth.
        ("TaskUpdate", {"taskId": "5", "status": "cancelled"}),
        ("TaskCreate", {"subject": "Behind a cancelled one", "blockedBy": ["5", "1"]}),
    ]
    for tool, body in steps:
        reply = alice.call(tool, body)
        assert reply.status == 200, (tool, body, reply.body)
        written = reply.body["task"]
        assert written == _as_read(bob, written["id"]), (tool, body)

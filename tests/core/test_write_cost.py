"""What a tool call costs the database (issue 38: writes within twice the server's floor,
a search within twice a list): the queries of one call through the whole stack, counted.
A new query on these paths must be worth its time; these budgets say when one came in."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

# Authentication and lease renewal (2), the transaction with the board locked, the task,
# its kept count, its event, the day's flow and the board's counters (8 with BEGIN and
# COMMIT on SQLite), the answer's task with labels, edges and children (4), the push
# devices' check after commit and the unread messages (2).
CREATE_QUERIES = 17
# The same, the task read and written, its flags derived (3 reads) and no flow row.
UPDATE_QUERIES = 17


def counted(agent, tool: str, body: dict) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        reply = agent.call(tool, body)
    assert reply.status == 200, reply.body
    return [q["sql"] for q in queries.captured_queries]


def test_a_create_and_an_update_stay_within_their_queries(alice):
    alice.create("Warm")  # the day's flow row exists, as on any board in use
    assert len(counted(alice, "TaskCreate", {"subject": "Write the report"})) <= CREATE_QUERIES
    update = counted(alice, "TaskUpdate", {"taskId": "2", "notes": "half way"})
    assert len(update) <= UPDATE_QUERIES
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

"""Every call costs the same however long the board's history (issue 12).

Query counts of each write and of a filtered list are compared on a board of
100 tasks and one of 5,000 (most of them finished history, with dependencies);
paging walks a big board exactly once while another agent keeps creating; the
stored blocked / stuck flags always equal what the blockers say.
"""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from boards.core import services
from boards.core.errors import ServiceError
from boards.core.selectors import DEAD_ENDS, TERMINAL_STATUSES
from boards.core.services.counts import recount
from boards.models import Board, Dependency, Status, Task
from tests.conftest import AgentClient
from tests.support.factories import make_board, make_token

pytestmark = pytest.mark.slow


def fill(board: Board, count: int) -> None:
    """``count`` tasks of history: chains of 10, finished but for the last few chains."""
    made = 0
    while made < count:
        size = min(500, count - made)
        ops = []
        for i in range(size):
            op = {"op": "create", "ref": f"t{i}", "subject": f"Task {made + i}"}
            if i % 10:
                op["blocked_by"] = [f"t{i - 1}"]
            ops.append(op)
        services.task_batch(board=board, actor="planner", ops=ops)
        made += size
    # History written directly (fast): the board's counter is set to match.
    finished = Task.objects.filter(board=board, number__lte=count - 50)
    done = finished.update(status=Status.COMPLETED, blocked=False)
    Board.objects.filter(pk=board.pk).update(completed_count=done)


def scenario(board: Board, agent: AgentClient) -> dict[str, int]:
    """Queries each call costs on ``board`` (fresh tasks made for the writes)."""
    agent.create("Blocker")
    blocker = Task.objects.filter(board=board).order_by("-number").first()
    assert blocker is not None
    for i in range(5):
        agent.create(f"Dependent {i}", blockedBy=[str(blocker.number)])
    agent.call("TaskClaim", {"taskId": str(blocker.number)})
    costs: dict[str, int] = {}

    def measure(name: str, tool: str, body: dict) -> None:
        with CaptureQueriesContext(connection) as queries:
            reply = agent.call(tool, body)
        assert reply.status == 200, reply.body
        costs[name] = len(queries)

    measure("create", "TaskCreate", {"subject": "New", "blockedBy": [str(blocker.number)]})
    measure("update notes", "TaskUpdate", {"taskId": str(blocker.number), "notes": "halfway"})
    measure(
        "complete with 5 dependents",
        "TaskUpdate",
        {"taskId": str(blocker.number), "status": "completed", "result": "done"},
    )
    measure("claim next", "TaskClaim", {})
    measure("list in progress", "TaskList", {"view": "in_progress"})
    measure("list ready page", "TaskList", {"view": "ready", "limit": 20})
    measure("get", "TaskGet", {"taskId": str(blocker.number)})
    return costs


@pytest.mark.django_db
def test_each_call_costs_the_same_queries_at_100_and_5000_tasks(agent_factory):
    small, big = make_board("small"), make_board("big")
    fill(small, 100)
    fill(big, 5000)
    small_costs = scenario(small, agent_factory("alice", on=small))
    big_costs = scenario(big, agent_factory("alice", on=big))
    assert small_costs == big_costs


@pytest.mark.django_db
def test_paging_walks_every_task_once_in_order_while_another_agent_creates(agent_factory):
    board = make_board("paged")
    fill(board, 1234)
    reader, writer = agent_factory("reader", on=board), agent_factory("writer", on=board)
    expected_open = set(
        Task.objects.filter(board=board, status=Status.PENDING).values_list("number", flat=True)
    )
    seen: list[str] = []
    all_seen: list[str] = []
    cursor = None
    for _ in range(100):
        body = {"limit": 7, "view": "open"} | ({"cursor": cursor} if cursor else {})
        page = reader.call("TaskList", body).body
        seen += [t["id"] for t in page["tasks"]]
        writer.create("Made while paging")  # new tasks come after: on a later page
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == sorted(seen, key=int)
    assert len(seen) == len(set(seen))
    assert {int(n) for n in seen} >= expected_open
    cursor = None
    while True:
        page = reader.call("TaskList", {"limit": 500} | ({"cursor": cursor} if cursor else {}))
        all_seen += [t["id"] for t in page.body["tasks"]]
        assert page.body["total"] == Task.objects.filter(board=board).count()
        cursor = page.body["nextCursor"]
        if cursor is None:
            break
    assert [int(n) for n in all_seen] == sorted(
        Task.objects.filter(board=board).values_list("number", flat=True)
    )


@pytest.mark.django_db
def test_a_list_page_is_small(agent_factory):
    board = make_board("small-pages")
    services.task_batch(
        board=board,
        actor="planner",
        ops=[
            {
                "op": "create",
                "subject": f"Task {i}",
                "description": "d" * 2000,
                "prompt": "p" * 5000,
            }
            for i in range(100)
        ],
    )
    reply = agent_factory("alice", on=board).call("TaskList", {})
    assert len(reply.body["tasks"]) == 100
    size = len(str(reply.body))
    assert size / 4 <= 4000, size  # tokens, at four characters each


def test_a_bad_cursor_or_limit_is_a_clear_400(alice):
    alice.create("A")
    for body, field in (({"cursor": "nonsense!"}, "cursor"), ({"limit": 501}, "limit")):
        reply = alice.call("TaskList", body)
        assert reply.status == 400
        assert reply.error["details"][0]["field"] == field


def _derived(board: Board) -> dict[int, tuple[bool, bool]]:
    statuses = dict(Task.objects.filter(board=board).values_list("pk", "status"))
    blockers: dict[int, list[str]] = {}
    for task_pk, blocker_pk in Dependency.objects.filter(board=board).values_list(
        "task_id", "blocker_id"
    ):
        blockers.setdefault(task_pk, []).append(statuses[blocker_pk])
    return {
        pk: (
            status not in TERMINAL_STATUSES
            and any(s != Status.COMPLETED for s in blockers.get(pk, ())),
            status not in TERMINAL_STATUSES and any(s in DEAD_ENDS for s in blockers.get(pk, ())),
        )
        for pk, status in statuses.items()
    }


@pytest.mark.django_db
def test_stored_flags_and_counters_always_equal_what_the_tasks_say():
    board = make_board("flags")
    # No grace: a failed blocker is a dead end at once, as ``_derived`` reads it.
    services.board_settings(board=board, actor="pat", failureGraceSeconds=0)
    make_token(board, "alice")
    rng = random.Random(13)
    for _ in range(300):
        numbers = list(Task.objects.filter(board=board).values_list("number", flat=True))
        action = rng.choice(["create", "create", "status", "status", "edge", "unedge", "delete"])
        try:
            if action == "create" or not numbers:
                blocked_by = rng.sample(numbers, k=min(len(numbers), rng.randint(0, 3)))
                services.task_create(board=board, actor="alice", subject="t", blocked_by=blocked_by)
            elif action == "status":
                services.task_update(
                    board=board,
                    actor="alice",
                    person=True,
                    task_id=rng.choice(numbers),
                    status=rng.choice(["pending", "completed", "failed", "cancelled"]),
                )
            elif action == "edge" and len(numbers) > 1:
                a, b = rng.sample(numbers, 2)
                services.task_update(board=board, actor="alice", task_id=a, add_blocked_by=[b])
            elif action == "unedge":
                a = rng.choice(numbers)
                blockers = list(
                    Task.objects.get(board=board, number=a).blocked_by.values_list(
                        "number", flat=True
                    )
                )
                if blockers:
                    services.task_update(
                        board=board, actor="alice", task_id=a, remove_blocked_by=blockers[:1]
                    )
            elif action == "delete":
                services.task_delete(
                    board=board, actor="alice", person=True, task_id=rng.choice(numbers)
                )
        except ServiceError:
            pass  # a refused change (a cycle, a terminal task…) changes nothing
        stored = {
            pk: (blocked, stuck)
            for pk, blocked, stuck in Task.objects.filter(board=board).values_list(
                "pk", "blocked", "stuck"
            )
        }
        assert stored == _derived(board), action
        board.refresh_from_db()
        for status in ("completed", "failed", "cancelled"):
            actual = Task.objects.filter(board=board, status=status).count()
            assert getattr(board, f"{status}_count") == actual, (action, status)
        assert recount(board) == {}, action  # the kept open counts too

"""What an agent may not finish or move, at every agent door, with nothing changed: a task
that is still blocked (so a chain held back by an unapproved migration stays held), nor
another agent's live work. It may delete a blocked task (issue 42, point 9): what waited on
it inherits its open blockers, so the chain stays held all the same. People keep their
powers."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from boards.agents import mcp
from boards.core import services
from boards.core.auth import Caller
from boards.models import Board, Event, Task
from tests.support.factories import make_task, make_token

Refused = tuple[int, str] | None


SEED003 = {"pending": "open", "completed": "done"}


def _api(board: Board, token: str, tool: str, body: dict[str, Any]) -> Refused:
    response = Client().post(
        f"/api/boards/{board.slug}/tools/{tool}",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    if response.status_code < 400:
        return None
    return response.status_code, response.json()["error"]["code"]


def _mcp(board: Board, agent: str, body: dict[str, Any]) -> Refused:
    result = async_to_sync(mcp.call_tool)(Caller(board=board, agent=agent), "TaskUpdate", body)
    if not result.is_error:
        return None
    return 409, json.loads(result.content[0].text)["error"]["code"]


# A door: (board, agent, its token, task number, status or "deleted") → the refusal, if any.
Door = Callable[[Board, str, str, int, str], Refused | str]


def _task_update(board: Board, agent: str, token: str, number: int, status: str) -> Refused:
    return _api(board, token, "TaskUpdate", {"taskId": str(number), "status": status})


def _task_batch(board: Board, agent: str, token: str, number: int, status: str) -> Refused:
    op = (
        {"op": "delete", "taskId": str(number)}
        if status == "deleted"
        else {"op": "update", "taskId": str(number), "status": status}
    )
    return _api(board, token, "TaskBatch", {"ops": [op]})


def _seed002(board: Board, agent: str, token: str, number: int, status: str) -> Refused | str:
    if status == "deleted":
        return "unsupported"
    body = {"id": f"task-{number}", "status": status}
    return _api(board, token, "board_tasks_update", body)


def _seed003(board: Board, agent: str, token: str, number: int, status: str) -> Refused | str:
    if status == "deleted":
        return _api(board, token, "tasks", {"action": "delete", "id": str(number)})
    if status not in SEED003:
        return "unsupported"
    body = {"action": "update", "id": str(number), "status": SEED003[status]}
    return _api(board, token, "tasks", body)


def _mcp_update(board: Board, agent: str, token: str, number: int, status: str) -> Refused:
    return _mcp(board, agent, {"taskId": str(number), "status": status})


DOORS: dict[str, Door] = {
    "TaskUpdate": _task_update,
    "TaskBatch": _task_batch,
    "seed002": _seed002,
    "seed003": _seed003,
    "MCP": _mcp_update,
}


FINISHING = ["completed", "failed", "cancelled"]


def _snapshot(board: Board) -> tuple[Any, ...]:
    tasks = tuple(Task.objects.filter(board=board).order_by("number").values_list())
    return tasks, Event.objects.filter(board=board).count()


def _try(door: str, board: Board, agent: str, number: int, status: str) -> Refused:
    token = make_token(board, agent)
    before = _snapshot(board)
    refused = DOORS[door](board, agent, token, number, status)
    if refused == "unsupported":
        pytest.skip(f"{door} cannot say {status!r}")
    assert _snapshot(board) == before, f"{door} changed the board although it refused"
    assert not isinstance(refused, str)
    return refused


def _migration_chain(board: Board) -> None:
    """#1 a gated migration nobody approved, #2 waits for it, #3 waits for #2."""
    make_task(board, "Run the migration", requires_approval=True)
    make_task(board, "Deploy", blocked_by=["1"])
    make_task(board, "Announce", blocked_by=["2"])


@pytest.mark.parametrize("status", FINISHING)
@pytest.mark.parametrize("door", DOORS)
def test_an_agent_cannot_finish_the_dependent_of_an_unapproved_migration(board, door, status):
    _migration_chain(board)
    assert _try(door, board, "alice", 2, status) == (409, "approval_required")
    # The next task in the chain stays blocked: nobody can claim it.
    claim = _api(board, make_token(board, "bob"), "TaskClaim", {"taskId": "3"})
    assert claim == (409, "blocked")


@pytest.mark.parametrize("status", FINISHING)
@pytest.mark.parametrize("door", DOORS)
def test_an_agent_cannot_finish_a_task_whose_blockers_are_open(board, door, status):
    make_task(board, "Build")
    make_task(board, "Ship", blocked_by=["1"])
    assert _try(door, board, "alice", 2, status) == (409, "blocked")


@pytest.mark.parametrize("door", DOORS)
def test_an_agent_may_delete_a_blocked_task_and_what_waits_on_it_stays_held(board, door):
    _migration_chain(board)
    token = make_token(board, "alice")
    refused = DOORS[door](board, "alice", token, 2, "deleted")
    if refused == "unsupported":
        pytest.skip(f"{door} cannot delete")
    assert refused is None
    assert not Task.objects.filter(board=board, number=2).exists()
    # #3 now waits for the unapproved migration itself: nobody can claim it.
    assert list(
        Task.objects.get(board=board, number=3).blocked_by.values_list("number", flat=True)
    ) == [1]
    claim = _api(board, make_token(board, "bob"), "TaskClaim", {"taskId": "3"})
    assert claim == (409, "blocked")


def test_the_refusal_names_the_blocker_that_waits_for_a_person(board, alice):
    _migration_chain(board)
    refused = alice.call("TaskUpdate", {"taskId": "2", "status": "completed"})
    assert refused.status == 409
    assert refused.error["details"] == {"blocker": "1", "approval": "none"}
    assert "#1" in refused.error["message"] and "#2" in refused.error["message"]


def test_once_the_blockers_are_done_the_agent_finishes_as_before(board, alice):
    make_task(board, "Build")
    make_task(board, "Ship", blocked_by=["1"])
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "completed"}).status == 200
    assert alice.call("TaskUpdate", {"taskId": "2", "status": "completed"}).status == 200


def test_a_batch_may_finish_a_blocker_and_then_its_dependent(board, alice):
    make_task(board, "Build")
    make_task(board, "Ship", blocked_by=["1"])
    ops = [
        {"op": "update", "taskId": "1", "status": "completed"},
        {"op": "update", "taskId": "2", "status": "completed"},
    ]
    assert alice.call("TaskBatch", {"ops": ops}).status == 200
    # The other order finishes the dependent first: refused, and the batch is undone.
    make_task(board, "Build again")
    make_task(board, "Ship again", blocked_by=["3"])
    refused = alice.call(
        "TaskBatch", {"ops": [{**ops[1], "taskId": "4"}, {**ops[0], "taskId": "3"}]}
    )
    assert (refused.status, refused.error["code"]) == (409, "blocked")
    assert Task.objects.get(board=board, number=3).status == "pending"


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "pending", "deleted"])
@pytest.mark.parametrize("door", DOORS)
def test_an_agent_cannot_move_another_agents_live_task(board, door, status):
    make_task(board, "Refactor the parser")
    services.task_claim(board=board, agent="alice", task_id="1")
    assert _try(door, board, "bob", 1, status) == (409, "held_by_another")
    task = Task.objects.get(board=board, number=1)
    assert (task.status, task.owner) == ("in_progress", "alice")


def test_the_refusal_names_whose_work_it_is(board, alice, bob):
    alice.create("Refactor the parser")
    alice.call("TaskClaim", {"taskId": "1"})
    refused = bob.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert (refused.status, refused.error["code"]) == (409, "held_by_another")
    assert refused.error["details"] == {"owner": "alice"}
    assert "alice" in refused.error["message"]
    # Notes and results are not status changes: those stay open to helpers, as before.
    assert bob.call("TaskUpdate", {"taskId": "1", "notes": "see #4"}).status == 200
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "completed"}).status == 200


def test_a_lapsed_lease_an_orchestrator_and_the_holders_own_token_may_move_it(board, alice, bob):
    alice.create("Refactor the parser")
    alice.call("TaskClaim", {"taskId": "1"})
    lead = services.token_issue(board=board, agent="lead", orchestrator=True)
    reply = Client().post(
        f"/api/boards/{board.slug}/tools/TaskUpdate",
        data={"taskId": "1", "status": "pending"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {lead}"},
    )
    assert reply.status_code == 200, reply.json()

    alice.call("TaskClaim", {"taskId": "1"})
    Task.objects.filter(board=board, number=1).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert bob.call("TaskUpdate", {"taskId": "1", "status": "failed"}).status == 200

    # Agents of one team token share their work (as for taking it over).
    team = make_token(board, team=True)
    make_task(board, "Write the docs")

    def as_agent(name: str, tool: str, body: dict[str, Any]) -> int:
        response = Client().post(
            f"/api/boards/{board.slug}/tools/{tool}",
            data=body,
            content_type="application/json",
            headers={"Authorization": f"Bearer {team}", "X-Agent": name},
        )
        return response.status_code

    assert as_agent("claude-one", "TaskClaim", {"taskId": "2"}) == 200
    assert as_agent("claude-two", "TaskUpdate", {"taskId": "2", "status": "completed"}) == 200


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_people_keep_their_powers(board, status):
    _migration_chain(board)
    make_task(board, "Someone's work")
    services.task_claim(board=board, agent="alice", task_id="4")
    for number in (2, 4):
        services.task_update(board=board, actor="pat", person=True, task_id=number, status=status)
        assert Task.objects.get(board=board, number=number).status == status


def test_the_board_finishes_a_blocked_task_for_a_person(board, person_client):
    _migration_chain(board)
    response = person_client.post(f"/boards/{board.slug}/tasks/2/status/", {"status": "completed"})
    assert response.status_code == 302
    assert Task.objects.get(board=board, number=2).status == "completed"

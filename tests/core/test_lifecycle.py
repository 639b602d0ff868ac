"""The task state machine: every status change that must be refused is refused, at every door.

Each door is the real path an actor takes: the HTTP tool API (TaskUpdate, TaskBatch,
TaskClaim), both seed dialects, the MCP tool call, and the board's own forms for a
person. Each case sets a task up, tries the change through one door, and asserts
the refusal's status and code, and that nothing changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from boards.agents import mcp
from boards.core import services
from boards.core.auth import Caller
from boards.core.services.lifecycle import TRANSITIONS
from boards.models import Board, Event, Task
from tests.support.factories import make_task

AGENT = "alice"


@dataclass
class Refusal:
    status: int
    code: str


def _api(client: Client, board: Board, token: str, tool: str, body: dict) -> Refusal | None:
    response = client.post(
        f"/api/boards/{board.slug}/tools/{tool}",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    if response.status_code < 400:
        return None
    return Refusal(response.status_code, response.json()["error"]["code"])


def _mcp(board: Board, tool: str, body: dict) -> Refusal | None:
    result = async_to_sync(mcp.call_tool)(Caller(board=board, agent=AGENT), tool, body)
    if not result.is_error:
        return None
    assert result.structured_content is None  # a refusal is its text, the API's error JSON
    error = json.loads(result.content[0].text)["error"]
    status = {"invalid_input": 400, "task_not_found": 404}.get(error["code"], 409)
    return Refusal(status, error["code"])


SEED003 = {"pending": "open", "in_progress": "in_progress", "completed": "done"}

# A door: (name, who, how to ask it for `status` on task `number`). None when it cannot say it.
Door = Callable[[Client, Board, str, int, str], Refusal | None]


def _task_update(client: Client, board: Board, token: str, number: int, status: str):
    return _api(client, board, token, "TaskUpdate", {"taskId": str(number), "status": status})


def _task_batch(client: Client, board: Board, token: str, number: int, status: str):
    op = {"op": "update", "taskId": str(number), "status": status}
    return _api(client, board, token, "TaskBatch", {"ops": [op]})


def _seed002(client: Client, board: Board, token: str, number: int, status: str):
    return _api(
        client, board, token, "board_tasks_update", {"id": f"task-{number}", "status": status}
    )


def _seed003(client: Client, board: Board, token: str, number: int, status: str):
    if status not in SEED003:
        return "unsupported"
    body = {"action": "update", "id": str(number), "status": SEED003[status]}
    return _api(client, board, token, "tasks", body)


def _mcp_update(client: Client, board: Board, token: str, number: int, status: str):
    return _mcp(board, "TaskUpdate", {"taskId": str(number), "status": status})


AGENT_DOORS: dict[str, Door] = {
    "TaskUpdate": _task_update,
    "TaskBatch": _task_batch,
    "seed002": _seed002,
    "seed003": _seed003,
    "MCP": _mcp_update,
}

DELETE_DOORS: dict[str, Door] = {
    "TaskUpdate": lambda c, b, t, n, s: _api(
        c, b, t, "TaskUpdate", {"taskId": str(n), "status": "deleted"}
    ),
    "TaskBatch": lambda c, b, t, n, s: _api(
        c, b, t, "TaskBatch", {"ops": [{"op": "delete", "taskId": str(n)}]}
    ),
    "seed003": lambda c, b, t, n, s: _api(c, b, t, "tasks", {"action": "delete", "id": str(n)}),
    "MCP": lambda c, b, t, n, s: _mcp(b, "TaskUpdate", {"taskId": str(n), "status": "deleted"}),
}


def _snapshot(board: Board) -> tuple[Any, ...]:
    tasks = tuple(Task.objects.filter(board=board).order_by("number").values_list())
    return tasks, Event.objects.filter(board=board).count()


# --- the setups: a task in a given state ------------------------------------------------------


def finished(board: Board, status: str) -> int:
    make_task(board, "Finished")
    services.task_update(board=board, actor="pat", person=True, task_id="1", status=status)
    return 1


def blocked(board: Board) -> int:
    make_task(board, "Blocker")
    make_task(board, "Waits", blocked_by=["1"])
    return 2


def gated(board: Board) -> int:
    make_task(board, "Run the migration", requires_approval=True)
    return 1


def gated_requested(board: Board) -> int:
    number = gated(board)
    services.task_claim(board=board, agent=AGENT, task_id=str(number))
    return number


def gated_denied(board: Board) -> int:
    number = gated_requested(board)
    services.approval_decide(board=board, person="pat", task_id=str(number), approve=False)
    return number


# (setup, target status, expected code): what no agent may do, whatever the door.
AGENT_REFUSALS = [
    *[
        (f"{s}→in_progress", lambda b, s=s: finished(b, s), "in_progress", "terminal")
        for s in ("completed", "failed", "cancelled")
    ],
    ("blocked→in_progress", blocked, "in_progress", "blocked"),
    ("gated→in_progress", gated, "in_progress", "approval_required"),
    ("gated→completed", gated, "completed", "approval_required"),
    ("gated→failed", gated, "failed", "approval_required"),
    ("requested→completed", gated_requested, "completed", "awaiting_approval"),
    ("requested→failed", gated_requested, "failed", "awaiting_approval"),
    ("requested→in_progress", gated_requested, "in_progress", "awaiting_approval"),
    ("denied→pending", gated_denied, "pending", "approval_denied"),
    ("denied→completed", gated_denied, "completed", "approval_denied"),
]


@pytest.mark.parametrize("door", AGENT_DOORS)
@pytest.mark.parametrize(
    ("setup", "status", "code"),
    [case[1:] for case in AGENT_REFUSALS],
    ids=[case[0] for case in AGENT_REFUSALS],
)
def test_an_agent_is_refused_the_same_way_at_every_door(board, alice, door, setup, status, code):
    number = setup(board)
    before = _snapshot(board)
    refusal = AGENT_DOORS[door](alice.client, board, alice.token, number, status)
    if refusal == "unsupported":
        pytest.skip(f"seed 003 has no status {status!r}")
    assert refusal is not None, f"{door} let an agent move task {number} to {status}"
    assert (refusal.status, refusal.code) == (409, code)
    assert _snapshot(board) == before


@pytest.mark.parametrize("door", DELETE_DOORS)
@pytest.mark.parametrize(
    ("setup", "code"),
    [
        (gated, "approval_required"),
        (gated_requested, "awaiting_approval"),
        (gated_denied, "approval_denied"),
    ],
    ids=["gated", "requested", "denied"],
)
def test_an_agent_cannot_delete_an_unapproved_gated_task(board, alice, door, setup, code):
    number = setup(board)
    before = _snapshot(board)
    refusal = DELETE_DOORS[door](alice.client, board, alice.token, number, "deleted")
    assert refusal is not None and (refusal.status, refusal.code) == (409, code)
    assert _snapshot(board) == before


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        (lambda b: finished(b, "completed"), "terminal"),
        (blocked, "blocked"),
        (gated_requested, "awaiting_approval"),
        (gated_denied, "terminal"),
    ],
    ids=["finished", "blocked", "requested-by-other", "denied"],
)
def test_a_claim_is_refused_by_the_same_rules(board, bob, setup, code):
    number = setup(board)
    before = _snapshot(board)
    refusal = _api(bob.client, board, bob.token, "TaskClaim", {"taskId": str(number)})
    assert refusal is not None and (refusal.status, refusal.code) == (409, code)
    assert _snapshot(board) == before


PERSON_REFUSALS = [
    ("completed→in_progress", lambda b: finished(b, "completed"), "in_progress", "terminal"),
    ("blocked→in_progress", blocked, "in_progress", "blocked"),
    ("gated→in_progress", gated, "in_progress", "approval_required"),
]


@pytest.mark.parametrize(
    ("setup", "status", "code"),
    [case[1:] for case in PERSON_REFUSALS],
    ids=[case[0] for case in PERSON_REFUSALS],
)
def test_a_person_on_the_board_is_refused_what_no_one_may_do(
    board, person_client, setup, status, code
):
    number = setup(board)
    before = _snapshot(board)
    response = person_client.post(
        f"/boards/{board.slug}/tasks/{number}/status/", {"status": status}
    )
    assert response.status_code == 302  # back to the board, with the refusal as a message
    assert _snapshot(board) == before


def test_a_person_may_do_what_the_gate_keeps_from_agents(board, person_client):
    number = gated_denied(board)
    response = person_client.post(
        f"/boards/{board.slug}/tasks/{number}/status/", {"status": "pending"}
    )
    assert response.status_code == 302
    task = Task.objects.get(board=board, number=number)
    assert task.status == "pending"
    # Reopening clears the decision: the next claim asks a person again.
    assert task.approval_state == "none"
    outcome = services.task_claim(board=board, agent=AGENT, task_id=str(number))
    assert outcome.awaiting_approval


def test_the_transition_table_has_every_status_and_no_self_loops():
    statuses = {"pending", "in_progress", "completed", "failed", "cancelled"}
    assert set(TRANSITIONS) == statuses
    for source, targets in TRANSITIONS.items():
        assert source not in targets
        assert targets <= statuses
    finished_ones = {"completed", "failed", "cancelled"}
    assert all("in_progress" not in TRANSITIONS[s] for s in finished_ones)

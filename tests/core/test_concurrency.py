"""Many writers at once on the real SQLite file database: no lost update, one claim winner."""

import json
import threading
from collections import Counter

import pytest
from django.db import connection
from django.test import Client

from boards.core import services
from boards.models import Task
from tests.support.factories import make_board, make_token

CLAIMERS = 8
TASKS = 50


def run_in_threads(count: int, work) -> list:
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list = []

    def runner(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return results


def post(client: Client, token: str, tool: str, body: dict):
    return client.post(
        f"/api/boards/race/tools/{tool}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_each_task_has_exactly_one_winner():
    board = make_board("race")
    services.task_batch(
        board=board,
        actor="planner",
        ops=[{"op": "create", "subject": f"Task {i}"} for i in range(TASKS)],
    )
    tokens = [make_token(board, f"agent-{i}") for i in range(CLAIMERS)]

    def claim_all(index: int) -> list[tuple[int, int, str]]:
        client = Client()
        outcomes = []
        for number in range(1, TASKS + 1):
            response = post(client, tokens[index], "TaskClaim", {"taskId": str(number)})
            outcomes.append((number, response.status_code, response.content.decode()))
        return outcomes

    results = run_in_threads(CLAIMERS, claim_all)
    winners: dict[int, list[str]] = {}
    statuses = Counter()
    for index, outcomes in enumerate(results):
        for number, status, body in outcomes:
            statuses[status] += 1
            assert "database is locked" not in body
            if status == 200:
                winners.setdefault(number, []).append(f"agent-{index}")
    assert set(statuses) <= {200, 409}, statuses
    assert statuses[200] == TASKS
    for number in range(1, TASKS + 1):
        assert len(winners[number]) == 1, (number, winners.get(number))
        assert Task.objects.get(board=board, number=number).owner == winners[number][0]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_metadata_updates_lose_no_key():
    board = make_board("race")
    services.task_create(board=board, actor="planner", subject="Shared")
    writers = 8
    keys_each = 10
    tokens = [make_token(board, f"writer-{i}") for i in range(writers)]

    def write(index: int) -> list[int]:
        client = Client()
        codes = []
        for k in range(keys_each):
            response = post(
                client,
                tokens[index],
                "TaskUpdate",
                {"taskId": "1", "metadata": {f"w{index}-k{k}": k}},
            )
            codes.append(response.status_code)
        return codes

    results = run_in_threads(writers, write)
    assert all(code == 200 for codes in results for code in codes)
    task = Task.objects.get(board=board, number=1)
    assert len(task.metadata) == writers * keys_each
    assert task.version == 1 + writers * keys_each


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_claim_next_under_a_race_of_eight_agents_claims_every_task_exactly_once():
    board = make_board("race")
    ready = 40
    services.task_batch(
        board=board,
        actor="planner",
        ops=[{"op": "create", "subject": f"Task {i}"} for i in range(ready)],
    )
    tokens = [make_token(board, f"agent-{i}") for i in range(CLAIMERS)]

    def claim_until_empty(index: int) -> list[str]:
        client = Client()
        claimed = []
        while True:
            response = post(client, tokens[index], "TaskClaim", {})
            assert response.status_code == 200, response.content
            task = response.json()["task"]
            if task is None:
                return claimed
            assert task["owner"] == f"agent-{index}"
            claimed.append(task["id"])

    results = run_in_threads(CLAIMERS, claim_until_empty)
    everything = [task_id for claimed in results for task_id in claimed]
    assert sorted(everything, key=int) == [str(n) for n in range(1, ready + 1)]
    owners = dict(Task.objects.filter(board=board).values_list("number", "owner"))
    for index, claimed in enumerate(results):
        assert all(owners[int(task_id)] == f"agent-{index}" for task_id in claimed)

"""The dependency graph's data (issue 16): nodes, edges, scopes and the critical path."""

from __future__ import annotations

import pytest

from boards.core import services


def graph(client, query: str = "") -> dict:
    answer = client.get(f"/boards/team/graph.json{query}")
    assert answer.status_code == 200, answer.content[:300]
    return answer.json()


@pytest.fixture
def plan(alice):
    # 1 → 2 → 4 → 5, 1 → 3 → 5 (diamond with a longer arm), 6 alone, 7 done.
    for subject in ("Plan", "Build A", "Build B", "Test A", "Ship", "Docs", "Old"):
        alice.create(subject)
    for task, blockers in (("2", ["1"]), ("3", ["1"]), ("4", ["2"]), ("5", ["3", "4"])):
        alice.call("TaskUpdate", {"taskId": task, "addBlockedBy": blockers})
    alice.call("TaskUpdate", {"taskId": "7", "status": "completed"})
    alice.call("TaskClaim", {"taskId": "1"})


def test_open_work_is_one_node_per_task_and_one_edge_per_dependency(plan, person_client):
    data = graph(person_client)
    assert [n["id"] for n in data["nodes"]] == ["1", "2", "3", "4", "5", "6"]
    assert [(e["from"], e["to"]) for e in data["edges"]] == [
        ("1", "2"),
        ("1", "3"),
        ("2", "4"),
        ("3", "5"),
        ("4", "5"),
    ]
    columns = {n["id"]: n["column"] for n in data["nodes"]}
    assert columns == {
        "1": "in_progress",
        "2": "blocked",
        "3": "blocked",
        "4": "blocked",
        "5": "blocked",
        "6": "pending",
    }
    assert data["critical"] == ["1", "2", "4", "5"]


def test_scopes_all_and_one_tasks_neighbourhood(plan, person_client):
    assert len(graph(person_client, "?scope=all")["nodes"]) == 7
    around = graph(person_client, "?task=4")
    assert [n["id"] for n in around["nodes"]] == ["1", "2", "4", "5"]
    assert graph(person_client, "?task=6")["nodes"][0]["id"] == "6"


def test_open_work_shows_the_failed_or_cancelled_cause_of_a_stuck_chain(plan, alice, person_client):
    alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    alice.call("TaskUpdate", {"taskId": "6", "status": "cancelled"})  # waited on by nothing
    data = graph(person_client)
    nodes = {n["id"]: n for n in data["nodes"]}
    assert sorted(nodes, key=int) == ["1", "2", "3", "4", "5"]
    assert nodes["1"]["status"] == "failed"
    assert ("1", "2") in [(e["from"], e["to"]) for e in data["edges"]]


def test_nodes_say_when_they_wait_for_an_approval(plan, alice, board, person_client):
    services.approval_require(board=board, person="owner", task_id=6, required=True)
    nodes = {n["id"]: n for n in graph(person_client)["nodes"]}
    assert nodes["6"]["approval"] == "required"
    assert nodes["1"]["approval"] is None
    claim = alice.call("TaskClaim", {"taskId": "6"})
    assert claim.status in (200, 202, 409), claim.body
    assert {n["id"]: n for n in graph(person_client)["nodes"]}["6"]["approval"] == "requested"


@pytest.mark.parametrize(
    ("query", "status"), [("?scope=some", 400), ("?task=x", 400), ("?task=99", 404)]
)
def test_a_bad_scope_is_a_clear_4xx(plan, person_client, query, status):
    assert person_client.get(f"/boards/team/graph.json{query}").status_code == status


def test_the_graph_page_is_served_to_members(plan, person_client, client):
    assert person_client.get("/boards/team/graph/").status_code == 200
    assert client.get("/boards/team/graph.json").status_code == 302  # to the login

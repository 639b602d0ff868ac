"""Labels (issue #24): on create, update and batch; checked like agent names, case does not
matter; filtered by TaskList; chips on the board."""

from __future__ import annotations

from boards.models import Label


def test_labels_are_set_on_create_added_and_removed_and_listed_lower_case(alice, board):
    task = alice.create("Fix the parser", labels=["Backend", "bugs", "backend"])
    assert task["labels"] == ["backend", "bugs"]
    changed = alice.call(
        "TaskUpdate", {"taskId": "1", "addLabels": ["Urgent Fix"], "removeLabels": ["BUGS"]}
    )
    assert changed.status == 200, changed.body
    assert alice.call("TaskGet", {"taskId": "1"}).body["task"]["labels"] == [
        "backend",
        "urgent fix",
    ]
    replaced = alice.call("TaskUpdate", {"taskId": "1", "labels": ["docs"]})
    assert replaced.status == 200
    assert list(Label.objects.filter(board=board).values_list("name", flat=True)) == ["docs"]


def test_batch_and_list_filter_compose_with_views(alice):
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "a", "subject": "One", "labels": ["ui"]},
                {"op": "create", "ref": "b", "subject": "Two", "labels": ["ui", "api"]},
                {"op": "create", "subject": "Three", "blockedBy": ["a"], "labels": ["api"]},
                {"op": "update", "taskId": "a", "addLabels": ["api"]},
            ]
        },
    )
    assert reply.status == 200, reply.body
    listed = alice.call("TaskList", {"label": "API"}).body
    assert [t["id"] for t in listed["tasks"]] == ["1", "2", "3"]
    assert listed["tasks"][0]["labels"] == ["api", "ui"]
    ready = alice.call("TaskList", {"label": "api", "view": "ready"}).body
    assert [t["id"] for t in ready["tasks"]] == ["1", "2"]
    assert alice.call("TaskList", {"label": "none"}).body["tasks"] == []


def test_bad_labels_are_refused_naming_the_field_and_change_nothing(alice, board):
    alice.create("Keep")
    for body, field in (
        ({"taskId": "1", "labels": ["a\u200bb"]}, "labels"),
        ({"taskId": "1", "addLabels": [f"l{n}" for n in range(11)]}, "addLabels"),
        ({"taskId": "1", "labels": ["x" * 65]}, "labels"),
    ):
        refused = alice.call("TaskUpdate", body)
        assert refused.status == 400, refused.body
        assert refused.body["error"]["details"][0]["field"].startswith(field)
    eleven = alice.call(
        "TaskUpdate",
        {
            "taskId": "1",
            "labels": [f"l{n}" for n in range(6)],
            "addLabels": [f"m{n}" for n in range(5)],
        },
    )
    assert eleven.status == 400 and "at most 10 labels" in eleven.body["error"]["message"]
    assert not Label.objects.filter(board=board).exists()


def test_the_board_shows_label_chips(alice, person_client):
    alice.create("Chip", labels=["frontend"])
    html = person_client.get("/boards/team/").content.decode()
    assert 'data-label="frontend"' in html


def test_labels_show_on_graph_nodes_and_as_rows_of_the_metrics(alice, person_client):
    alice.create("Parse", labels=["backend"])
    alice.create("Style", labels=["frontend", "backend"])
    for number in ("1", "2"):
        alice.call("TaskClaim", {"taskId": number})
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    alice.call("TaskUpdate", {"taskId": "2", "status": "failed"})

    graph = person_client.get("/boards/team/graph.json?scope=all").json()
    assert {n["id"]: n["labels"] for n in graph["nodes"]} == {
        "1": ["backend"],
        "2": ["backend", "frontend"],
    }
    rows = person_client.get("/api/boards/team/metrics?range=1h").json()["labels"]
    assert [(r["label"], r["completed"], r["failed"]) for r in rows] == [
        ("backend", 1, 1),
        ("frontend", 0, 1),
    ]
    page = person_client.get("/boards/team/metrics/?range=1h").content.decode()
    assert 'data-label="backend"' in page and 'data-label="frontend"' in page

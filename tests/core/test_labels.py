"""Labels (issue #24): on create, update and batch; checked like agent names, case does not
matter; filtered by TaskList; chips on the board."""

from __future__ import annotations

import pytest
from django.test import Client

from boards.models import Event, Label, Membership, Role, Task
from tests.support.htmltext import flat


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


# --- a person sets them on the task's panel (issue #38) ---------------------------------


def _member(django_user_model, board, role: Role) -> Client:
    user = django_user_model.objects.create_user(f"as-{role}", password="pw-x-12345")
    Membership.objects.create(board=board, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def _set(client: Client, typed: str, **headers: str):
    return client.post("/boards/team/tasks/1/labels/", {"labels": typed}, headers=headers)


def test_an_operator_sets_labels_on_the_panel_and_the_card_is_pushed(
    alice, board, django_user_model, django_capture_on_commit_callbacks, published
):
    alice.create("Fix the parser", labels=["old"])
    operator = _member(django_user_model, board, Role.OPERATOR)
    panel = flat(operator.get("/boards/team/tasks/1/").content)
    assert 'name="labels" value="old"' in panel

    with django_capture_on_commit_callbacks(execute=True):
        answer = _set(operator, "Backend, needs review,backend", **{"HX-Request": "true"})
    assert answer.status_code == 200
    assert sorted(Label.objects.filter(board=board).values_list("name", flat=True)) == [
        "backend",
        "needs review",
    ]
    html = answer.content.decode()
    assert 'data-label="needs review"' in html and 'value="backend, needs review"' in html
    [update] = published
    assert update.touched == [1]
    assert [(e["kind"], e["taskId"], e["text"]) for e in update.events] == [
        ("updated", "1", "#1 updated by as-operator (labels)")
    ]
    assert Event.objects.filter(board=board).latest("seq").data["fields"]["labels"] == {
        "from": ["old"],
        "to": ["backend", "needs review"],
    }
    # Without a comma, spaces separate them; empty takes them all off.
    assert _set(operator, "ui  api").status_code == 302
    assert alice.call("TaskGet", {"taskId": "1"}).body["task"]["labels"] == ["api", "ui"]
    assert _set(operator, " ").status_code == 302
    assert not Label.objects.filter(board=board).exists()


def test_labels_set_from_the_board_page_come_back_in_its_label_filter(alice, person_client):
    alice.create("Style the board")
    answer = _set(
        person_client,
        "frontend",
        **{"HX-Request": "true", "HX-Current-URL": "http://testserver/boards/team/?label=zzz"},
    )
    assert answer.status_code == 200
    html = answer.content.decode()
    select = html[html.index('<select id="label-filter"') :]
    assert 'hx-swap-oob="true"' in select[:80]
    assert '<option value="frontend">' in select
    assert '<option value="zzz" selected>' in select  # the page's own filter is kept
    # From the task's own page there is no filter to refresh.
    elsewhere = _set(
        person_client,
        "frontend",
        **{"HX-Request": "true", "HX-Current-URL": "http://testserver/boards/team/tasks/1/"},
    )
    assert 'id="label-filter"' not in elsewhere.content.decode()


def test_a_viewer_cannot_set_labels_and_sees_no_labels_box(alice, board, django_user_model):
    alice.create("Keep", labels=["kept"])
    viewer = _member(django_user_model, board, Role.VIEWER)
    assert 'name="labels"' not in viewer.get("/boards/team/tasks/1/").content.decode()
    refused = _set(viewer, "mine")
    assert refused.status_code == 403
    assert "labels needs operator" in refused.content.decode()
    assert list(Label.objects.filter(board=board).values_list("name", flat=True)) == ["kept"]


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (", ".join(f"l{n}" for n in range(11)), "labels: at most 10 labels a task"),
        ("x" * 65, "labels: label &#x27;xxxxxxxxxx"),
        ("ok, <b>bold</b>", "labels: label &#x27;&lt;b&gt;bold&lt;/b&gt;&#x27;: letters"),
        ("a\u200bb", "labels: label"),
        ("y" * 5000, "labels: at most 660 characters (got 5000)"),
    ],
    ids=["too-many", "too-long", "html", "zero-width", "huge"],
)
def test_bad_labels_from_the_panel_are_a_400_naming_the_field_and_change_nothing(
    alice, board, person_client, typed, says
):
    alice.create("Keep", labels=["kept"])
    version = Task.objects.get(board=board, number=1).version
    refused = _set(person_client, typed, **{"HX-Request": "true"})
    assert refused.status_code == 400
    assert says in refused.content.decode()
    # Without JavaScript: back to the board (post/redirect/get), saying why.
    plain = person_client.post("/boards/team/tasks/1/labels/", {"labels": typed}, follow=True)
    assert plain.redirect_chain == [("/boards/team/", 302)]
    assert says in plain.content.decode()
    assert list(Label.objects.filter(board=board).values_list("name", flat=True)) == ["kept"]
    assert Task.objects.get(board=board, number=1).version == version

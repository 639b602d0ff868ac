"""The activity feed, its JSON for integrations, webhook and notification pages (issue 15)."""

from __future__ import annotations

import pytest
from django.test import Client

from boards.core import services
from boards.models import Delivery, Event, Subscription, Webhook
from tests.support.factories import make_token
from tests.support.htmltext import flat


@pytest.fixture
def history(board, alice, bob):
    alice.create("Write the plan")
    bob.create("Review it")
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    return board


def rows(html: str) -> list[str]:
    return [part.split('data-kind="')[1].split('"')[0] for part in html.split("<tr data-seq=")[1:]]


def test_the_feed_lists_who_did_what_newest_first(history, person_client):
    page = person_client.get("/boards/team/activity/?show=all").content.decode()
    assert rows(page) == ["status", "claimed", "created", "created", "board_created"]
    assert "#1 moved to Completed by alice" in page
    assert "“Review it” created by bob" in page
    assert 'title="' in page and "ago</time>" in page  # relative, exact on hover


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("actor=bob", ["created"]),
        ("kind=created", ["created", "created"]),
        ("task=1", ["status", "claimed", "created"]),
        ("task=%231&actor=alice", ["status", "claimed", "created"]),
        ("actor=nobody", []),
    ],
)
def test_the_feed_filters_by_actor_kind_and_task(history, person_client, query, kinds):
    page = person_client.get(f"/boards/team/activity/?{query}").content.decode()
    assert rows(page) == kinds


def test_the_feed_opens_on_what_matters_and_everything_is_one_click_away(
    history, alice, bob, person_client
):
    bob.call("TaskClaim", {"taskId": "2"})
    bob.call("TaskUpdate", {"taskId": "2", "status": "failed"})
    page = person_client.get("/boards/team/activity/").content.decode()
    assert rows(page) == ["status"]  # the failure; creations and claims are a click away
    assert 'href="?show=all"' in page and 'aria-current="page">What matters' in page
    assert person_client.get("/boards/team/activity/?show=some").status_code == 400
    live = person_client.get(
        "/boards/team/activity/?after=1", headers={"HX-Request": "true"}
    ).content.decode()
    assert rows(live) == ["status"]


def test_the_feed_pages_older_events_and_answers_newer_rows_for_the_live_page(
    board, alice, person_client
):
    for n in range(60):
        alice.create(f"Task {n}")
    first = person_client.get("/boards/team/activity/?show=all").content.decode()
    assert len(rows(first)) == 50
    assert "before=12" in first  # seq 61 … 12 shown; the next page is before the oldest
    older = person_client.get(
        "/boards/team/activity/?show=all&before=12", headers={"HX-Request": "true"}
    ).content.decode()
    assert len(rows(older)) == 11 and "Older" not in older
    newer = person_client.get(
        "/boards/team/activity/?show=all&after=59", headers={"HX-Request": "true"}
    ).content.decode()
    assert [r.split('"')[1] for r in newer.split("<tr data-seq=")[1:]] == ["61", "60"]


# slow: a big board (500 to 5,000 tasks) or a long history, like tests/core/test_scale.py
@pytest.mark.slow
def test_a_feed_page_costs_the_same_queries_on_a_long_history(
    board, alice, person_client, django_assert_max_num_queries
):
    alice.create("One")
    with django_assert_max_num_queries(20) as few:
        person_client.get("/boards/team/activity/?actor=alice")
    short = len(few)
    for n in range(200):
        alice.create(f"More {n}")
    with django_assert_max_num_queries(short):
        person_client.get("/boards/team/activity/?actor=alice")


# -- the events API ----------------------------------------------------------------------


def test_admins_read_the_event_log_as_json_after_a_sequence(history, person_client):
    answer = person_client.get("/api/boards/team/events?after=1&limit=2").json()
    assert [(e["seq"], e["kind"], e["actor"]) for e in answer["events"]] == [
        (2, "created", "alice"),
        (3, "created", "bob"),
    ]
    assert answer["events"][0]["text"] == "#1 “Write the plan” created by alice"
    assert (answer["nextAfter"], answer["lastSeq"]) == (3, 5)
    rest = person_client.get("/api/boards/team/events?after=3").json()
    assert [e["kind"] for e in rest["events"]] == ["claimed", "status"]
    assert rest["events"][1]["signal"] == "completed"


def test_an_admin_scoped_token_reads_events_and_an_agent_token_does_not(history):
    admin = services.token_issue(board=history, admin=True, created_by="pat")
    agent = make_token(history, "carol")
    reader = Client()
    answer = reader.get("/api/boards/team/events", headers={"Authorization": f"Bearer {admin}"})
    assert answer.status_code == 200 and len(answer.json()["events"]) == 5
    refused = reader.get("/api/boards/team/events", headers={"Authorization": f"Bearer {agent}"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "wrong_scope")
    bad = reader.get("/api/boards/team/events", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and 'error="invalid_token"' in bad["WWW-Authenticate"]
    assert reader.get("/api/boards/team/events").status_code == 401
    # …and the admin token calls no tools.
    tool = reader.post(
        "/api/boards/team/tools/TaskList",
        "{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {admin}"},
    )
    assert (tool.status_code, tool.json()["error"]["code"]) == (403, "wrong_scope")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("after=-1", "after"),
        ("after=x", "after"),
        ("taskId=abc", "taskId"),
    ],
)
def test_bad_event_paging_is_a_400_naming_the_field(history, person_client, query, field):
    answer = person_client.get(f"/api/boards/team/events?{query}")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["field"] == field


# -- the webhooks page --------------------------------------------------------------------


def test_an_admin_adds_an_endpoint_sees_its_secret_once_and_queues_a_test(board, person_client):
    answer = person_client.post(
        "/boards/team/webhooks/",
        {"action": "add", "url": "https://hooks.example.com/x", "kinds": ["failed", "completed"]},
        follow=True,
    )
    hook = Webhook.objects.get(board=board)
    assert (hook.kinds, hook.slack, hook.created_by) == (["completed", "failed"], False, "pat")
    assert hook.secret in answer.content.decode()
    assert hook.secret not in person_client.get("/boards/team/webhooks/").content.decode()
    person_client.post("/boards/team/webhooks/", {"action": "test", "webhook": hook.pk})
    assert Delivery.objects.get(webhook=hook).signal == "test"
    page = person_client.get("/boards/team/webhooks/").content.decode()
    assert "Test event sent by pat" in page and 'data-status="pending"' in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "add", "url": "ftp://x.example/"}, "only http:// and https://"),
        ({"action": "add", "url": "http://127.0.0.1:8000/"}, "loopback"),
        ({"action": "add", "url": "https://x.example/", "kinds": "sometimes"}, "unknown kind"),
        ({"action": "test", "webhook": "99999"}, "not found"),
        ({"action": "explode"}, "action:"),
    ],
)
def test_a_bad_webhook_form_is_a_400_that_changes_nothing(board, person_client, data, message):
    answer = person_client.post("/boards/team/webhooks/", data)
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


# -- notification choices -----------------------------------------------------------------


def test_a_person_chooses_what_notifies_them_and_the_board_remembers(board, person, person_client):
    page = flat(person_client.get("/boards/team/").content)
    assert 'value="approval_requested" checked' in page and 'value="completed" checked' not in page
    saved = person_client.post(
        "/boards/team/notify/", {"kinds": ["completed", "failed"]}, headers={"HX-Request": "true"}
    )
    assert saved.status_code == 200
    assert Subscription.objects.get(board=board, user=person).kinds == ["completed", "failed"]
    page = flat(person_client.get("/boards/team/").content)
    assert 'value="completed" checked' in page and 'value="approval_requested" checked' not in page
    refused = person_client.post("/boards/team/notify/", {"kinds": ["everything"]})
    assert refused.status_code == 400
    assert not Event.objects.filter(kind="notify").exists()  # a personal choice, no event

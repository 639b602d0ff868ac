"""Outbound webhooks (issue 15): the outbox a write fills, the library worker that empties it.

Deliveries go to a real HTTP server on loopback (``tests.receiver``); the worker is
django-tasks-db's own, run in batch mode here (in server processes it runs as threads,
tried in test_webhooks_live.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from django_tasks_db.management.commands.db_worker import Worker

from boards import services
from boards.errors import InvalidInput
from boards.models import Board, Delivery, Event
from boards.services import outbox
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def webhook_settings(settings):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = True
    settings.KANBAN_WEBHOOK_TIMEOUT_SECONDS = 1
    settings.KANBAN_WEBHOOK_BACKOFF_SECONDS = 0.05
    settings.KANBAN_PUBLIC_URL = "https://kanban.example"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


def run_worker() -> None:
    """The library's worker, until no sender is ready."""
    Worker(
        queue_names=[outbox.QUEUE],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
    ).run()


def work_until(done, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "deliveries did not finish"
        run_worker()
        time.sleep(0.02)


def add(board: Board, url: str, **options) -> tuple[int, str]:
    hook, secret = services.webhook_add(board=board, actor="pat", url=url, **options)
    return hook.pk, secret


def test_each_subscribed_event_arrives_once_signed_and_in_order(alice, board, receiver):
    hook, secret = add(board, receiver.url, kinds=["completed", "approval_requested", "failed"])
    for subject in ("A", "B", "C"):
        alice.create(subject)
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    alice.call("TaskUpdate", {"taskId": "2", "notes": "not a signal"})
    alice.call("TaskUpdate", {"taskId": "3", "status": "completed"})
    alice.call("TaskUpdate", {"taskId": "2", "status": "failed"})
    work_until(lambda: len(receiver.received) >= 3)
    run_worker()  # nothing more is sent
    got = receiver.received
    assert [r.headers["X-Kanban-Event"] for r in got] == ["completed", "completed", "failed"]
    assert all(r.verifies(secret) for r in got)
    bodies = [r.json for r in got]
    assert [b["task"]["id"] for b in bodies] == ["1", "3", "2"]
    assert [b["event"]["seq"] for b in bodies] == sorted(b["event"]["seq"] for b in bodies)
    first = bodies[0]
    assert first["event"]["text"] == "#1 moved to Completed by alice"
    assert first["board"] == {
        "slug": board.slug,
        "name": board.name,
        "url": "https://kanban.example/boards/team/",
    }
    assert first["taskUrl"] == "https://kanban.example/boards/team/tasks/1/"
    assert first["task"]["status"] == "completed"
    for r in got:  # the timestamp the signature covers is the header's
        assert str(r.json["timestamp"]) == r.headers["X-Kanban-Timestamp"]
        assert r.headers["X-Kanban-Delivery"] == str(r.json["id"])
    assert not receiver.received[0].verifies("another secret")
    rows = Delivery.objects.filter(webhook_id=hook).order_by("id")
    assert [(d.status, d.attempts) for d in rows] == [("delivered", 1)] * 3


def test_an_endpoint_that_fails_three_times_gets_it_on_the_fourth_try(alice, board, receiver):
    receiver.statuses = [500, 500, 500]
    hook, _ = add(board, receiver.url)
    alice.create("A")
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    delivery = Delivery.objects.get(webhook_id=hook)
    work_until(lambda: Delivery.objects.get(pk=delivery.pk).status == "delivered")
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status, delivery.last_error) == (4, 200, "")
    assert [r.json["attempt"] for r in receiver.received] == [1, 2, 3, 4]
    assert len({r.json["id"] for r in receiver.received}) == 1
    arrivals = [r.at for r in receiver.received]
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    # Each retry waited at least its backoff: 0.05 s, then 0.1 s, then 0.2 s.
    assert [gap >= 0.05 * 2**n for n, gap in enumerate(gaps)] == [True] * 3
    assert [outbox.backoff(n) for n in (1, 2, 3, 30)] == [0.05, 0.1, 0.2, 3600]


def test_a_failing_head_holds_later_events_back_so_the_order_is_kept(alice, board, receiver):
    receiver.statuses = [503]
    add(board, receiver.url)
    alice.create("A")
    alice.create("B")
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    alice.call("TaskUpdate", {"taskId": "2", "status": "completed"})
    work_until(lambda: Delivery.objects.filter(status="delivered").count() == 2)
    assert [(r.json["task"]["id"], r.json["attempt"]) for r in receiver.received] == [
        ("1", 1),
        ("1", 2),
        ("2", 1),
    ]


def test_after_the_give_up_time_a_delivery_fails_and_the_next_goes(
    alice, board, receiver, settings
):
    settings.KANBAN_WEBHOOK_GIVE_UP_SECONDS = 0
    receiver.statuses = [500]
    hook, _ = add(board, receiver.url)
    alice.create("A")
    alice.create("B")
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    alice.call("TaskUpdate", {"taskId": "2", "status": "completed"})
    work_until(lambda: not Delivery.objects.filter(status="pending").exists())
    rows = Delivery.objects.filter(webhook_id=hook).order_by("id")
    assert [(d.status, d.attempts, d.last_error) for d in rows] == [
        ("failed", 1, "HTTP 500"),
        ("delivered", 1, ""),
    ]


def test_a_redirect_is_not_followed_and_counts_as_a_failure(alice, board, receiver, settings):
    settings.KANBAN_WEBHOOK_GIVE_UP_SECONDS = 0
    elsewhere = Receiver()
    try:
        receiver.redirect_to = elsewhere.url
        add(board, receiver.url)
        alice.create("A")
        alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
        work_until(lambda: not Delivery.objects.filter(status="pending").exists())
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.last_status) == ("failed", 302)
        assert "redirects are not followed" in delivery.last_error
        assert elsewhere.received == []
    finally:
        elsewhere.close()


def test_slack_format_is_a_text_with_a_link_to_the_task(alice, board, receiver):
    add(board, receiver.url, slack=True, kinds=["approval_requested"])
    alice.create("Deploy <prod> & more", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})  # asks for approval
    work_until(lambda: len(receiver.received) >= 1)
    assert receiver.received[0].json == {
        "text": "*Team board*: #1 awaits approval, requested by alice: "
        "“claimed; waiting for approval before starting” "
        "<https://kanban.example/boards/team/tasks/1/|#1 Deploy &lt;prod&gt; &amp; more>"
    }


def test_a_test_event_and_a_redelivery_go_to_that_endpoint_only(alice, board, receiver):
    other = Receiver()
    try:
        hook, _ = add(board, receiver.url, kinds=["failed"])
        add(board, other.url)
        services.webhook_test(board=board, actor="pat", webhook_id=hook)
        work_until(lambda: len(receiver.received) >= 1)
        assert receiver.received[0].json["event"]["kind"] == "webhook_test"
        assert receiver.received[0].headers["X-Kanban-Event"] == "test"
        first = Delivery.objects.get(webhook_id=hook)
        services.delivery_redeliver(board=board, actor="pat", delivery_id=first.pk)
        work_until(lambda: len(receiver.received) >= 2)
        assert receiver.received[1].json["event"] == receiver.received[0].json["event"]
        assert other.received == []
    finally:
        other.close()


def test_writes_record_deliveries_only_for_active_subscribed_endpoints(alice, board, receiver):
    add(board, receiver.url, kinds=["failed"])
    paused, _ = add(board, receiver.url)
    services.webhook_change(board=board, actor="pat", webhook_id=paused, active=False)
    alice.create("A")
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert Delivery.objects.count() == 0
    assert [e.data["action"] for e in Event.objects.filter(kind="webhook")] == [
        "added",
        "added",
        "paused",
    ]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.com/x", "only http:// and https:// URLs"),
        ("file:///etc/passwd", "only http:// and https:// URLs"),
        ("http://localhost:8000/", "not this server's own loopback address"),
        ("http://127.0.0.1/", "not this server's own loopback address"),
        ("http://[::1]/", "not this server's own loopback address"),
        ("http://169.254.169.254/latest", "not this server's own loopback address"),
        ("https://user:pw@example.com/", "no user or password in the URL"),
        ("https://", "the URL has no host"),
    ],
)
def test_an_endpoint_must_be_http_and_not_this_servers_loopback(board, settings, url, problem):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    with pytest.raises(InvalidInput) as exc:
        services.webhook_add(board=board, actor="pat", url=url)
    assert problem in str(exc.value)


def test_each_attempt_refuses_an_address_that_is_this_servers_loopback(settings, receiver):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    # A name can come to resolve to loopback after it was added (no DNS here: /etc/hosts).
    status, error = outbox.post(receiver.url.replace("127.0.0.1", "localhost"), b"{}", {})
    assert (status, error) == (None, "not this server's own loopback address")
    assert outbox.address_problem(receiver.url) == (
        "refused: the endpoint is this server's own loopback address"
    )
    assert receiver.received == []


def test_the_event_log_shows_an_endpoint_by_host_only(board, receiver):
    hook, _ = add(board, "https://hooks.slack.example/services/T000/B000/secret-part")
    services.webhook_remove(board=board, actor="pat", webhook_id=hook)
    urls = [e.data["url"] for e in Event.objects.filter(kind="webhook")]
    assert urls == ["https://hooks.slack.example/…"] * 2

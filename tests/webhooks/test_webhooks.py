"""Outbound webhooks (issue 15): the outbox a write fills, the library worker that empties it.

Deliveries go to a real HTTP server on loopback (``tests.support.receiver``); the worker is
django-tasks-db's own, run in batch mode here (in server processes it runs as threads,
tried in test_webhooks_live.py).
"""

from __future__ import annotations

import ipaddress
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from boards.core.errors import InvalidInput
from boards.models import Board, Delivery, Event, Webhook
from boards.webhooks import delivery as webhook_delivery
from boards.webhooks import egress, subscriptions
from tests.support.receiver import Dripper, Receiver, certificate, free_port_on
from tests.support.workers import worker_threads

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def webhook_settings(settings):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = True
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = []
    settings.KANBAN_WEBHOOK_DEADLINE_SECONDS = 5
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
        queue_names=[webhook_delivery.QUEUE],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="test-worker",
        excluded_queue_names=[],
    ).run()


def in_thread(function: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``function`` in a thread of its own (with its own database connection)."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(function())
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        time.sleep(0.02)


def work_until(done, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "deliveries did not finish"
        run_worker()
        time.sleep(0.02)


def add(board: Board, url: str, **options) -> tuple[int, str]:
    hook, secret = subscriptions.webhook_add(board=board, actor="pat", url=url, **options)
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
    assert [webhook_delivery.backoff(n) for n in (1, 2, 3, 30)] == [0.05, 0.1, 0.2, 3600]


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
        subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook)
        work_until(lambda: len(receiver.received) >= 1)
        assert receiver.received[0].json["event"]["kind"] == "webhook_test"
        assert receiver.received[0].headers["X-Kanban-Event"] == "test"
        first = Delivery.objects.get(webhook_id=hook)
        subscriptions.delivery_redeliver(board=board, actor="pat", delivery_id=first.pk)
        work_until(lambda: len(receiver.received) >= 2)
        assert receiver.received[1].json["event"] == receiver.received[0].json["event"]
        assert other.received == []
    finally:
        other.close()


def test_writes_record_deliveries_only_for_active_subscribed_endpoints(alice, board, receiver):
    add(board, receiver.url, kinds=["failed"])
    paused, _ = add(board, receiver.url)
    subscriptions.webhook_change(board=board, actor="pat", webhook_id=paused, active=False)
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
        ("http://localhost:8000/", "not a public address"),
        ("http://127.0.0.1/", "not a public address"),
        ("http://[::1]/", "not a public address"),
        ("http://169.254.169.254/latest", "not a public address"),
        ("https://user:pw@example.com/", "no user or password in the URL"),
        ("https://", "the URL has no host"),
    ],
)
def test_an_endpoint_must_be_http_at_a_public_address(board, settings, url, problem):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    with pytest.raises(InvalidInput) as exc:
        subscriptions.webhook_add(board=board, actor="pat", url=url)
    assert problem in str(exc.value)


def test_the_event_log_shows_an_endpoint_by_host_only(board, receiver):
    hook, _ = add(board, "https://hooks.slack.example/services/T000/B000/secret-part")
    subscriptions.webhook_remove(board=board, actor="pat", webhook_id=hook)
    urls = [e.data["url"] for e in Event.objects.filter(kind="webhook")]
    assert urls == ["https://hooks.slack.example/…"] * 2


# -- one deadline per attempt, and a board's share of the workers (issue 23) ---------------


def test_an_endpoint_that_drips_its_answer_is_abandoned_at_the_deadline(board, settings):
    settings.KANBAN_WEBHOOK_DEADLINE_SECONDS = 1.5
    settings.KANBAN_WEBHOOK_BACKOFF_SECONDS = 60
    dripper = Dripper(every=0.3)
    try:
        hook, _ = add(board, dripper.url)
        subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook)
        started = time.monotonic()
        run_worker()
        took = time.monotonic() - started
    finally:
        dripper.close()
    delivery = Delivery.objects.get(webhook_id=hook)
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 1, "timed out")
    # A byte kept arriving (no read waited long), and still the attempt ended at the deadline.
    assert dripper.sent >= 3
    assert took < 1.5 + 1.0


def test_a_board_whose_endpoints_drip_leaves_the_other_worker_to_other_boards(
    board, other_board, receiver, settings
):
    settings.KANBAN_WEBHOOK_DEADLINE_SECONDS = 60  # the drips hold their worker all test long
    settings.KANBAN_WEBHOOK_BACKOFF_SECONDS = 60
    settings.KANBAN_WEBHOOK_SENDERS_PER_BOARD = 1
    drippers = [Dripper(every=0.5), Dripper(every=0.5)]
    slow = [add(board, dripper.url)[0] for dripper in drippers]
    elsewhere, _ = add(other_board, receiver.url)
    with worker_threads(2):
        try:
            for hook in slow:
                subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook)
            # Both workers took one of the board's senders: one drips, the other found the
            # board's place taken and let its worker go.
            wait_for(lambda: not DBTaskResult.objects.ready().exists())
            wait_for(lambda: drippers[0].open + drippers[1].open == 1)
            subscriptions.webhook_test(board=other_board, actor="pat", webhook_id=elsewhere)
            got = receiver.wait_for(1, timeout=10)
            assert [r.headers["X-Kanban-Event"] for r in got] == ["test"]
            assert drippers[0].open + drippers[1].open == 1
            waiting = Delivery.objects.filter(webhook__board=board, status="pending", attempts=0)
            assert waiting.count() == 1
        finally:
            for dripper in drippers:
                dripper.close()


def test_a_board_at_its_sender_cap_waits_and_its_next_endpoint_goes_when_the_place_is_free(
    board, other_board, receiver, settings
):
    settings.KANBAN_WEBHOOK_SENDERS_PER_BOARD = 1
    hanging = Receiver()
    try:
        first, _ = add(board, hanging.url)
        second, _ = add(board, receiver.url)
        elsewhere, _ = add(other_board, receiver.url)
        for hook, on in ((first, board), (second, board), (elsewhere, other_board)):
            subscriptions.webhook_test(board=on, actor="pat", webhook_id=hook)
        DBTaskResult.objects.all().delete()  # the senders are run by hand here
        hanging.hang.set()
        sender, sent = in_thread(lambda: webhook_delivery.drain(first))
        hanging.wait_for(1)
        # The board's one place is taken: its other endpoint waits; another board's goes.
        assert webhook_delivery.drain(second) == 0
        assert webhook_delivery.drain(elsewhere) == 1
        hanging.hang.clear()
        sender.join(10)
        assert sent == [1]
        # Letting go of the place woke the endpoint that waited.
        assert [task.args_kwargs["args"] for task in DBTaskResult.objects.all()] == [[second]]
        run_worker()
        assert Delivery.objects.filter(status="delivered").count() == 3
    finally:
        hanging.close()


def test_the_sweeper_wakes_each_boards_overdue_endpoints_as_many_as_it_may_run(
    board, other_board, receiver, settings
):
    settings.KANBAN_WEBHOOK_SENDERS_PER_BOARD = 1
    hooks = [add(board, receiver.url)[0], add(board, receiver.url)[0]]
    hooks.append(add(other_board, receiver.url)[0])
    for hook in hooks:
        board_of = Webhook.objects.get(pk=hook).board
        subscriptions.webhook_test(board=board_of, actor="pat", webhook_id=hook)
    DBTaskResult.objects.all().delete()  # their wake-ups were lost
    long_ago = Delivery.objects.get(webhook_id=hooks[0]).created_at - timedelta(hours=1)
    Delivery.objects.update(next_attempt_at=long_ago)
    assert webhook_delivery.kick() == 2
    assert sorted(task.args_kwargs["args"][0] for task in DBTaskResult.objects.all()) == [
        hooks[0],
        hooks[2],
    ]
    work_until(lambda: Delivery.objects.filter(status="delivered").count() == 3)


@pytest.mark.parametrize("change", ["remove", "pause"])
def test_removing_or_pausing_an_endpoint_stops_its_sender_before_the_next_attempt(
    alice, board, receiver, change
):
    hook, _ = add(board, receiver.url)
    for n in range(1, 4):
        alice.create(f"Task {n}")
        alice.call("TaskUpdate", {"taskId": str(n), "status": "completed"})
    receiver.hang.set()
    sender, sent = in_thread(lambda: webhook_delivery.drain(hook))
    receiver.wait_for(1)
    if change == "remove":
        subscriptions.webhook_remove(board=board, actor="pat", webhook_id=hook)
    else:
        subscriptions.webhook_change(board=board, actor="pat", webhook_id=hook, active=False)
    receiver.hang.clear()
    sender.join(10)
    assert sent == [1]  # the attempt under way ended; no other began
    assert len(receiver.received) == 1
    left = list(Delivery.objects.filter(webhook_id=hook).values_list("status", flat=True))
    assert left == ([] if change == "remove" else ["delivered", "pending", "pending"])
    assert webhook_delivery.drain(hook) == 0


def test_a_delivery_that_cannot_be_sent_is_given_up_and_the_next_one_goes(alice, board, receiver):
    hook, _ = add(board, receiver.url)
    for n in (1, 2):
        alice.create(f"Task {n}")
        alice.call("TaskUpdate", {"taskId": str(n), "status": "completed"})
    broken = Delivery.objects.filter(webhook_id=hook).order_by("id").first()
    Delivery.objects.filter(pk=broken.pk).update(payload=["not", "an", "object"])
    work_until(lambda: not Delivery.objects.filter(status="pending").exists())
    rows = Delivery.objects.filter(webhook_id=hook).order_by("id")
    assert [(d.status, d.last_error) for d in rows] == [
        ("failed", "invalid payload"),
        ("delivered", ""),
    ]
    assert [r.json["task"]["id"] for r in receiver.received] == ["2"]


def test_an_endpoint_row_with_broken_kinds_breaks_neither_a_write_nor_the_other_endpoints(
    alice, board, receiver
):
    broken, _ = add(board, receiver.url)
    fine, _ = add(board, receiver.url, kinds=["completed"])
    Webhook.objects.filter(pk=broken).update(kinds=5)
    alice.create("A")
    reply = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert reply.status == 200, reply.body
    assert list(Delivery.objects.values_list("webhook_id", flat=True)) == [fine]


# -- which addresses (issue 23) -------------------------------------------------------------

REFUSED_HOSTS = [
    "10.0.0.1",  # private
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",  # shared (CGNAT)
    "100.100.100.200",  # Alibaba Cloud's metadata
    "169.254.169.254",  # most clouds' metadata
    "192.0.0.192",  # Oracle Cloud's metadata
    "168.63.129.16",  # Azure's platform endpoint
    "127.0.0.1",
    "127.1.2.3",
    "0.0.0.0",  # noqa: S104 (refused, never bound)
    "224.0.0.1",
    "255.255.255.255",
    "192.0.2.10",  # documentation
    "198.18.0.1",  # benchmarking
    "240.0.0.1",
    "[::1]",
    "[::]",
    "[fd00::2]",  # ULA
    "[fd00:ec2::254]",  # AWS's metadata over IPv6
    "[fe80::1]",
    "[ff02::1]",
    "[2001:db8::1]",
    "[64:ff9b:1::a00:1]",  # NAT64 for local use
    "[::ffff:10.0.0.1]",  # IPv4-mapped private
    "[::ffff:127.0.0.1]",
    "[::ffff:169.254.169.254]",
    "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    "[2002:a00:1::1]",  # 6to4 of 10.0.0.1
    "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
]


@pytest.mark.parametrize("host", REFUSED_HOSTS)
def test_a_private_address_is_refused_when_added_and_at_each_attempt(board, settings, host):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    settings.KANBAN_WEBHOOK_BACKOFF_SECONDS = 60  # one attempt in this run, however slow
    url = f"http://{host}:8080/hook"
    with pytest.raises(InvalidInput, match="not a public address"):
        subscriptions.webhook_add(board=board, actor="pat", url=url)
    # Added while a setting allowed every address; refused once it no longer does.
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = ["0.0.0.0/0", "::/0"]
    hook, _ = add(board, url)
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = []
    subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook)
    run_worker()
    delivery = Delivery.objects.get(webhook_id=hook)
    assert (delivery.attempts, delivery.last_error) == (1, "refused: private address")


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "2606:4700:4700::1111", "::ffff:93.184.216.34", "64:ff9b::5db8:d822"],
)
def test_a_public_address_and_its_ipv6_forms_are_allowed(settings, address):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    assert not egress.address_refused(ipaddress.ip_address(address))


def own_addresses() -> list[str]:
    """This host's addresses that it sends from to other machines (its routes say which)."""
    found = []
    for family, elsewhere in ((socket.AF_INET, "198.51.100.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((elsewhere, 9))
                found.append(probe.getsockname()[0].split("%")[0])
        except OSError:
            pass  # no route of that family
    return found


def test_this_hosts_own_addresses_are_refused_and_its_neighbours_are_not_its_own(board, settings):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    own = own_addresses()
    if not own:
        pytest.skip("this host has no route to other machines")
    for text in own:
        address = ipaddress.ip_address(text)
        assert egress.own_address(address)
        assert egress.address_refused(address)
        assert not egress.own_address(address + 1)
        host = f"[{address}]" if address.version == 6 else str(address)
        with pytest.raises(InvalidInput, match="not a public address"):
            subscriptions.webhook_add(board=board, actor="pat", url=f"http://{host}:8080/hook")
    assert egress.own_address(ipaddress.ip_address("127.0.0.1"))


def test_a_network_named_in_the_settings_is_allowed(settings):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = ["10.20.0.0/16", "fd12::/16"]
    allowed = ["10.20.3.4", "::ffff:10.20.3.4", "fd12::5"]
    refused = ["10.21.0.1", "fd13::5", "127.0.0.1"]
    assert [egress.address_refused(ipaddress.ip_address(a)) for a in allowed] == [False] * 3
    assert [egress.address_refused(ipaddress.ip_address(a)) for a in refused] == [True] * 3


@pytest.fixture
def resolver(monkeypatch) -> dict[str, list[str]]:
    """A stub DNS: a name in the returned dict resolves to the next of its answers (the
    last one again once they run out); each lookup is recorded in ``asked``."""
    answers: dict[str, list[str]] = {"asked": []}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in answers:
            return real(host, *args, **kwargs)
        answers["asked"].append(host)
        queue = answers[host]
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_a_dns_answer_that_changes_after_the_check_cannot_reach_loopback(settings, resolver):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = ["127.0.0.2/32"]
    port = free_port_on("127.0.0.2", "127.0.0.1")
    checked = Receiver(host="127.0.0.2", port=port)
    loopback = Receiver(host="127.0.0.1", port=port)
    # The first answer passes the check; every later one is this server's loopback.
    resolver["rebind.test"] = ["127.0.0.2", "127.0.0.1"]
    try:
        url = f"http://rebind.test:{port}/hook"
        assert egress.post(url, b"{}", {"Content-Type": "application/json"}) == (200, "")
        # Asked once: the connection went to the address that was checked, by name.
        assert resolver["asked"] == ["rebind.test"]
        assert [r.headers["Host"] for r in checked.received] == [f"rebind.test:{port}"]
        # The next attempt is told loopback, and refuses it.
        assert egress.post(url, b"{}", {}) == (None, "refused: private address")
        assert loopback.received == []
    finally:
        checked.close()
        loopback.close()


def test_https_to_a_checked_address_keeps_the_name_for_sni_and_the_certificate(
    settings, resolver, monkeypatch, tmp_path
):
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = False
    settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = ["127.0.0.2/32"]
    server_tls, client_tls = certificate(tmp_path, "hooks.test")
    monkeypatch.setattr(egress, "tls_context", lambda: client_tls)
    resolver["hooks.test"] = resolver["other.test"] = ["127.0.0.2"]
    receiver = Receiver(host="127.0.0.2", tls=server_tls)
    try:
        port = receiver.server.server_address[1]
        assert egress.post(f"https://hooks.test:{port}/hook", b"{}", {}) == (200, "")
        assert receiver.server_names == ["hooks.test"]
        assert receiver.received[0].headers["Host"] == f"hooks.test:{port}"
        # The certificate is checked against the URL's name, not the address connected to.
        assert egress.post(f"https://other.test:{port}/hook", b"{}", {}) == (
            None,
            "TLS certificate not valid for the host",
        )
        assert len(receiver.received) == 1
    finally:
        receiver.close()


def test_a_failed_attempt_records_the_class_of_failure_and_no_network_details(
    board, settings, receiver
):
    settings.KANBAN_WEBHOOK_DEADLINE_SECONDS = 1
    settings.KANBAN_WEBHOOK_BACKOFF_SECONDS = 60
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    receiver.statuses = [404]
    dripper = Dripper(every=0.3)
    try:
        urls = {
            f"http://127.0.0.1:{closed}/hook": "connection failed",
            "http://nowhere.invalid/hook": "host name not resolved",
            dripper.url: "timed out",
            receiver.url: "HTTP 404",
            "http://10.1.2.3:8080/hook": "refused: private address",
        }
        settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = ["10.0.0.0/8"]
        hooks = {add(board, url)[0]: url for url in urls}
        settings.KANBAN_WEBHOOK_ALLOW_NETWORKS = []
        for hook in hooks:
            subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook)
        work_until(lambda: not Delivery.objects.filter(attempts=0).exists())
    finally:
        dripper.close()
    errors = dict(Delivery.objects.values_list("webhook_id", "last_error"))
    assert {hooks[hook]: error for hook, error in errors.items()} == urls
    for error in errors.values():
        assert not any(c.isdigit() for c in error.replace("HTTP 404", ""))
        assert "Errno" not in error and "127.0.0.1" not in error and "nowhere" not in error

"""Web Push (SPEC §14) against a push-service stand-in on loopback: the key, devices,
a push within 2 s of an agent's gated claim, one-time Approve/Deny links, withdrawals."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from boards.core import services
from boards.core.errors import InvalidInput, NotFound
from boards.models import PushDevice, PushNotice, VapidKey
from boards.push import devices, keys, notices
from tests.support.htmltext import flat
from tests.support.push_standin import Browser, PushService
from tests.support.workers import worker_threads


@pytest.fixture
def service(settings, db) -> Iterator[PushService]:
    settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK = True
    settings.KANBAN_PUBLIC_URL = "http://testserver"
    stand_in = PushService(Client().get("/api/push/key").json()["publicKey"])
    yield stand_in
    stand_in.close()


def subscribe(client: Client, endpoint: str, browser: Browser, name: str = "Pat's phone"):
    return client.post(
        "/api/push/subscriptions",
        {"endpoint": endpoint, "keys": browser.keys(), "name": name},
        content_type="application/json",
    )


def act(url: str) -> Any:
    """Post an action's link as the service worker does: to its path, the secret from
    its fragment (``#t=…``) in the body."""
    parts = urlsplit(url)
    token = parse_qs(parts.fragment).get("t", [""])[0]
    return Client().post(parts.path, {"token": token})


def test_the_key_is_made_once_kept_and_published(db):
    first = Client().get("/api/push/key").json()["publicKey"]
    again = Client().get("/api/push/key").json()["publicKey"]
    assert first == again and VapidKey.objects.count() == 1
    assert len(keys.b64url(b"\0" * 65)) == len(first)  # an uncompressed P-256 point


def test_subscribing_needs_a_login_and_the_pages_csrf_header(person, service):
    browser = Browser()
    endpoint = service.endpoint(browser)
    assert subscribe(Client(), endpoint, browser).status_code == 401
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(person)
    assert subscribe(strict, endpoint, browser).status_code == 403
    assert not PushDevice.objects.exists()


def test_a_device_is_kept_listed_and_removed(person_client, person, service):
    browser = Browser()
    reply = subscribe(person_client, service.endpoint(browser), browser)
    assert reply.status_code == 201
    device = PushDevice.objects.get(pk=reply.json()["id"])
    assert (device.user, device.name, device.kinds) == (
        person,
        "Pat's phone",
        ["approval", "failed"],
    )
    page = person_client.get("/me/").content.decode()
    assert f'data-device="{device.pk}"' in page and "Pat&#x27;s phone" in page
    assert person_client.post("/me/", {"device": device.pk}).status_code == 302
    assert not PushDevice.objects.exists()


def test_a_device_is_told_of_the_kinds_its_person_chose(
    person_client, person, alice, board, service
):
    browser = Browser()
    device = PushDevice.objects.get(
        pk=subscribe(person_client, service.endpoint(browser), browser).json()["id"]
    )
    page = flat(person_client.get("/me/").content)
    ticked = re.findall(r'name="kinds" value="(\w+)" checked', page)
    assert ticked == ["approval", "failed"]

    chosen = {"kinds_of": device.pk, "kinds": ["no_progress", "failed"]}
    assert person_client.post("/me/", chosen).status_code == 302
    device.refresh_from_db()
    assert device.kinds == ["failed", "no_progress"]  # in the order the page lists them
    alice.create("Deploy", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    assert notices.board_sync(board.pk) == 0  # approvals: not chosen

    for refused in ({"kinds_of": device.pk, "kinds": ["everything"]}, {"kinds_of": "x"}):
        reply = person_client.post("/me/", refused, follow=True)
        assert "Reload the page" in reply.content.decode()
    with pytest.raises(NotFound):
        devices.device_kinds_set(user=person, device_id=device.pk + 1, kinds=["failed"])
    for kinds in (["everything"], "failed", [1]):
        with pytest.raises(InvalidInput):
            devices.device_kinds_set(user=person, device_id=device.pk, kinds=kinds)
    device.refresh_from_db()
    assert device.kinds == ["failed", "no_progress"]


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"endpoint": "https://push.example/x"},
        {"endpoint": "https://push.example/x", "keys": {"p256dh": "short", "auth": "x"}},
        {"endpoint": "ftp://push.example/x", "keys": Browser().keys()},
        {"endpoint": "x" * 2000, "keys": Browser().keys()},
    ],
)
def test_a_broken_subscription_is_refused_with_400(person_client, body):
    reply = person_client.post("/api/push/subscriptions", body, content_type="application/json")
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "invalid_input"
    assert not PushDevice.objects.exists()


def test_a_private_address_endpoint_is_refused(person_client):
    for endpoint in ("https://10.1.2.3/push/x", "https://127.0.0.1/push/x", "https://[::1]/p"):
        reply = subscribe(person_client, endpoint, Browser())
        assert reply.status_code == 400, endpoint
        assert "public" in reply.json()["error"]["message"]
    assert not PushDevice.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_gated_claim_is_pushed_within_2s_and_its_approve_link_works_once(
    person_client, alice, board, service
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    alice.create("Run the migration", requiresApproval=True)
    with worker_threads():
        started = time.monotonic()
        assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
        (push,) = service.wait(1)
    assert push.at - started < 2.0
    data = push.data
    assert data["title"] == "alice: #1 Run the migration"
    assert data["tag"] == "team:task-1@" + data["tag"].rsplit("@", 1)[1]
    assert data["url"] == "http://testserver/boards/team/tasks/1/"
    assert [a["action"] for a in data["actions"]] == ["approve", "deny"]
    assert int(push.headers["TTL"]) >= 900
    approve = data["actions"][0]["url"]

    reply = act(approve)
    assert (reply.status_code, reply.json()) == (200, {"decided": "approve"})
    task = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert task["approval"]["state"] == "approved"
    assert task["approval"]["history"][-1]["by"] == "pat"
    assert act(approve).status_code == 409
    assert act(data["actions"][1]["url"]).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_a_decision_on_the_board_withdraws_the_push_and_voids_its_links(
    person_client, alice, board, service
):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    alice.create("Deploy", requiresApproval=True)
    with worker_threads():
        alice.call("TaskClaim", {"taskId": "1"})
        (push,) = service.wait(1)
        started = time.monotonic()
        services.approval_decide(board=board, person="pat", task_id="1", approve=False)
        _, withdrawal = service.wait(2)
    assert withdrawal.at - started < 5.0
    assert withdrawal.data == {"tag": push.data["tag"], "withdraw": True}
    assert PushNotice.objects.get().withdrawn_at is not None
    reply = act(push.data["actions"][0]["url"])
    assert (reply.status_code, reply.json()["error"]["code"]) == (409, "push_link_stale")


@pytest.mark.django_db(transaction=True)
def test_a_gone_endpoint_removes_its_device(person_client, alice, service):
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    service.answers = [410]
    alice.create("Ship it", requiresApproval=True)
    with worker_threads():
        alice.call("TaskClaim", {"taskId": "1"})
        service.wait(1)
        deadline = time.monotonic() + 5
        while PushDevice.objects.exists():
            assert time.monotonic() < deadline, "the gone device was kept"
            time.sleep(0.02)


def test_an_unknown_or_malformed_link_is_a_404(db):
    assert Client().post("/push/act/" + "x" * 43 + "/").status_code == 404
    assert Client().post("/push/act/short/").status_code == 404
    assert Client().post("/push/act/approve/", {"token": "x" * 43}).status_code == 404
    assert Client().post("/push/act/approve/", {"token": "short"}).status_code == 404
    assert Client().post("/push/act/approve/").status_code == 404
    assert Client().get("/push/act/" + "x" * 43 + "/").status_code == 405


@pytest.mark.slow  # waits out two link lives
@pytest.mark.django_db(transaction=True)
def test_an_item_still_waiting_when_its_links_lapse_is_pushed_once_more_with_fresh_links(
    person_client, alice, board, service, settings
):
    """A link lives ``KANBAN_PUSH_LINK_SECONDS``; the item still waits when it lapses, so
    the phone is told again, once, under the same tag (replacing the notification), with
    links of their own; the lapsed ones answer 410 and decide nothing."""
    settings.KANBAN_PUSH_LINK_SECONDS = 2
    browser = Browser()
    assert subscribe(person_client, service.endpoint(browser), browser).status_code == 201
    alice.create("Rotate the keys", requiresApproval=True)
    with worker_threads():
        alice.call("TaskClaim", {"taskId": "1"})
        (first,) = service.wait(1)
        first_seen = time.monotonic()
        _, second = service.wait(2, timeout=10)
        old, new = (p.data["actions"][0]["url"] for p in (first, second))
        assert old != new
        assert act(old).status_code == 410
        # Once more only: the fresh links lapse too, and nothing is pushed a third time.
        time.sleep(settings.KANBAN_PUSH_LINK_SECONDS + 1.5)
        assert len(service.pushes) == 2
    assert second.at - first_seen >= settings.KANBAN_PUSH_LINK_SECONDS - 0.5
    assert (second.data["tag"], second.data["title"]) == (first.data["tag"], first.data["title"])
    assert act(new).status_code == 410
    assert alice.call("TaskGet", {"taskId": "1"}).body["task"]["approval"]["state"] == "requested"

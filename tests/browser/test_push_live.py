"""The installable board in Chromium (SPEC §14): the manifest loads, the service worker
registers, a push delivered to it shows a notification with its actions (and a
withdrawal closes it), and with a virtual authenticator a person registers a passkey,
then approving a held step-up call is refused until they confirm it with the passkey.

Service workers and passkeys need a secure origin: the server is opened at
``http://localhost`` (passkeys refuse bare IP addresses), and KANBAN_PUBLIC_URL says so.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from devtools.liveserver import Cluster, free_port, wait_until

from .conftest import PASSWORD, TIMEOUT_MS, USERNAME

pytestmark = pytest.mark.browser

SLUG = "phone"


@pytest.fixture(scope="module")
def origin(
    chromium_path: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str]]:
    port = free_port()
    base = f"http://localhost:{port}"
    made = Cluster(tmp_path_factory.mktemp("push"), env={"KANBAN_PUBLIC_URL": base})
    try:
        made.user(USERNAME, PASSWORD)
        made.manage("createboard", SLUG, "--name", "Phone board")
        made.start(port)
        yield made, base
    finally:
        made.stop()


@pytest.fixture
def context(browser: Browser, origin: tuple[Cluster, str]) -> Iterator[BrowserContext]:
    _, base = origin
    opened = browser.new_context()
    opened.set_default_timeout(TIMEOUT_MS)
    opened.grant_permissions(["notifications"], origin=base)
    try:
        yield opened
    finally:
        opened.close()


def logged_in(context: BrowserContext, base: str, path: str = "/me/") -> Page:
    page = context.new_page()
    page.goto(f"{base}/login/?next={path}")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{path}")
    return page


def notifications(page: Page) -> list[dict[str, Any]]:
    return page.evaluate(
        """navigator.serviceWorker.ready
          .then((r) => r.getNotifications())
          .then((all) => all.map((n) => ({title: n.title, tag: n.tag, body: n.body,
                                          actions: n.actions.map((a) => a.action)})))"""
    )


def test_the_manifest_loads_the_worker_registers_and_a_push_shows_its_actions(context, origin):
    _, base = origin
    page = logged_in(context, base)
    cdp = context.new_cdp_session(page)
    manifest = cdp.send("Page.getAppManifest")
    assert manifest["url"] == f"{base}/manifest.webmanifest"
    assert manifest["errors"] == [], manifest["errors"]
    assert json.loads(manifest["data"])["name"] == "Agent Kanban"

    state = page.evaluate("navigator.serviceWorker.ready.then((r) => r.active.state)")
    assert state in ("activating", "activated")
    registrations: list[dict[str, Any]] = []
    cdp.on(
        "ServiceWorker.workerRegistrationUpdated",
        lambda e: registrations.extend(e["registrations"]),
    )
    cdp.send("ServiceWorker.enable")
    # The protocol's events arrive while Playwright runs: wait in the page, not in sleep.
    for _ in range(100):
        if any(r["scopeURL"] == f"{base}/" for r in registrations):
            break
        page.wait_for_timeout(50)
    registration = next(r for r in registrations if r["scopeURL"] == f"{base}/")

    push = {
        "title": "claude (claude-code on laptop) asks to run Bash: git push origin main",
        "body": "Phone board: asks to run Bash",
        "tag": "phone:call-1",
        "url": f"{base}/boards/{SLUG}/#roster",
        "actions": [
            {"action": "approve", "title": "Approve", "url": f"{base}/push/act/x/"},
            {"action": "deny", "title": "Deny", "url": f"{base}/push/act/y/"},
        ],
    }
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {
            "origin": base,
            "registrationId": registration["registrationId"],
            "data": json.dumps(push),
        },
    )
    # A wait bound, not a speed claim: on a loaded 2-core run the worker took over 5 s once.
    wait_until(lambda: len(notifications(page)) == 1, timeout=15, what="the notification")
    (shown,) = notifications(page)
    assert shown["title"] == push["title"] and shown["tag"] == "phone:call-1"
    assert shown["actions"] == ["approve", "deny"]

    withdraw = {"tag": "phone:call-1", "withdraw": True}
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {
            "origin": base,
            "registrationId": registration["registrationId"],
            "data": json.dumps(withdraw),
        },
    )
    wait_until(lambda: notifications(page) == [], timeout=5, what="the withdrawal")


def hold(base: str, token: str, command: str) -> tuple[threading.Thread, list[Any]]:
    """An agent's client asks to run ``command``: the hook door holds the call until a
    person decides (in a thread; its answer lands in the list)."""
    body = {
        "hook_event_name": "PreToolUse",
        "session_id": "s-phone",
        "cwd": "/home/dev/project",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "tu-phone",
    }
    answers: list[Any] = []

    def run() -> None:
        request = urllib.request.Request(
            f"{base}/api/boards/{SLUG}/hooks/claude-code",
            data=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "X-Agent": "claude",
            },
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            answers.append(json.loads(reply.read()))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, answers


APPROVE = """([slug, id]) => fetch(`/boards/${slug}/calls/${id}/approve/`, {
  method: "POST", credentials: "same-origin",
  headers: {"X-CSRFToken": JSON.parse(document.body.getAttribute("hx-headers:inherited"))["X-CSRFToken"]},
  redirect: "manual"}).then((r) => r.status)"""


def test_a_passkey_is_registered_and_a_step_up_approval_needs_it(context, origin):
    cluster, base = origin
    page = logged_in(context, base)
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    page.fill("#passkey-name", "Laptop")
    page.fill("#passkey-password", PASSWORD)  # the first passkey: the password proves it
    page.click("#passkey-add")
    expect(page.locator("li[data-passkey]")).to_contain_text("Laptop")

    token = cluster.manage("issuetoken", SLUG, "claude").strip().splitlines()[-1]
    thread, answers = hold(base, token, "rm -rf build")

    def held() -> list[dict[str, Any]]:
        inbox = page.evaluate("fetch('/api/inbox').then((r) => r.json())")
        return [i for i in inbox["items"] if i["id"].startswith("call-")]

    wait_until(lambda: bool(held()), timeout=5, what="the held call")
    call_id = held()[0]["id"].removeprefix("call-")
    assert page.evaluate(APPROVE, [SLUG, call_id]) == 403
    assert thread.is_alive()  # still held

    assert page.evaluate("([s, i]) => window.kanbanStepUp(s, i)", [SLUG, f"call-{call_id}"]) == {
        "item": f"call-{call_id}"
    }
    assert page.evaluate(APPROVE, [SLUG, call_id]) in (200, 0)  # 0: the redirect, unfollowed
    thread.join(10)
    assert answers and "allow" in json.dumps(answers[0])

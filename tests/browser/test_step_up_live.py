"""A step-up approval from the board's Needs-you strip in Chromium (SPEC §14): for a
person with a passkey, Approve asks the (virtual) authenticator for an assertion made for
that held call first, and only then approves it; the event log says who confirmed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Response, expect

from devtools.liveserver import wait_until

from .conftest import PASSWORD
from .test_push_live import SLUG, context, hold, logged_in, origin  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser


def test_approving_a_held_step_up_call_from_the_strip_asks_for_the_passkey_first(
    context,  # noqa: F811 (the fixture)
    origin,  # noqa: F811 (the fixture)
):
    cluster, base = origin
    page = logged_in(context, base)
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    authenticator = cdp.send(
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
    )["authenticatorId"]
    page.fill("#passkey-name", "Laptop")
    page.fill("#passkey-password", PASSWORD)  # the first passkey: the password proves it
    page.click("#passkey-add")
    expect(page.locator("li[data-passkey]")).to_contain_text("Laptop")

    token = cluster.manage("issuetoken", SLUG, "claude").strip().splitlines()[-1]
    thread, answers = hold(base, token, "rm -rf build")
    page.goto(f"{base}/boards/{SLUG}/")
    need = page.locator("#needs [data-call]")
    expect(need).to_have_count(1)
    call_id = need.get_attribute("data-call")
    approve = need.locator(f'button[data-step-up-item="call-{call_id}"]')
    expect(approve).to_have_attribute("data-step-up-board", SLUG)
    assert page.evaluate("document.body.hasAttribute('data-passkey')")

    # What the page asks the board, in order: the passkey's options, the assertion, and
    # only then the approval (never a refused approval first).
    asked: list[tuple[str, int]] = []

    def seen(response: Response) -> None:
        path = response.url.removeprefix(base)
        if "/step-up/" in path or f"/calls/{call_id}/" in path:
            asked.append((path, response.status))

    page.on("response", seen)
    approve.click()
    # Three round trips and a WebAuthn ceremony before the approval itself.
    try:
        expect(page.locator("#needs [data-call]")).to_have_count(0, timeout=15_000)
    except AssertionError as exc:  # what the page had asked by then says where it stopped
        raise AssertionError(f"{exc}\nthe page asked: {asked}") from None
    thread.join(10)
    assert answers and "allow" in json.dumps(answers[0])
    assert asked == [
        (f"/boards/{SLUG}/step-up/options", 200),
        (f"/boards/{SLUG}/step-up/", 200),
        (f"/boards/{SLUG}/calls/{call_id}/approve/", 200),
    ]
    credentials = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})
    assert credentials["credentials"][0]["signCount"] >= 1

    def logged() -> str:
        reply: Any = page.evaluate(
            f"fetch('/boards/{SLUG}/activity/?show=all').then((r) => r.text())"
        )
        return str(reply)

    wait_until(
        lambda: "pat confirmed approving claude" in logged(), timeout=5, what="the step-up event"
    )

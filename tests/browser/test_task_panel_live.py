"""The task panel tells the truth at a glance, and a teammate joins by an invite link
(issue #27), in Chromium on a desktop (1440×900) and a phone (390×844): the panel's
first control is the action the task's state asks for; Esc closes it and the focus goes
back to the card; a claimed gated task's readiness names the approval; an invite link
opened in another browser signs a person up with its role, once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from devtools.liveserver import Cluster

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Screens, card, screens_on

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
# What a person can focus, in document order.
FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea"


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


def open_card(page: Page, number: str, column: str, screen: ViewportSize) -> None:
    if screen is PHONE:
        page.locator(f"#tab-{column}").click()
    card(page, number).locator(".card-link").click()
    expect(page.locator(f'#detail [data-detail-task="{number}"] h2')).to_be_focused()


def close_with_escape(page: Page, number: str) -> None:
    page.keyboard.press("Escape")
    expect(page.locator("#detail [data-detail-task]")).to_have_count(0)
    expect(page.locator("#detail .detail-placeholder")).to_have_count(1)
    expect(page.locator("#detail-sheet")).not_to_have_attribute("open", "")
    expect(card(page, number).locator(".card-link")).to_be_focused()


@pytest.mark.parametrize("screen", SCREENS)
def test_the_panel_leads_with_the_action_its_state_asks_and_escape_closes_it(
    pages: Screens, live_board: LiveBoard, screen: ViewportSize
):
    bob = live_board.agent("worker-2")
    failed = bob.create("Load test")
    bob.claim(failed)
    bob.update(failed, status="failed", result="Timed out at 500 rps")
    page = pages.open(screen=screen)

    open_card(page, failed, "completed", screen)
    panel = page.locator(f'#detail [data-detail-task="{failed}"]')
    expect(panel.locator("[data-status-line]")).to_contain_text(
        "It failed (attempt 1 of 3) and may be retried."
    )
    # The first thing Tab reaches in the panel is Retry, and it is the first control.
    expect(panel.locator(FOCUSABLE).first).to_have_attribute("data-first-action", "retry")
    page.keyboard.press("Tab")
    retry = panel.get_by_role("button", name="Retry", exact=True)
    expect(retry).to_be_focused()

    # Esc from inside the panel closes it; the focus goes back to the card.
    close_with_escape(page, failed)

    # A person's retry hands it back to any agent, the old result kept in its attempts.
    open_card(page, failed, "completed", screen)
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(panel.locator(".facts")).to_contain_text("Owner—")
    expect(panel.locator(".attempts")).to_contain_text("worker-2 · failed · “Timed out at 500 rps”")
    assert (t := bob.get(failed))["status"] == "pending" and t["owner"] == "" and t["result"] == ""


@pytest.mark.parametrize("screen", SCREENS)
def test_a_claimed_gated_task_reads_as_waiting_for_a_persons_approval(
    pages: Screens, live_board: LiveBoard, screen: ViewportSize
):
    alice = live_board.agent("worker-1")
    gated = alice.create("Drop the legacy table", requiresApproval=True)
    dependent = alice.create("Rebuild the reports", blockedBy=[gated])
    assert alice.call("TaskClaim", {"taskId": gated}).status == 202
    page = pages.open(screen=screen)

    open_card(page, dependent, "blocked", screen)
    panel = page.locator(f'#detail [data-detail-task="{dependent}"]')
    expect(panel.locator("[data-status-line]")).to_contain_text(
        f"Waiting on #{gated}, which waits for approval by a person (asked by worker-1)."
    )
    expect(panel).not_to_contain_text("Can move now")
    panel.locator("[data-waits-for-person]").get_by_role("link", name=f"#{gated}").click()

    panel = page.locator(f'#detail [data-detail-task="{gated}"]')
    expect(panel.locator("[data-status-line]")).to_contain_text(
        "It waits for a person's approval (asked by worker-1, who starts it once approved)."
    )
    expect(panel.locator(".facts")).to_contain_text("Owner— (asked by worker-1)")
    expect(panel.locator(FOCUSABLE).first).to_have_attribute("data-first-action", "approve")
    # The answer of a task opened from the panel is that task's, and Esc goes to its card.
    if screen is DESKTOP:
        close_with_escape(page, gated)
    assert alice.get(gated)["readiness"]["waitsForPerson"] == [gated]


@pytest.mark.parametrize("screen", SCREENS)
def test_an_invite_link_signs_a_person_up_with_its_role_once(
    pages: Screens, live_board: LiveBoard, cluster: Cluster, screen: ViewportSize
):
    admin = pages.open(screen=DESKTOP, path=f"/boards/{live_board.slug}/members/")
    admin.get_by_label("Role of the invited person").select_option("approver")
    admin.get_by_role("button", name="Create invite link").click()
    link = admin.locator("#invite-link").inner_text().strip()
    path = re.sub(r"^https?://[^/]+", "", link)
    assert path.startswith("/invite/inv_"), link
    expect(admin.locator("[data-invite]")).to_have_count(1)

    # Another browser, nobody logged in: the link asks for a username and a password.
    username = f"rita-{screen['width']}"
    newcomer = pages.open(screen=screen, path=path, login=False)
    expect(newcomer.locator("[data-invite-role]")).to_have_text("approver")
    newcomer.get_by_label("Username").fill(username)
    newcomer.get_by_label("Password", exact=True).fill("a-long-unusual-passphrase-42")
    newcomer.get_by_label("Password again").fill("a-long-unusual-passphrase-42")
    newcomer.get_by_role("button", name="Create my account and join").click()
    newcomer.wait_for_url(f"{live_board.server.base}/boards/{live_board.slug}/")
    expect(newcomer.locator("#board")).to_be_visible()
    role = cluster.manage(
        "shell",
        "-c",
        "from boards.models import Membership\n"
        f"print(Membership.objects.get(board__slug={live_board.slug!r}, "
        f"user__username={username!r}).role)\n",
    )
    assert role.splitlines()[-1] == "approver"

    # The link is used: a second browser is refused with a page that says so.
    again = pages.open(screen=screen, path=path, login=False)
    expect(again.locator("[data-invite-refused]")).to_contain_text("already used")
    expect(again.locator("[data-invite-form]")).to_have_count(0)
    admin.reload()
    expect(admin.locator("[data-invite]")).to_have_count(0)

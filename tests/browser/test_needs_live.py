"""What needs a person, as it arrives by time alone, in a real Chromium (SPEC §12): a
failure nobody retries reaches the "Needs you" strip when the board's grace ends (the
live server's sweeper, no other write), with Retry first, and "go on without it" lets an
agent claim the dependent; an agent that stops calling turns silent on the roster and on
the card it holds, and one whose session ended is gone."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from devtools.liveserver import Cluster, Server, hook

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Screens, screens_on_a_new_board

pytestmark = pytest.mark.browser

GRACE_SECONDS = 3
SILENT_SECONDS = 10  # the least a board may set
# The sweeper looks about once a second, at which agents went quiet every third round
# (boot.AGENT_SWEEP_EVERY); a push is one render away. On a loaded 2-core machine a round
# can take seconds: a wait up to 8 s past the deadline (CI saw 4 s missed once).
SWEEP_MS = 8_000


@pytest.fixture
def screens(browser: Browser, cluster: Cluster, server: Server) -> Iterator[Screens]:
    with screens_on_a_new_board(browser, cluster, server, "Grace board") as opened:
        yield opened


def set_board(cluster: Cluster, board: LiveBoard, **settings: int) -> None:
    """The board's settings, as its admin saves them (through the service)."""
    cluster.manage(
        "shell",
        "-c",
        "from boards.core import services\nfrom boards.models import Board\n"
        f"services.board_settings(board=Board.objects.get(slug={board.slug!r}), "
        f"actor='pat', **{settings!r})\n",
    )


def strip_item(page: Page, number: str):
    return page.locator(f'#needs [data-need$=":task-{number}"]')


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_failure_nobody_retries_reaches_the_strip_after_the_grace_with_retry_first(
    screens: Screens, cluster: Cluster, screen: dict[str, int]
):
    board = screens.live_board
    set_board(cluster, board, failureGraceSeconds=GRACE_SECONDS)
    page = screens.open(screen=screen)
    agent = board.agent("builder")
    build = agent.create("Build the image")
    ship = agent.create("Ship the image", blockedBy=[build])
    agent.claim(build)
    agent.update(build, status="failed", result="registry timed out")

    # Within the grace: "may be retried" on the dependent, nothing asked of a person.
    if screen is PHONE:
        page.locator('.column-tab[data-tab="blocked"]').click()
    expect(page.locator(f"#task-{ship} .card-blocked")).to_contain_text("may be retried")
    expect(strip_item(page, build)).to_have_count(0)

    # The grace ends with no other write: the sweeper records it and the strip shows it.
    item = strip_item(page, build)
    expect(item).to_be_visible(timeout=GRACE_SECONDS * 1000 + SWEEP_MS)
    expect(item).to_have_attribute("data-reason", "failed")
    expect(item.locator(".need-actions button").first).to_have_text("Retry")
    expect(item).to_contain_text("builder")
    expect(page.locator(f"#task-{ship} .card-stuck")).to_contain_text(f"#{build}")

    # Go on without it: the dependent is ready, and the agent's claim-next gets it.
    # The line shows the recommended action; the others when the item is opened.
    item.locator("[data-need-expand]").click()
    item.locator("input[name=note]").fill("ship without the new image")
    item.get_by_role("button", name="Go on without it").click()
    expect(strip_item(page, build)).to_have_count(0)
    claimed = agent.ok("TaskClaim", {})
    assert claimed["task"]["id"] == ship, claimed
    messages = agent.ok("InboxRead", {"ack": True})["messages"]
    assert any("ship without the new image" in m["body"] for m in messages)


def test_an_agent_that_stops_calling_turns_silent_and_an_ended_session_is_gone(
    screens: Screens, cluster: Cluster
):
    board = screens.live_board
    set_board(cluster, board, silentAfterSeconds=SILENT_SECONDS)
    page = screens.open(screen=DESKTOP)
    worker = board.agent("worker-killed")
    held = worker.create("Index the archive")
    worker.claim(held)
    row = page.locator('#roster [data-agent="worker-killed"]')
    expect(row).to_have_attribute("data-agent-state", "working")

    # The worker is killed: it makes no more calls. Nothing else writes to the board.
    expect(row).to_have_attribute(
        "data-agent-state", "silent", timeout=SILENT_SECONDS * 1000 + SWEEP_MS
    )
    expect(row).to_contain_text("last call")
    card = page.locator(f"#task-{held}")
    expect(card).to_have_class(re.compile(r"\bcard--stale\b"))
    expect(card.locator(".tag--stale")).to_have_text("silent")

    # A coding client's session that ended is gone at once, on the roster and its card.
    coder = board.agent("coder")
    task = coder.create("Refactor the parser")
    coder.claim(task)
    for event in ("SessionStart", "SessionEnd"):
        body = {"hook_event_name": event, "session_id": "s-coder", "cwd": "/work/parser"}
        status, answer = hook(board.server.base, board.slug, board.token, body, agent="coder")
        assert status == 200, answer
    coder_row = page.locator('#roster [data-agent="coder"]')
    expect(coder_row).to_have_attribute("data-agent-state", "gone", timeout=SWEEP_MS)
    expect(page.locator(f"#task-{task} .tag--stale")).to_have_text("gone", timeout=SWEEP_MS)


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_opening_an_approval_asked_again_shows_what_changed_and_the_agents_last_actions(
    screens: Screens, screen: dict[str, int]
):
    board = screens.live_board
    page = screens.open(screen=screen)
    agent = board.agent("migrator")
    task = agent.create("Migrate the orders table", description="Add the column")
    agent.claim(task)
    agent.ok("TaskRequestApproval", {"taskId": task, "reason": "about to migrate"})
    item = strip_item(page, task)
    item.get_by_role("button", name="Approve", exact=True).click()
    expect(item).to_have_count(0)
    # The answer is the task's panel (on a phone a sheet over the board): close it.
    expect(page.locator(f'#detail [data-detail-task="{task}"]')).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator(f'#detail [data-detail-task="{task}"]')).not_to_be_visible()
    agent.update(task, description="Add the column and drop the old one")
    agent.ok("TaskRequestApproval", {"taskId": task, "reason": "the plan grew"})

    expect(item).to_be_visible()
    item.locator("[data-need-expand]").click()  # opens what is decided
    later = item.locator(".need-later")
    expect(later).to_contain_text("Changed since version")
    expect(later.locator(".need-diff del")).to_have_text("Add the column")
    expect(later.locator(".need-diff ins")).to_have_text("Add the column and drop the old one")
    expect(later.locator(".need-recent li").first).to_contain_text("awaits approval")


def open_card(page: Page, number: str, column: str) -> None:
    tab = page.locator(f"#tab-{column}")
    if tab.is_visible():  # a phone shows one column at a time
        tab.click()
    page.locator(f"#task-{number} .card-link").click()
    expect(page.locator(f'#detail [data-detail-task="{number}"]')).to_be_visible()


@pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_reassigning_work_in_progress_never_strands_it(screens: Screens, screen: dict[str, int]):
    board = screens.live_board
    page = screens.open(screen=screen)
    first, second = board.agent("worker-1"), board.agent("worker-3")
    second.ok("InboxRead", {})  # on the roster
    task = first.create("Test the invoice API", activeForm="Testing the invoice API")
    first.claim(task)
    open_card(page, task, "in_progress")
    panel = page.locator(f'#detail [data-detail-task="{task}"]')

    # A typo is refused, with the close names, and changes nothing.
    panel.locator("input[name=owner]").fill("wrokr-3")
    panel.get_by_role("button", name="Reassign").click()
    expect(page.get_by_role("alert")).to_contain_text("worker-3")
    assert first.get(task)["owner"] == "worker-1"

    panel = page.locator(f'#detail [data-detail-task="{task}"]')
    panel.locator("input[name=owner]").fill("worker-3")
    panel.get_by_role("button", name="Reassign").click()
    expect(panel).to_contain_text("assigned, not started")
    if screen is PHONE:
        page.keyboard.press("Escape")
        page.locator("#tab-pending").click()
    expect(page.locator(f"#cards-pending #task-{task}")).to_contain_text("assigned, not started")
    expect(page.locator(f"#task-{task} .owner")).to_have_text("@worker-3")

    # The old owner's next write is refused; the new one hears of it and claims it next.
    refused = first.call("TaskUpdate", {"taskId": task, "status": "completed"})
    assert (refused.status, refused.body["error"]["code"]) == (409, "lease_lost"), refused
    told = second.ok("InboxRead", {"ack": True})["messages"]
    assert any(f"#{task}" in m["body"] for m in told), told
    assert second.ok("TaskClaim", {})["task"]["id"] == task
    expect(page.locator(f"#cards-in_progress #task-{task}")).to_be_attached()


def test_a_denial_that_strands_work_asks_a_person_at_once(screens: Screens):
    board = screens.live_board
    page = screens.open(screen=DESKTOP)
    agent = board.agent("deployer")
    migrate = agent.create("Migrate production", requiresApproval=True)
    release = agent.create("Release 2.0", blockedBy=[migrate])
    assert agent.call("TaskClaim", {"taskId": migrate}).status == 202
    item = strip_item(page, migrate)
    item.locator("input[name=note]").fill("not during the sale")
    item.get_by_role("button", name="Deny", exact=True).click()

    # At once, no grace: the denied task strands the release.
    expect(item).to_have_attribute("data-reason", "stranded")
    expect(item.locator(".need-actions button").first).to_have_text("Go on without it")
    expect(page.locator(f"#task-{release} .card-stuck")).to_contain_text(f"#{migrate}")

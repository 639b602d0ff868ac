"""Day one on the board (issue #38) in a real Chromium: a person sets a card's labels on
its panel and finds them on the card (on every open page) and in the label filter; the
search filters the cards as the person types, without Enter; the list of boards fits a
390 × 844 phone with every link reachable."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from devtools.liveserver import Cluster

from .conftest import LiveBoard
from .screens import DESKTOP, PHONE, Screens, assert_uncovered, card, populate, screens_on

pytestmark = pytest.mark.browser


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[Screens]:
    with screens_on(browser, live_board) as opened:
        yield opened


def labels_on(page: Page, number: str):
    return card(page, number).locator(".tag--label")


def test_a_person_sets_labels_on_the_panel_and_sees_them_on_the_card_and_in_the_filter(
    pages: Screens, live_board: LiveBoard
):
    agent = live_board.agent("worker-1")
    parser = agent.create("Write the parser")
    docs = agent.create("Write the docs")
    page, other = pages.open(screen=DESKTOP), pages.open(screen=DESKTOP)
    expect(page.locator("#label-filter option")).to_have_count(1)  # "any label"

    card(page, parser).locator(".card-link").click()
    panel = page.locator(f'#detail [data-detail-task="{parser}"]')
    box = panel.locator("input[name=labels]")
    box.fill("Backend, needs review")
    panel.get_by_role("button", name="Set labels").click()

    for seen in (page, other):  # the other page has it pushed
        expect(labels_on(seen, parser)).to_have_text(["backend", "needs review"])
    expect(panel.locator("[data-panel-labels] .tag--label")).to_have_text(
        ["backend", "needs review"]
    )
    expect(panel.locator("input[name=labels]")).to_have_value("backend, needs review")
    # The page's label filter offers them at once; choosing one keeps that card only.
    expect(page.locator("#label-filter option")).to_have_text(
        ["any label", "backend", "needs review"]
    )
    # The other page's filter has them pushed, without a reload.
    expect(other.locator("#label-filter option")).to_have_text(
        ["any label", "backend", "needs review"]
    )
    page.locator("#label-filter").select_option("needs review")
    expect(page).to_have_url(re.compile(r"\?label=needs\+review$"))
    expect(card(page, parser)).to_have_count(1)
    expect(card(page, docs)).to_have_count(0)
    # An agent's new label reaches both filters; the filtered page keeps its choice.
    agent.update(docs, labels=["urgent"])
    for seen in (page, other):
        expect(seen.locator("#label-filter option")).to_have_text(
            ["any label", "backend", "needs review", "urgent"]
        )
    expect(page.locator("#label-filter")).to_have_value("needs review")
    expect(other.locator("#label-filter")).to_have_value("")
    expect(card(page, docs)).to_have_count(0)
    expect(labels_on(other, docs)).to_have_text(["urgent"])

    # Bad input is refused on the panel, naming the field; the card keeps its labels.
    box = page.locator(f'#detail [data-detail-task="{parser}"] input[name=labels]')
    box.fill("ok, <b>bold</b>")
    page.locator("#detail").get_by_role("button", name="Set labels").click()
    expect(page.locator("#detail [role=alert]")).to_contain_text("labels: label '<b>bold</b>'")
    expect(labels_on(other, parser)).to_have_text(["backend", "needs review"])


def test_the_search_filters_the_cards_as_the_person_types(pages: Screens, live_board: LiveBoard):
    agent = live_board.agent("worker-1")
    deploy = agent.create("Deploy the staging server")
    others = [agent.create("Write the docs"), agent.create("Review the parser")]
    page = pages.open(screen=DESKTOP)
    searches: list[str] = []

    def seen(request: Request) -> None:
        if "q=" in request.url and request.url.split("?")[0].endswith(
            f"/boards/{live_board.slug}/"
        ):
            searches.append(request.url)

    page.on("request", seen)
    page.locator("#search").click()
    typed = "staging"
    page.keyboard.type(typed, delay=40)  # a person's typing; no Enter
    last_key = time.monotonic()
    for number in others:
        expect(card(page, number)).to_have_count(0, timeout=2_000)
    took = time.monotonic() - last_key
    expect(card(page, deploy)).to_have_count(1)
    expect(page).to_have_url(re.compile(r"\?q=staging$"))
    assert took < 2.0, f"the cards were filtered {took:.2f} s after the last key"
    # Debounced: far fewer searches than keys.
    assert 1 <= len(searches) < len(typed), searches


def test_the_list_of_boards_fits_a_phone_and_every_link_is_reachable(
    pages: Screens, live_board: LiveBoard, cluster: Cluster
):
    populate(live_board, cluster)  # its line has "waiting", "failed" and "stuck" pills
    long_name = "Quarterly-infrastructure-migration-and-observability-rollout-" * 2
    cluster.manage("createboard", f"long-{live_board.slug}", "--name", long_name[:-1])
    page = pages.open(screen=PHONE, path="/boards/")

    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    links = page.locator("main a")
    assert links.count() >= 3
    for i in range(links.count()):
        link = links.nth(i)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
        assert box["height"] >= 24, (link.inner_text(), box)  # a finger can hit it
    assert_uncovered(page, "main a")
    assert_uncovered(page, "#board-create button")
    # The board's own line links to it, and it opens.
    page.locator("main .board-list a", has_text=live_board.slug).first.click()
    expect(page).to_have_url(live_board.url)

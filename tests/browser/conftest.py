"""Real-browser fixtures: a daphne server in its own process, Chromium through Playwright.

The server runs as a separate process on its own SQLite file (STACK.md: a forked
``ChannelsLiveServerTestCase`` can hang after async tests), so these tests never
touch pytest-django's database: boards, tokens and the login are made by
management commands against the server's database (``devtools.liveserver``), agents
call the HTTP tool API, and people use the board in Chromium.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Request,
    Response,
    expect,
    sync_playwright,
)

from devtools.liveserver import CHROMIUM_ARGS, CHROMIUM_PATH, Cluster, Server, call

USERNAME = "pat"
PASSWORD = "pw-browser-123"
# Every wait in these tests is bounded by this (milliseconds).
TIMEOUT_MS = 5_000

expect.set_options(timeout=TIMEOUT_MS)


@dataclass
class Reply:
    status: int
    body: Any


@dataclass
class Agent:
    """An agent calling the board's tool API over real HTTP with a team token."""

    base_url: str
    slug: str
    token: str
    name: str

    def call(self, tool: str, body: dict[str, Any] | None = None) -> Reply:
        status, answer = call(
            self.base_url, self.slug, self.token, tool, body or {}, agent=self.name, timeout=10
        )
        return Reply(status, answer)

    def ok(self, tool: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.call(tool, body)
        assert reply.status == 200, (tool, body, reply)
        return reply.body

    def create(self, subject: str, **fields: Any) -> str:
        return self.ok("TaskCreate", {"subject": subject, **fields})["task"]["id"]

    def claim(self, task_id: str) -> dict[str, Any]:
        return self.ok("TaskClaim", {"taskId": task_id})["task"]

    def update(self, task_id: str, **fields: Any) -> dict[str, Any]:
        return self.ok("TaskUpdate", {"taskId": task_id, **fields})

    def get(self, task_id: str) -> dict[str, Any]:
        return self.ok("TaskGet", {"taskId": task_id})["task"]


@dataclass
class LiveBoard:
    server: Server
    slug: str
    token: str

    @property
    def url(self) -> str:
        return f"{self.server.base}/boards/{self.slug}/"

    def agent(self, name: str = "alice") -> Agent:
        return Agent(self.server.base, self.slug, self.token, name)


@dataclass(repr=False)
class BoardPages:
    """Opens logged-in pages on a board, each in its own browser context."""

    browser: Browser
    live_board: LiveBoard
    contexts: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Console errors, failed requests and error responses, shown when a test fails.
    log: list[str] = field(default_factory=list)

    def open(self) -> Page:
        context = self.browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        self._watch(page, f"page {len(self.contexts)}")
        base = self.live_board.server.base
        page.goto(f"{base}/login/?next=/boards/{self.live_board.slug}/")
        page.fill("input[name=username]", USERNAME)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(self.live_board.url)
        wait_live(page)
        mark_document(page)
        return page

    def _watch(self, page: Page, name: str) -> None:
        def on_console(msg: ConsoleMessage) -> None:
            if msg.type in ("error", "warning"):
                self.log.append(f"{name} console.{msg.type}: {msg.text}")

        def on_response(response: Response) -> None:
            if response.status >= 400:
                self.log.append(f"{name} HTTP {response.status}: {response.url}")

        def on_request_failed(request: Request) -> None:
            self.log.append(f"{name} request failed: {request.url} {request.failure}")

        page.on("pageerror", lambda exc: self.errors.append(f"{name}: {exc}"))
        page.on("console", on_console)
        page.on("response", on_response)
        page.on("requestfailed", on_request_failed)

    def close(self) -> None:
        for context in self.contexts:
            context.close()


def wait_live(page: Page) -> None:
    """Wait until the board's WebSocket is open (app.js marks it on htmx:ws:after:connection)."""
    page.wait_for_selector('#live-status[data-state="live"]', state="attached")


def mark_document(page: Page) -> None:
    """Tag this document, so a test can prove later that the page was never reloaded."""
    page.evaluate("window.__notReloaded = true")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On a failure, show what the browser and the server said."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    opened = funcargs.get("pages")
    if isinstance(opened, BoardPages):
        report.sections.append(("browser", "\n".join(opened.log) or "(nothing)"))
    srv = funcargs.get("server")
    board = funcargs.get("live_board")
    if isinstance(board, LiveBoard):
        srv = board.server  # the one the test's pages talk to
    if isinstance(srv, Server):
        # Thread stacks, when a test asked the server for them, run to about 300 lines.
        report.sections.append(("daphne log (tail)", srv.log_tail(400)))


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM_PATH).exists():
        reason = f"{CHROMIUM_PATH} is missing: install Debian's chromium to run the browser tests"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM_PATH


@pytest.fixture(scope="session")
def cluster(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The server's database (its own SQLite file), with the person's login."""
    made = Cluster(tmp_path_factory.mktemp("browser"))
    try:
        made.user(USERNAME, PASSWORD)
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="session")
def server(cluster: Cluster) -> Server:
    """One daphne on the cluster's database; a test may stop it and start it again."""
    return cluster.server(cluster.start())


class SharedChromium:
    """One Chromium for a run of consecutive browser tests, stopped before any other test.

    Playwright's sync API holds an asyncio event loop in the main thread for as long as it
    runs, and an async test cannot start its own loop beside it; so Chromium is stopped
    when the next test does not use it (see ``pytest_runtest_teardown``) and started again
    by the next one that does. The browser tests run one after another (conftest's order),
    so one start serves them all."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.browser: Browser | None = None

    def get(self, executable_path: str) -> Browser:
        if self.browser is None or not self.browser.is_connected():
            self.stop()
            self.playwright = sync_playwright().start()
            self.browser = self.playwright.chromium.launch(
                executable_path=executable_path, args=CHROMIUM_ARGS
            )
        return self.browser

    def stop(self) -> None:
        if self.browser is not None:
            self.browser.close()
            self.browser = None
        if self.playwright is not None:
            self.playwright.stop()
            self.playwright = None


chromium = SharedChromium()


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Browser:
    return chromium.get(chromium_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last of a run of browser tests (its fixtures are torn down by then)."""
    try:
        return (yield)
    finally:
        # A module's own fixtures (pages of a module-scoped scene) outlive its tests: the
        # browser stops only once the next test is in another module and needs none.
        later = nextitem is not None and (
            "browser" in getattr(nextitem, "fixturenames", ())
            or getattr(nextitem, "module", None) is getattr(item, "module", None)
        )
        if not later:
            chromium.stop()


_board_numbers = itertools.count(1)


@pytest.fixture
def live_board(cluster: Cluster, server: Server) -> LiveBoard:
    """A fresh board on the running server, with a team token (agents name themselves)."""
    if not server.running:  # an earlier test stopped it and could not start it again
        server.start()
    slug = f"b{next(_board_numbers)}-{os.getpid()}"
    # The createboard and issuetoken commands, run in one process to save a Django start.
    output = cluster.manage(
        "shell",
        "-c",
        "from django.core.management import call_command\n"
        f"call_command('createboard', {slug!r}, name='Browser board {slug}')\n"
        f"call_command('issuetoken', {slug!r}, 'agents', team=True)\n",
    )
    token = output.strip().splitlines()[-1]
    assert token.startswith("ak_"), output
    return LiveBoard(server, slug, token)


@pytest.fixture
def pages(browser: Browser, live_board: LiveBoard) -> Iterator[BoardPages]:
    opened = BoardPages(browser, live_board)
    try:
        yield opened
    finally:
        opened.close()
    assert not opened.errors, f"JavaScript errors on the board: {opened.errors}"


@pytest.fixture
def open_page(pages: BoardPages) -> Callable[[], Page]:
    return pages.open

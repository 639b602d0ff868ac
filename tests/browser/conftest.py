"""Real-browser fixtures: a daphne server in its own process, Chromium through Playwright.

The server runs as a separate process on its own SQLite file (STACK.md: a forked
``ChannelsLiveServerTestCase`` can hang after async tests), so these tests never
touch pytest-django's database: boards, tokens and the login are made by
management commands against the server's database, agents call the HTTP tool API
with urllib, and people use the board in Chromium.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
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

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
USERNAME = "pat"
PASSWORD = "pw-browser-123"
# Every wait in these tests is bounded by this (milliseconds).
TIMEOUT_MS = 5_000
SERVER_START_SECONDS = 30.0

expect.set_options(timeout=TIMEOUT_MS)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A daphne process serving ``kanban.asgi:application`` on a fixed port and database."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "daphne.log"
        env = dict(os.environ)
        # Hermetic: this server's own SQLite file and the in-memory channel layer.
        env.pop("REDIS_URL", None)
        env.update(
            DATABASE_URL=f"sqlite:///{workdir / 'browser.db'}",
            DJANGO_SETTINGS_MODULE="kanban.settings",
            PYTHONUNBUFFERED="1",
        )
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def manage(self, *args: str, extra_env: dict[str, str] | None = None) -> str:
        """Run ``manage.py`` against the server's database; answers its stdout."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def start(self) -> None:
        assert self.proc is None, "server already running"
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "kanban.asgi:application",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/login/", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"daphne did not answer within {SERVER_START_SECONDS}s:\n{self.log_tail()}"
        )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


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
        request = urllib.request.Request(
            f"{self.base_url}/api/boards/{self.slug}/tools/{tool}",
            data=json.dumps(body or {}).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "X-Agent": self.name,
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return Reply(response.status, json.loads(response.read()))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, json.loads(exc.read() or b"null"))

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
        return f"{self.server.base_url}/boards/{self.slug}/"

    def agent(self, name: str = "alice") -> Agent:
        return Agent(self.server.base_url, self.slug, self.token, name)


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
        base = self.live_board.server.base_url
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
    if isinstance(srv, Server):
        report.sections.append(("daphne log (tail)", srv.log_tail()))


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: install Debian's chromium to run the browser tests"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="session")
def server(chromium_path: str) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="kanban-browser-") as tmp:
        srv = Server(Path(tmp))
        srv.manage("migrate", "--noinput", "-v0")
        srv.manage(
            "createsuperuser",
            "--noinput",
            "--username",
            USERNAME,
            "--email",
            "pat@example.com",
            extra_env={"DJANGO_SUPERUSER_PASSWORD": PASSWORD},
        )
        srv.start()
        try:
            yield srv
        finally:
            srv.stop()


@pytest.fixture(scope="session")
def browser(chromium_path: str) -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


_board_numbers = itertools.count(1)


@pytest.fixture
def live_board(server: Server) -> LiveBoard:
    """A fresh board on the running server, with a team token (agents name themselves)."""
    if server.proc is None:  # an earlier test stopped it and could not start it again
        server.start()
    slug = f"b{next(_board_numbers)}-{os.getpid()}"
    # The createboard and issuetoken commands, run in one process to save a Django start.
    output = server.manage(
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

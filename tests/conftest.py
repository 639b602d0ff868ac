from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.test import Client, override_settings
from pytest_django.fixtures import validate_django_db

from boards.core import events
from boards.models import Board, Membership, Role
from devtools.liveserver import Cluster
from tests.support.factories import make_board, make_token

# No lease sweeper thread in this process: tests call services.leases_sweep() themselves.
# Servers started by the tests are other processes and sweep as in production.
os.environ["KANBAN_NO_SWEEPER_PID"] = str(os.getpid())


def _redis_of_this_worker() -> None:
    """Under pytest-xdist (``-n``) each worker gets a Redis database of its own, for its
    servers too (they inherit REDIS_URL): workers number their boards from 1 alike, so on
    one database their groups (``board_1``) would meet, and a test that flushes the layer
    or clears the cache would wipe the other worker's. Worker gwN uses database N + 1."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    url = os.environ.get("REDIS_URL", "")
    if not (worker.startswith("gw") and url):
        return
    parts = urlsplit(url)
    own = urlunsplit(parts._replace(path=f"/{int(worker[2:]) + 1}"))
    os.environ["REDIS_URL"] = own
    # Django's settings were read before this file (pytest-django sets Django up first);
    # neither the cache nor the channel layer has connected yet.
    settings.REDIS_URL = own
    settings.CACHES["default"]["LOCATION"] = own
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"] = own


_redis_of_this_worker()

T = TypeVar("T")


@dataclass
class Reply:
    status: int
    body: Any

    @property
    def error(self) -> dict:
        return self.body["error"]


@dataclass
class AgentClient:
    """An agent calling the tool API over HTTP with its token, through Django's test client."""

    board: Board
    token: str
    name: str
    client: Client

    def call(
        self, tool: str, body: Any = None, *, raw: bytes | None = None, headers: dict | None = None
    ) -> Reply:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        response = self.client.post(
            f"/api/boards/{self.board.slug}/tools/{tool}",
            data=data,
            content_type="application/json",
            headers={"Authorization": f"Bearer {self.token}", **(headers or {})},
        )
        return Reply(response.status_code, response.json())

    def create(self, subject: str, **fields: Any) -> dict:
        reply = self.call("TaskCreate", {"subject": subject, **fields})
        assert reply.status == 200, reply.body
        return reply.body["task"]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Close PostgreSQL connection pools before the test database is dropped."""
    yield
    from django.db import connections

    with django_db_blocker.unblock():
        for connection in connections.all():
            if hasattr(connection, "close_pool"):
                connection.close_pool()


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Make live-server clusters (``devtools.liveserver``) in the test's own folder:
    ``cluster_factory("sqlite" | "postgresql", env)``; all are stopped at its end."""
    made: list[Cluster] = []

    def make(backend: str, env: dict[str, str] | None = None) -> Cluster:
        workdir = tmp_path / f"{backend}-{len(made)}"
        workdir.mkdir()
        cluster = Cluster(workdir, backend=backend, env=env)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """A new channel layer per test: each async test has its own event loop, and the
    Redis layer's locks and connections belong to the loop that made them."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@dataclass
class LayerSpy:
    """Counts the waits begun on this process's channel layer (``layer.receive``): a
    TaskWatch begins one once it has joined its board's group and read the task, and
    another each time it has handled a change that did not end it."""

    waits: int = 0

    async def waiting(self, count: int = 1, timeout: float = 5) -> None:
        """Until the ``count``-th wait has begun: a watcher is listening (again)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.waits < count:
            assert loop.time() < deadline, f"{self.waits} of {count} waits after {timeout:g} s"
            await asyncio.sleep(0.01)


@pytest.fixture
def layer_spy(monkeypatch) -> LayerSpy:
    """Wait on what a TaskWatch does instead of sleeping until it has probably done it."""
    layer = get_channel_layer()  # this test's own layer (fresh_channel_layer runs first)
    spy = LayerSpy()
    receive = layer.receive

    def counted(channel: str) -> Any:
        spy.waits += 1
        return receive(channel)

    monkeypatch.setattr(layer, "receive", counted)
    return spy


@dataclass(frozen=True)
class Published:
    """One update sent to a board's group: the events it carries (the SPEC's payloads),
    the task numbers whose cards it re-renders, whether it re-renders the whole board
    (``reset``) and the header (counts, approvals, roster)."""

    board_id: int
    events: list[dict]
    touched: list[int]
    reset: bool
    header: bool

    @property
    def kinds(self) -> list[str]:
        return [event["kind"] for event in self.events]


@pytest.fixture
def published(monkeypatch) -> list[Published]:
    """What writes broadcast, in order, as they are handed to the channel layer (after
    commit; run the write in ``django_capture_on_commit_callbacks(execute=True)``). Like
    zulip's ``capture_send_event_calls``: a test asserts the pushes a change makes without
    reaching into ``boards.core.events``; the updates are still sent."""
    sent: list[Published] = []
    deliver = events._deliver

    def recorded(board_id, payload_events, touched, reset, header=True, loop=None):
        sent.append(Published(board_id, payload_events, touched, reset, header))
        return deliver(board_id, payload_events, touched, reset, header, loop)

    monkeypatch.setattr(events, "_deliver", recorded)
    return sent


@pytest.fixture(autouse=True)
def pushes_sent_in_the_write(settings):
    """In this process pushes are sent by the write's own on-commit callback: the tests'
    event loops come and go one per test, which a server's one loop never does. Servers
    the tests start (daphne processes) keep the background publisher, as in production."""
    settings.KANBAN_PUSH_IN_BACKGROUND = False


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Personas' passwords are hashed once per test; the default hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Closers of the data ``built_once`` holds open, newest last.
_built: list[Callable[[], None]] = []


def built_once(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """What ``build`` makes, kept for a module's tests and rolled back after the last:
    ``setUpTestData`` for a module-scoped fixture (``yield from built_once(...)``).

    It is built inside a transaction left open; each test's own transaction (the ``db``
    fixture) is then a savepoint in it, so a test's writes are undone before the next
    test and only ``build``'s remain. A transactional test (``transaction=True``) ends
    it first (``pytest_runtest_setup``): its second connection would wait on the open
    transaction. pytest-django runs those after every other database test, so no test
    of the module needs the data after that. The settings the autouse fixtures give
    every test apply while it is built too."""
    kept = transaction.atomic()
    with (
        django_db_blocker.unblock(),
        override_settings(
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
            KANBAN_PUSH_IN_BACKGROUND=False,
        ),
    ):
        kept.__enter__()
        try:
            made = build()
        except BaseException:
            kept.__exit__(*sys.exc_info())
            raise

    def close() -> None:
        if close in _built:
            _built.remove(close)
            with django_db_blocker.unblock():
                transaction.set_rollback(True)
                kept.__exit__(None, None, None)

    _built.append(close)
    # The database is blocked again between the tests: one that does not ask for ``db``
    # still may not touch it.
    try:
        yield made
    finally:
        close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("django_db")
    transactional = bool(marker and validate_django_db(marker)[0]) or any(
        name in item.fixturenames for name in ("transactional_db", "live_server")
    )
    if transactional:
        for close in reversed(list(_built)):
            close()


@pytest.fixture
def board(db) -> Board:
    return make_board("team", "Team board")


@pytest.fixture
def other_board(db) -> Board:
    return make_board("other", "Other board")


@pytest.fixture
def agent_factory(board) -> Callable[..., AgentClient]:
    def make(name: str = "alice", on: Board | None = None) -> AgentClient:
        target = on or board
        return AgentClient(target, make_token(target, name), name, Client())

    return make


@pytest.fixture
def alice(agent_factory) -> AgentClient:
    return agent_factory("alice")


@pytest.fixture
def bob(agent_factory) -> AgentClient:
    return agent_factory("bob")


@pytest.fixture
def person(board, django_user_model):
    """A person who administers the ``board`` fixture (and is no member of any other)."""
    user = django_user_model.objects.create_user(username="pat", password="pw-pat-123")
    Membership.objects.create(board=board, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def person_client(person) -> Client:
    client = Client()
    client.force_login(person)
    return client


def pytest_collection_modifyitems(config, items) -> None:
    """Order the run so that two workers (``-n 2``) finish together: the browser tests
    first, as one unit (one Chromium and one server for all of them, on one worker), then
    the slow tests, which the other worker starts on, then the quick ones, which fill in.
    pytest-xdist hands out units in this order (``--dist loadgroup --no-loadscope-reorder``
    in pyproject.toml); a run without workers goes in the same order."""
    for item in items:
        if "browser" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("browser"))
    items.sort(key=_run_order)


def _run_order(item: pytest.Item) -> int:
    if "browser" in item.fixturenames:
        return 0
    return 1 if item.get_closest_marker("slow") else 2


# -- the board's socket, as a logged-in person's browser opens it --------------------------

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")  # the page and its socket: same scheme, host and port
Header = tuple[bytes, bytes]
Opener = Callable[..., WebsocketCommunicator]


@pytest.fixture
def session_cookie(person_client) -> Header:
    """The logged-in person's session, as the browser would send it with the upgrade request."""
    session = person_client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode())


@pytest.fixture
async def open_socket(session_cookie) -> AsyncIterator[Opener]:
    """Make communicators (logged in, from our origin, unless told otherwise); all are
    disconnected at the end, and the in-memory layer forgets them."""
    opened: list[WebsocketCommunicator] = []

    def make(path: str, headers: list[Header] | None = None) -> WebsocketCommunicator:
        communicator = WebsocketCommunicator(
            _asgi_application(),
            path,
            headers=[ORIGIN, HOST, session_cookie] if headers is None else headers,
        )
        opened.append(communicator)
        return communicator

    yield make
    for communicator in opened:
        if communicator._future is not None and not communicator.future.done():
            await communicator.disconnect()
    await get_channel_layer().flush()


def _asgi_application() -> Any:
    from kanban.asgi import application  # the project's whole ASGI stack, loaded when needed

    return application

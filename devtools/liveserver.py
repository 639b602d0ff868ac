"""Live servers: daphne processes on one database, for the tests and ``manage.py bench``.

A ``Cluster`` owns one database (a SQLite file in its work folder, or a fresh
PostgreSQL database that it creates and drops), migrates it once, and starts as
many daphne processes on it as its caller asks for. Boards, tokens and logins are
made with management commands against the same database, so a caller touches the
servers only the way agents and people do: over HTTP (``call``, ``session_cookie``)
and in Chromium (``CHROMIUM_PATH``, ``CHROMIUM_ARGS``).

Servers serve ``kanban.asgi:application``, the product's application, unless their
caller names another (``manage.py bench`` adds its echo routes that way,
``devtools.bench.asgi``).

Standard library only (psycopg is imported when a PostgreSQL database is made), and
nothing from ``boards``: the benchmark runs it on an install without the test extras.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
ASGI_APP = "kanban.asgi:application"
START_SECONDS = 30.0

# Debian's Chromium under Playwright (STACK.md): never --user-data-dir (Playwright makes
# its own) and never `playwright install`.
CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], *, timeout: float, interval: float = 0.05, what: str = ""
) -> T:
    """Ask ``condition`` until it answers something true, and return that answer.

    Raises TimeoutError after ``timeout`` seconds; an exception from ``condition`` ends
    the wait at once (a process that died will not come back).
    """
    deadline = time.monotonic() + timeout
    while True:
        answer = condition()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what or 'the condition'}: not within {timeout:g} s")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def postgres_admin_url() -> str | None:
    """DATABASE_URL when it names a PostgreSQL server (the scale-out pass), else None."""
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


class Server:
    """One daphne process serving the project at a fixed address.

    It can be stopped and started again at the same address, as a browser page that
    reconnects expects. Its output goes to ``log_path`` (appended across restarts).
    """

    def __init__(
        self, env: dict[str, str], log_path: Path, port: int | None = None, app: str = ASGI_APP
    ) -> None:
        self.env = env
        self.app = app
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = START_SECONDS) -> str:
        """Start daphne and wait until it answers HTTP; its base URL."""
        if self.running:
            raise RuntimeError(f"{self.base} is already running")
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), self.app],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(self._answers, timeout=timeout, what=f"daphne at {self.base}")
        except TimeoutError as exc:
            self.stop()
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from None
        return self.base

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(
                f"daphne at {self.base} exited with {self.process.returncode}:\n{self.log_tail()}"
            )
        # Any HTTP answer will do (a redirect too): the application is loaded and serving.
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/healthz")
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()
        return True

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` and wait for the process to end (SIGKILL after 10 s)."""
        self.send(sig)
        self.wait()

    def send(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def kill(self) -> None:
        """Crash the server: SIGKILL, no shutdown of any kind."""
        self.stop(signal.SIGKILL)

    def rss_kib(self) -> int:
        """The process's resident memory (Linux)."""
        assert self.process is not None, f"{self.base} is not running"
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        found = re.search(r"^VmRSS:\s+(\d+)", status, re.M)
        assert found, status
        return int(found.group(1))

    def log(self) -> str:
        """What the server has written so far (stdout and stderr)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def dump_stacks(self) -> None:
        """Have the server print every thread's stack into its log (kanban/asgi.py)."""
        self.send(signal.SIGUSR1)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


class Cluster:
    """Daphne processes sharing one database (and Redis, when the environment names one)."""

    def __init__(
        self,
        workdir: Path,
        *,
        backend: str = "sqlite",
        env: dict[str, str] | None = None,
        admin_url: str | None = None,
        app: str = ASGI_APP,
    ) -> None:
        """``backend`` is "sqlite" (a file in ``workdir``; no Redis unless ``env`` names one)
        or "postgresql" (a new database on ``admin_url``, by default DATABASE_URL's server).
        ``env`` is laid over the servers' environment last (e.g. a private REDIS_URL);
        ``app`` is the ASGI application the servers serve."""
        self.workdir = workdir
        self.app = app
        self.backend = backend
        self.servers: list[Server] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "kanban.settings",
            "PYTHONUNBUFFERED": "1",
        }
        self.admin_url = ""
        self.pg_name = ""
        workdir.mkdir(parents=True, exist_ok=True)
        if backend == "postgresql":
            self.admin_url = admin_url or postgres_admin_url() or ""
            if not self.admin_url:
                raise ValueError(
                    "a PostgreSQL cluster needs admin_url or DATABASE_URL=postgres://…"
                )
            self.pg_name = f"kanban_live_{uuid.uuid4().hex[:10]}"
            _psql(self.admin_url, f'CREATE DATABASE "{self.pg_name}"')
            parts = urllib.parse.urlsplit(self.admin_url)
            self.env["DATABASE_URL"] = urllib.parse.urlunsplit(
                parts._replace(path=f"/{self.pg_name}")
            )
        elif backend == "sqlite":
            self.env["DATABASE_URL"] = f"sqlite:///{workdir / 'cluster.db'}"
            self.env.pop("REDIS_URL", None)
        else:
            raise ValueError(f"unknown backend {backend!r}: sqlite or postgresql")
        self.env.update(env or {})
        try:
            self.manage("migrate", "--verbosity", "0")
        except BaseException:
            self.stop()
            raise

    @property
    def bases(self) -> list[str]:
        return [server.base for server in self.servers]

    def server(self, base: str) -> Server:
        return next(server for server in self.servers if server.base == base)

    def manage(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
        """Run ``manage.py`` against the cluster's database (``env`` laid over the
        cluster's environment); its stdout, stripped."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result.stdout.strip()

    def start(self, port: int | None = None) -> str:
        """Start one more server on the database (on ``port``, or a free one); its base URL."""
        port = port or free_port()
        server = Server(self.env, self.workdir / f"daphne-{port}.log", port, self.app)
        self.servers.append(server)
        return server.start()

    def worker(self, worker_id: str, *args: str) -> None:
        """Start the task library's own worker process for webhook deliveries
        (``manage.py db_worker --queue-name webhooks``), as a scale-out deployment runs it."""
        with (self.workdir / f"worker-{worker_id}.log").open("ab") as log:
            self.workers[worker_id] = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "db_worker",
                    "--queue-name",
                    "webhooks",
                    "--worker-id",
                    worker_id,
                    "--no-startup-delay",
                    "--no-reload",
                    *args,
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill_worker(self, worker_id: str) -> None:
        """Crash a worker: SIGKILL, mid-delivery if it is delivering."""
        process = self.workers.pop(worker_id)
        process.kill()
        process.wait(10)

    def webhook(self, slug: str, url: str, *kinds: str) -> tuple[int, str]:
        """Add an endpoint to the board (as its admin would); its id and secret."""
        out = self.manage("addwebhook", slug, url, *kinds)
        pk, secret = out.split()[-2:]
        return int(pk), secret

    def stop(self) -> None:
        """Stop every server and worker, then drop the PostgreSQL database if the cluster
        made one."""
        for worker_id in list(self.workers):
            self.kill_worker(worker_id)
        for server in self.servers:
            server.send(signal.SIGTERM)  # all at once: they shut down side by side
        for server in self.servers:
            server.wait()
        if self.pg_name:
            _psql(self.admin_url, f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')
            self.pg_name = ""

    def kill(self, base: str) -> None:
        """Crash the server at ``base``: SIGKILL, no shutdown of any kind."""
        self.server(base).kill()

    def log(self, base: str) -> str:
        """What the server at ``base`` has written so far (stdout and stderr)."""
        return self.server(base).log()

    def board(self, slug: str) -> None:
        self.manage("createboard", slug)

    def token(self, slug: str, agent: str, *, team: bool = False) -> str:
        return self.manage("issuetoken", slug, agent, *(["--team"] if team else []))

    def user(self, username: str, password: str) -> None:
        """A person who can log in (a superuser: every board is theirs)."""
        self.manage(
            "createsuperuser",
            "--noinput",
            "--username",
            username,
            "--email",
            "",
            env={"DJANGO_SUPERUSER_PASSWORD": password},
        )


def _psql(url: str, sql: str) -> None:
    import psycopg  # only a PostgreSQL cluster needs it

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def call(
    base: str,
    slug: str,
    token: str,
    tool: str,
    body: dict[str, Any],
    *,
    agent: str = "",
    timeout: float = 60,
) -> tuple[int, Any]:
    """One tool call as an agent makes it: (HTTP status, the JSON answer).

    An answer that is not JSON (a proxy's error page) comes back as its text. A server
    that does not answer raises OSError (``urllib.error.URLError`` is one).
    """
    return post_json(f"{base}/api/boards/{slug}/tools/{tool}", token, body, agent, timeout)


def hook(
    base: str, slug: str, token: str, body: dict[str, Any], *, agent: str = "", timeout: float = 60
) -> tuple[int, Any]:
    """One Claude Code hook event, as the client posts it: (HTTP status, the JSON answer)."""
    return post_json(f"{base}/api/boards/{slug}/hooks/claude-code", token, body, agent, timeout)


def post_json(
    url: str, token: str, body: dict[str, Any], agent: str, timeout: float
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if agent:
        headers["X-Agent"] = agent  # a team token names its agent per request
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, _json(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, _json(exc.read())


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode(errors="replace")


@dataclass(frozen=True)
class Agent:
    """``call`` bound to one board, token and (for a team token) agent name."""

    base: str
    slug: str
    token: str
    name: str = ""

    def call(self, tool: str, body: dict[str, Any], *, timeout: float = 60) -> tuple[int, Any]:
        return call(self.base, self.slug, self.token, tool, body, agent=self.name, timeout=timeout)


def session_cookie(base: str, username: str, password: str) -> str:
    """Log in through the login form, as a person does; the Cookie header of that session
    (for a WebSocket handshake, or any request made as that person)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/login/", timeout=10) as response:
        found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', response.read())
    if not found:
        raise RuntimeError(f"no CSRF token on {base}/login/")
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": found.group(1).decode()}
    ).encode()
    request = urllib.request.Request(
        f"{base}/login/", data=form, headers={"Referer": f"{base}/login/"}
    )
    with opener.open(request, timeout=10) as response:
        response.read()
        # A refused login shows the form again; a successful one redirects away from it.
        if urllib.parse.urlsplit(response.url).path == "/login/":
            raise RuntimeError(f"{username!r} could not log in at {base}")
    return "; ".join(f"{c.name}={c.value}" for c in jar)

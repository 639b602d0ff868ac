"""Real server processes for the multi-process tests: daphne on a shared database.

Each ``Cluster`` owns one database (a fresh PostgreSQL database or a SQLite file),
migrates it once, and starts as many daphne processes on it as a test asks for.
Boards, tokens and logins are made with management commands against the same
database, so the tests touch the servers only the way agents and people do.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_admin_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


class Cluster:
    """Several daphne processes sharing one database (and Redis, when REDIS_URL is set)."""

    def __init__(self, workdir: Path, *, backend: str, env: dict[str, str] | None = None) -> None:
        """``env`` is laid over the servers' environment last (e.g. a private REDIS_URL)."""
        self.workdir = workdir
        self.backend = backend
        self.processes: list[subprocess.Popen] = []
        self.by_base: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "kanban.settings",
            "PYTHONUNBUFFERED": "1",
        }
        self.pg_name = ""
        if backend == "postgresql":
            admin = postgres_admin_url()
            assert admin, "the PostgreSQL cluster needs DATABASE_URL=postgres://…"
            self.pg_name = f"kanban_mp_{uuid.uuid4().hex[:10]}"
            self._psql(admin, f'CREATE DATABASE "{self.pg_name}"')
            parts = urllib.parse.urlsplit(admin)
            self.env["DATABASE_URL"] = urllib.parse.urlunsplit(
                parts._replace(path=f"/{self.pg_name}")
            )
        else:
            self.env["DATABASE_URL"] = f"sqlite:///{workdir / 'cluster.db'}"
            self.env.pop("REDIS_URL", None)
        self.env.update(env or {})
        self.manage("migrate", "--verbosity", "0")

    @staticmethod
    def _psql(url: str, sql: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    def start(self) -> str:
        port = free_port()
        log = open(self.workdir / f"daphne-{port}.log", "w")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "kanban.asgi:application",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, (self.workdir / f"daphne-{port}.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    self.by_base[f"http://127.0.0.1:{port}"] = process
                    return f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.1)
        raise AssertionError("daphne did not start")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.pg_name:
            admin = postgres_admin_url()
            assert admin
            self._psql(admin, f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')

    def log(self, base: str) -> str:
        """What the server at ``base`` has written so far (stdout and stderr)."""
        port = urllib.parse.urlsplit(base).port
        return (self.workdir / f"daphne-{port}.log").read_text(errors="replace")

    def kill(self, base: str) -> None:
        """Crash the server at ``base``: SIGKILL, no shutdown of any kind."""
        process = self.by_base[base]
        process.kill()
        process.wait(10)

    def board(self, slug: str) -> None:
        self.manage("createboard", slug)

    def token(self, slug: str, agent: str, *, team: bool = False) -> str:
        return self.manage("issuetoken", slug, agent, *(["--team"] if team else []))

    def user(self, username: str, password: str) -> None:
        self.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            f"User.objects.create_superuser({username!r}, password={password!r})",
        )


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
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if agent:
        headers["X-Agent"] = agent  # a team token names its agent per request
    request = urllib.request.Request(
        f"{base}/api/boards/{slug}/tools/{tool}",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def session_cookie(base: str, username: str, password: str) -> str:
    """Log in through the login form; returns the Cookie header for a WebSocket."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/login/") as response:
        found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', response.read())
    assert found
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": found.group(1).decode()}
    ).encode()
    opener.open(
        urllib.request.Request(f"{base}/login/", data=form, headers={"Referer": f"{base}/login/"})
    ).read()
    return "; ".join(f"{c.name}={c.value}" for c in jar)

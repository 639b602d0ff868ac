"""``manage.py demo`` against a real server: a daphne process on its own SQLite file.

The demo runs as its own process and talks to the server only over HTTP. While it
runs, this test plays the person at the board: it logs in with a session, sends
the worker waiting for approval a message, and approves the gated task through
the board's own approve action. Then it checks the board the team left behind.
"""

from __future__ import annotations

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
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SLUG = "demo-test"
USERNAME = "pat"
PASSWORD = "pw-demo-123"
MESSAGE = "Run it in the maintenance window, please."
TERMINAL = {"completed", "failed", "cancelled"}
DEAD = {"failed", "cancelled"}
ASGI_APP = "kanban.asgi:application"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """daphne serving ``kanban.asgi:application`` on its own SQLite file and port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.base_url = f"http://127.0.0.1:{_free_port()}"
        self.log_path = workdir / "daphne.log"
        self.env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{workdir / 'demo.db'}",
            "DJANGO_SETTINGS_MODULE": "kanban.settings",
            "PYTHONUNBUFFERED": "1",
        }
        self.env.pop("REDIS_URL", None)
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "manage.py", *args]

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            self.command(*args),
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"manage.py {args[0]}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def start(self) -> None:
        port = self.base_url.rsplit(":", 1)[1]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", port, ASGI_APP],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"daphne exited:\n{self.log_tail()}"
            try:
                with urllib.request.urlopen(f"{self.base_url}/login/", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
        raise AssertionError(f"daphne did not answer:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return "(no log)"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    """A running server with a login and the board; answers it and an observer's team token."""
    srv = Server(tmp_path)
    # migrate, the person's login, createboard and issuetoken, in one Django start.
    output = srv.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', interactive=False, verbosity=0)\n"
        f"get_user_model().objects.create_superuser({USERNAME!r}, password={PASSWORD!r})\n"
        f"call_command('createboard', {SLUG!r}, name='Demo test')\n"
        f"call_command('issuetoken', {SLUG!r}, 'observer', team=True)\n",
    )
    token = output.strip().splitlines()[-1]
    assert token.startswith("ak_"), output
    srv.start()
    try:
        yield srv, token
    finally:
        srv.stop()


def tool(srv: Server, token: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{srv.base_url}/api/boards/{SLUG}/tools/{name}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "X-Agent": "observer"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class Person:
    """Someone at the board, logged in with Django's session, posting the board's forms."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def csrf(self) -> str:
        return next(c.value for c in self.jar if c.name == "csrftoken" and c.value)

    def login(self) -> None:
        with self.opener.open(f"{self.base_url}/login/", timeout=10) as response:
            page = response.read().decode()
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert found, "no CSRF token on the login page"
        form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": found[1]}
        with self.opener.open(
            f"{self.base_url}/login/", urllib.parse.urlencode(form).encode(), timeout=10
        ) as response:
            assert response.url.endswith("/boards/"), "login failed"

    def task_action(self, number: str, action: str, **fields: str) -> None:
        request = urllib.request.Request(
            f"{self.base_url}/boards/{SLUG}/tasks/{number}/{action}/",
            data=urllib.parse.urlencode(fields).encode(),
            headers={"X-CSRFToken": self.csrf(), "HX-Request": "true"},
        )
        with self.opener.open(request, timeout=10) as response:
            assert response.status == 200


def test_demo_team_works_the_plan_through_the_api(server: tuple[Server, str]) -> None:
    srv, token = server
    out_path = srv.workdir / "demo.out"
    with out_path.open("wb") as out:
        demo = subprocess.Popen(
            srv.command(
                "demo",
                "--url",
                srv.base_url,
                "--board",
                SLUG,
                "--agents",
                "3",
                "--speed",
                "50",
                "--seed",
                "1",
                "--max-seconds",
                "40",
            ),
            cwd=ROOT,
            env=srv.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def output() -> str:
        return out_path.read_text(errors="replace") + "\n--- daphne ---\n" + srv.log_tail()

    try:
        # The person waits for the approval request to show up, as on the board.
        gated = None
        deadline = time.monotonic() + 25
        while gated is None:
            assert demo.poll() is None, f"the demo ended before asking:\n{output()}"
            assert time.monotonic() < deadline, f"no approval request:\n{output()}"
            tasks = tool(srv, token, "TaskList", {})["tasks"]
            gated = next((t for t in tasks if t["approval"]["state"] == "requested"), None)
            if gated is None:
                time.sleep(0.05)
        requester = gated["approval"]["requestedBy"]
        assert re.fullmatch(r"worker-[123]", requester)
        person = Person(srv.base_url)
        person.login()
        person.task_action(gated["id"], "message", recipient=requester, body=MESSAGE)
        person.task_action(gated["id"], "approve", note="Go ahead")
        returncode = demo.wait(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=10)
    text = output()
    assert returncode == 0, text

    board = tool(srv, token, "TaskList", {"tree": True})
    tasks = {t["id"]: t for t in board["tasks"]}

    # One TaskBatch by the orchestrator: 12–30 tasks, one moment, with a hierarchy and a DAG.
    assert 12 <= len(tasks) <= 30, text
    assert {t["createdBy"] for t in tasks.values()} == {"orchestrator"}
    assert sorted(tasks, key=int) == [str(n) for n in range(1, len(tasks) + 1)]
    created = sorted(datetime.fromisoformat(t["createdAt"]) for t in tasks.values())
    assert (created[-1] - created[0]).total_seconds() < 1, "not created in one batch"
    assert "in one TaskBatch" in text
    assert max(t["depth"] for t in tasks.values()) >= 2
    roots = [t for t in tasks.values() if t["parentId"] is None]
    assert len(roots) == 1
    assert sum(len(t["blockedBy"]) for t in tasks.values()) >= len(tasks)
    assert all(t["activeForm"] and t["prompt"] for t in tasks.values())

    # A consistent board: nothing half done, every result written, every leftover stuck.
    def dead_end(task_id: str, seen: frozenset[str] = frozenset()) -> bool:
        task = tasks[task_id]
        if task["status"] in DEAD:
            return True
        return (
            task["status"] == "pending"
            and task_id not in seen
            and any(dead_end(b, seen | {task_id}) for b in task["blockedBy"])
        )

    for task in tasks.values():
        assert task["status"] != "in_progress", task
        if task["status"] in TERMINAL:
            if task["status"] != "cancelled":
                assert task["result"], task
        else:
            assert task["status"] == "pending" and task["blocked"], task
            assert any(dead_end(b) for b in task["blockedBy"]), task
        if task["owner"]:
            assert re.fullmatch(r"worker-[123]", task["owner"]), task
    assert len({t["owner"] for t in tasks.values() if t["owner"]}) >= 2, "one worker did it all"

    # The gated step: asked for by a worker, approved by the person, then done by that worker.
    gated_now = tasks[gated["id"]]
    assert [t["id"] for t in tasks.values() if t["approval"]["required"]] == [gated["id"]]
    assert gated_now["approval"]["state"] == "approved"
    assert gated_now["approval"]["decidedBy"] == USERNAME
    assert gated_now["status"] == "completed"
    assert gated_now["owner"] == requester
    assert gated_now["result"]
    assert MESSAGE in gated_now["notes"], "the worker did not read its inbox into the notes"

    # What it printed: one line per action, the message, and a summary matching the board.
    assert re.search(rf"^{requester}\s+asked for approval to start #{gated['id']} ", text, re.M)
    assert re.search(rf"^{requester}\s+message from {USERNAME} about #{gated['id']}: ", text, re.M)
    assert re.search(r"^worker-\d\s+claimed #\d+ \S", text, re.M)
    assert re.search(r"^worker-\d\s+completed #\d+ \S", text, re.M)
    summary = re.search(r"(\d+) completed, (\d+) failed, (\d+) cancelled, (\d+) blocked", text)
    assert summary, text
    statuses = [t["status"] for t in tasks.values()]
    assert [int(n) for n in summary.groups()] == [
        statuses.count("completed"),
        statuses.count("failed"),
        statuses.count("cancelled"),
        statuses.count("pending"),
    ], text

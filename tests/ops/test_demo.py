"""``manage.py demo`` against a real server: a daphne process on its own SQLite file.

The demo runs as its own process and talks to the server only over HTTP. While it
runs, this test plays the person at the board: it logs in with a session, sends
the worker waiting for approval a message, and approves the gated task through
the board's own approve action. Then it checks the board the team left behind.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from devtools.liveserver import ROOT, Cluster, call, session_cookie, wait_until

pytestmark = pytest.mark.slow

SLUG = "demo-test"
USERNAME = "pat"
PASSWORD = "pw-demo-123"
MESSAGE = "Run it in the maintenance window, please."
TERMINAL = {"completed", "failed", "cancelled"}
DEAD = {"failed", "cancelled"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Cluster, str, str]]:
    """A running server with a login and the board: the cluster, its address and an
    observer's team token."""
    cluster = Cluster(tmp_path)
    try:
        # The person's login, createboard and issuetoken, in one Django start.
        output = cluster.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model\n"
            "from django.core.management import call_command\n"
            f"get_user_model().objects.create_superuser({USERNAME!r}, password={PASSWORD!r})\n"
            f"call_command('createboard', {SLUG!r}, name='Demo test')\n"
            f"call_command('issuetoken', {SLUG!r}, 'observer', team=True)\n",
        )
        token = output.splitlines()[-1]
        assert token.startswith("ak_"), output
        yield cluster, cluster.start(), token
    finally:
        cluster.stop()


def tool(base: str, token: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = call(base, SLUG, token, name, body, agent="observer", timeout=10)
    assert status == 200, (name, status, answer)
    return answer


def tool_get(base: str, token: str, what: str) -> dict[str, Any]:
    """A board's read-only API (``/api/boards/<slug>/<what>``) with the token."""
    request = urllib.request.Request(
        f"{base}/api/boards/{SLUG}/{what}", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


class Person:
    """Someone at the board, logged in with Django's session, posting the board's forms."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookie = session_cookie(base, USERNAME, PASSWORD)
        found = re.search(r"(?:^|; )csrftoken=([^;]+)", self.cookie)
        assert found, self.cookie
        self.csrf = found[1]

    def task_action(self, number: str, action: str, **fields: str) -> None:
        request = urllib.request.Request(
            f"{self.base}/boards/{SLUG}/tasks/{number}/{action}/",
            data=urllib.parse.urlencode(fields).encode(),
            headers={"Cookie": self.cookie, "X-CSRFToken": self.csrf, "HX-Request": "true"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200


def test_demo_team_works_the_plan_through_the_api(server: tuple[Cluster, str, str]) -> None:
    cluster, base, token = server
    out_path = cluster.workdir / "demo.out"
    with out_path.open("wb") as out:
        demo = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "demo",
                "--url",
                base,
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
            ],
            cwd=ROOT,
            env=cluster.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def output() -> str:
        return out_path.read_text(errors="replace") + "\n--- daphne ---\n" + cluster.log(base)

    def approval_request() -> dict[str, Any] | None:
        assert demo.poll() is None, f"the demo ended before asking:\n{output()}"
        tasks = tool(base, token, "TaskList", {"detail": True})["tasks"]
        return next((t for t in tasks if t["approval"]["state"] == "requested"), None)

    try:
        # The person waits for the approval request to show up, as on the board.
        try:
            gated = wait_until(approval_request, timeout=25, what="an approval request")
        except TimeoutError as exc:
            pytest.fail(f"{exc}:\n{output()}")
        requester = gated["approval"]["requestedBy"]
        assert re.fullmatch(r"worker-[123]", requester)
        person = Person(base)
        person.task_action(gated["id"], "message", recipient=requester, body=MESSAGE)
        person.task_action(gated["id"], "approve", note="Go ahead")
        returncode = demo.wait(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=10)
    text = output()
    assert returncode == 0, text

    board = tool(base, token, "TaskList", {"tree": True, "detail": True})
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

    # Every finished step reported what it cost: the board's metrics and costs are not empty.
    for task in tasks.values():
        if task["status"] in ("completed", "failed"):
            assert task["usage"]["costUsd"] > 0 and task["usage"]["inputTokens"] > 0, task
    metrics = tool_get(base, token, "metrics")
    assert metrics["cost"]["totalUsd"] > 0
    assert sum(d["completed"] for d in metrics["throughput"]) >= 1
    assert any(a["costUsd"] > 0 for a in metrics["agents"])

    # What it printed: one line per action, the message, and a summary matching the board.
    assert re.search(rf"^{requester}\s+asked for approval to start #{gated['id']} ", text, re.M)
    assert re.search(rf"^{requester}\s+message from {USERNAME} about #{gated['id']}: ", text, re.M)
    assert re.search(r"^worker-\d\s+claimed #\d+ \S", text, re.M)
    assert re.search(r"^worker-\d\s+completed #\d+ \S", text, re.M)
    # Recovery: the crashed worker's task came back by its lease and another finished it;
    # the first failure was retried and its second attempt went through.
    crash = re.search(r"^(worker-\d)\s+crashes while on #(\d+) ", text, re.M)
    assert crash, text
    crashed = tool(base, token, "TaskGet", {"taskId": crash.group(2)})["task"]
    outcomes = [(a["agent"], a["outcome"]) for a in crashed["attempts"]]
    assert outcomes[0] == (crash.group(1), "timed_out"), outcomes
    assert crashed["status"] != "in_progress" and crashed["owner"] != crash.group(1)
    retry = re.search(r"^worker-\d\s+retries #(\d+): ", text, re.M)
    assert retry, text
    retried = tool(base, token, "TaskGet", {"taskId": retry.group(1)})["task"]
    assert [a["outcome"] for a in retried["attempts"]][:2] == ["failed", "completed"], retried
    summary = re.search(r"(\d+) completed, (\d+) failed, (\d+) cancelled, (\d+) blocked", text)
    assert summary, text
    statuses = [t["status"] for t in tasks.values()]
    assert [int(n) for n in summary.groups()] == [
        statuses.count("completed"),
        statuses.count("failed"),
        statuses.count("cancelled"),
        statuses.count("pending"),
    ], text

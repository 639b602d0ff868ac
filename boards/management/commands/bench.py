"""``python manage.py bench``: measure the board's speed in one run, on its own server.

Starts daphne on a fresh SQLite database in a temporary directory, then:

* push latency: from the moment an agent's HTTP tool call is sent to the card
  standing in its new column in Chromium, p50 / p99, with 1 and with 20 pages;
* tool call latency against an empty JSON view on the same server (the ratio);
* board page render time at 100 / 1,000 / 5,000 tasks.

Prints a table and writes the figures as JSON (``--out``).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

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

# Records, in the page, when the expected card first stands in the expected column.
OBSERVER_JS = """
() => {
  window.__expect = null; window.__seen = {}; window.__waiters = {};
  const check = () => {
    const e = window.__expect;
    if (!e || window.__seen[e.key]) return;
    if (document.querySelector(`[data-column="${e.column}"] [data-task-id="${e.id}"]`)) {
      const at = performance.timeOrigin + performance.now();
      window.__seen[e.key] = at;
      if (window.__waiters[e.key]) window.__waiters[e.key](at);
    }
  };
  // Resolves when the card is seen, so the harness waits without polling the page.
  window.__wait = key => new Promise(resolve => {
    if (window.__seen[key]) resolve(window.__seen[key]); else window.__waiters[key] = resolve;
  });
  new MutationObserver(check).observe(document.getElementById("board"), {childList: true, subtree: true});
}
"""


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A daphne process on its own SQLite database."""

    def __init__(self, workdir: Path) -> None:
        self.env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}",
            "DJANGO_SETTINGS_MODULE": "kanban.settings",
        }
        self.env.pop("REDIS_URL", None)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=settings.BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    def start(self) -> None:
        self.manage("migrate", "--verbosity", "0")
        self.process = subprocess.Popen(
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
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(10)


class Agent:
    def __init__(self, base: str, slug: str, token: str) -> None:
        self.url = f"{base}/api/boards/{slug}/tools/"
        self.token = token

    def call(self, tool: str, body: dict[str, Any]) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.url + tool,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


class Command(BaseCommand):
    help = "Measure push latency, tool call latency and board render time on a fresh server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--changes", type=int, default=200, help="changes per push run")
        parser.add_argument("--pages", default="1,20", help="page counts for the push runs")
        parser.add_argument("--sizes", default="100,1000,5000", help="board sizes to render")
        parser.add_argument("--calls", type=int, default=300, help="tool calls per latency run")
        parser.add_argument("--out", default="bench-results.json")

    def handle(self, *args: Any, **options: Any) -> None:
        results: dict[str, Any] = {
            "machine": f"{os.cpu_count()} cores",
            "when": time.strftime("%Y-%m-%d %H:%M"),
        }
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(Path(tmp))
            server.start()
            try:
                server.manage(
                    "shell",
                    "-c",
                    "from django.contrib.auth.models import User; "
                    "User.objects.create_user('bench', password='bench-pass-1')",
                )
                results["tool_calls"] = self.tool_calls(server, options["calls"])
                results["push"] = [
                    self.push(server, int(n), options["changes"])
                    for n in options["pages"].split(",")
                ]
                results["render"] = [
                    self.render(server, int(n)) for n in options["sizes"].split(",")
                ]
            finally:
                server.stop()
        self.report(results)
        Path(options["out"]).write_text(json.dumps(results, indent=2))
        self.stdout.write(f"\nwrote {options['out']}")

    def board(self, server: Server, slug: str) -> Agent:
        server.manage("createboard", slug)
        return Agent(server.base, slug, server.manage("issuetoken", slug, "bench-agent"))

    def tool_calls(self, server: Server, calls: int) -> dict[str, Any]:
        agent = self.board(server, "calls")

        def timed(fn) -> list[float]:
            samples = []
            for i in range(calls):
                start = time.perf_counter()
                fn(i)
                samples.append((time.perf_counter() - start) * 1000)
            return samples

        def empty(_: int) -> None:
            with urllib.request.urlopen(f"{server.base}/healthz", timeout=10) as response:
                response.read()

        figures = {"empty_view": timed(empty)}
        figures["TaskCreate"] = timed(lambda i: agent.call("TaskCreate", {"subject": f"Task {i}"}))
        figures["TaskGet"] = timed(lambda i: agent.call("TaskGet", {"taskId": str(i % calls + 1)}))
        figures["TaskUpdate"] = timed(
            lambda i: agent.call("TaskUpdate", {"taskId": str(i % calls + 1), "metadata": {"n": i}})
        )
        figures["TaskClaim"] = timed(lambda i: agent.call("TaskClaim", {"taskId": str(i + 1)}))
        figures["TaskList (300 tasks)"] = timed(lambda i: agent.call("TaskList", {}))
        base = statistics.median(figures["empty_view"])
        return {
            name: {
                "p50_ms": round(statistics.median(s), 2),
                "p99_ms": round(percentile(s, 99), 2),
                "x_empty": round(statistics.median(s) / base, 1),
            }
            for name, s in figures.items()
        }

    def login(self, context: Any, server: Server) -> None:
        page = context.new_page()
        page.goto(f"{server.base}/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", "bench-pass-1")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/boards/$"))
        page.close()

    def push(self, server: Server, pages: int, changes: int) -> dict[str, Any]:
        from playwright.sync_api import sync_playwright

        slug = f"push{pages}"
        agent = self.board(server, slug)
        samples: list[float] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            context = browser.new_context()
            self.login(context, server)
            state = context.storage_state()
            opened = []
            for _ in range(pages):
                # One context per page: a page in the background of a shared context counts
                # as a hidden tab, and the board pauses its socket while hidden.
                page = browser.new_context(storage_state=state).new_page()
                page.goto(f"{server.base}/boards/{slug}/")
                page.wait_for_function(
                    "document.getElementById('live-status').dataset.state === 'live'",
                    timeout=10_000,
                )
                page.evaluate(OBSERVER_JS)
                opened.append(page)
            steps: list[tuple[str, dict[str, Any], int, str]] = []
            number = 0
            while len(steps) < changes:
                number += 1
                steps += [
                    ("TaskCreate", {"subject": f"Change {number}"}, number, "pending"),
                    ("TaskClaim", {"taskId": str(number)}, number, "in_progress"),
                    (
                        "TaskUpdate",
                        {"taskId": str(number), "status": "completed"},
                        number,
                        "completed",
                    ),
                ]
            for index, (tool, body, task_id, column) in enumerate(steps[:changes]):
                key = f"k{index}"
                expect = {"key": key, "id": str(task_id), "column": column}
                for page in opened:
                    page.evaluate("e => { window.__expect = e; }", expect)
                sent = time.time() * 1000
                status, _ = agent.call(tool, body)
                assert status == 200, (tool, status)
                for page in opened:
                    samples.append(page.evaluate("key => window.__wait(key)", key) - sent)
            browser.close()
        return {
            "pages": pages,
            "changes": changes,
            "p50_ms": round(statistics.median(samples), 1),
            "p99_ms": round(percentile(samples, 99), 1),
            "max_ms": round(max(samples), 1),
        }

    def render(self, server: Server, size: int) -> dict[str, Any]:
        slug = f"render{size}"
        agent = self.board(server, slug)
        made = 0
        while made < size:
            ops = []
            for i in range(min(500, size - made)):
                number = made + i + 1
                op: dict[str, Any] = {
                    "op": "create",
                    "subject": f"Task {number}",
                    "activeForm": f"Doing {number}",
                }
                if number % 5 == 0:
                    op["blockedBy"] = [str(number - 1)]
                if i and number % 7 == 0:
                    op["parentId"] = str(number - 3)
                ops.append(op)
            status, body = agent.call("TaskBatch", {"ops": ops})
            assert status == 200, body
            made += len(ops)
        # Some work in progress, so every kind of card is on the page.
        for number in range(1, size + 1, 8):
            agent.call("TaskClaim", {"taskId": str(number)})
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        with opener.open(f"{server.base}/login/") as response:
            found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', response.read())
            assert found, "no CSRF token on the login page"
            token = found.group(1)
        form = urllib.parse.urlencode(
            {"username": "bench", "password": "bench-pass-1", "csrfmiddlewaretoken": token.decode()}
        ).encode()
        opener.open(
            urllib.request.Request(
                f"{server.base}/login/", data=form, headers={"Referer": f"{server.base}/login/"}
            )
        ).read()
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            with opener.open(f"{server.base}/boards/{slug}/") as response:
                html = response.read()
            samples.append((time.perf_counter() - start) * 1000)
        assert html.count(b"data-task-id=") == size
        list_samples = []
        for _ in range(7):
            start = time.perf_counter()
            agent.call("TaskList", {})
            list_samples.append((time.perf_counter() - start) * 1000)
        return {
            "tasks": size,
            "page_ms": round(statistics.median(samples), 1),
            "page_kb": round(len(html) / 1024),
            "tasklist_ms": round(statistics.median(list_samples), 1),
        }

    def report(self, results: dict[str, Any]) -> None:
        self.stdout.write("\nTool calls (ms, one agent, sequential)")
        self.stdout.write(f"  {'call':<22}{'p50':>8}{'p99':>8}{'× empty':>9}")
        for name, row in results["tool_calls"].items():
            self.stdout.write(
                f"  {name:<22}{row['p50_ms']:>8}{row['p99_ms']:>8}{row['x_empty']:>9}"
            )
        self.stdout.write(
            "\nPush latency: agent HTTP call sent → card in its new column in Chromium (ms)"
        )
        for row in results["push"]:
            self.stdout.write(
                f"  {row['pages']:>3} page(s), {row['changes']} changes: p50 {row['p50_ms']}  p99 {row['p99_ms']}  max {row['max_ms']}"
            )
        self.stdout.write("\nBoard page (GET over HTTP, median of 7) and TaskList (all tasks)")
        for row in results["render"]:
            self.stdout.write(
                f"  {row['tasks']:>5} tasks: page {row['page_ms']} ms ({row['page_kb']} KB)   TaskList {row['tasklist_ms']} ms"
            )

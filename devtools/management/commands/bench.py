"""``python manage.py bench``: measure the board's speed in one run, on its own server.

Starts daphne on a fresh SQLite database in a temporary directory, then:

* push latency: from the moment an agent's HTTP tool call is sent to the card
  standing in its new column in Chromium, p50 / p99, with 1 and with 20 pages;
* tool call latency against an empty JSON view on the same server (the ratio);
* board page render time at 100 / 1,000 / 5,000 tasks;
* ``--scale``: the same calls on a 1,000- and a 20,000-task board (mostly finished
  history) in one run, each call's p50 on one keep-alive connection and the ratio
  between the two boards, plus the board page's time and size;
* ``--graph``: the dependency graph page with 1,000 open tasks (``graph_plan``), from
  navigation start to the SVG laid out and painted in Chromium, p50 of 3 loads.

Prints a table and writes the figures as JSON (``--out``).
"""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.liveserver import (
    CHROMIUM_ARGS,
    CHROMIUM_PATH,
    Agent,
    Cluster,
    hook,
    session_cookie,
)

# Not dependencies of the board itself: ``pip install -e '.[test]'`` brings them.
NEEDS = {"websockets": "the WebSocket push figures", "playwright": "the Chromium push figures"}

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


# What graph.js stamps on the drawn SVG (the times from navigation start).
GRAPH_FIGURES_JS = """
(() => {
  const svg = document.getElementById("graph");
  return {rendered: +svg.dataset.renderedMs, layout: +svg.dataset.layoutMs,
          nodes: +svg.dataset.nodes, edges: +svg.dataset.edges};
})()
"""

# What the servers bench starts serve: the product plus the echo routes (devtools.bench.echo).
BENCH_APP = "devtools.bench.asgi:application"
BENCH_ENV = {"DJANGO_SETTINGS_MODULE": "devtools.bench.settings"}


def rss_mb(cluster: Cluster, index: int) -> float:
    return round(cluster.servers[index].rss_kib() / 1024, 1)


def graph_plan(size: int) -> list[dict[str, Any]]:
    """TaskBatch creates for ``size`` open tasks on a fresh board, shaped like planned work:
    features of 25 tasks, six layers of four and a last task, each waiting on one or two
    tasks of the layer before (about 1.5 dependencies a task); three features in four
    also wait on the one before, so the graph has parts of 100 tasks, 28 ranks deep.

    Creates name their task ``t<number>`` (the board's own number on a fresh board):
    blockers in the same batch of 500 go by that ref, earlier ones by number.
    """
    ops: list[dict[str, Any]] = []
    for number in range(1, size + 1):
        feature, index = divmod(number - 1, 25)
        layer = index // 4
        blockers: list[int] = []
        if layer == 0:
            if feature % 4 and index == 0:
                blockers.append(feature * 25)  # the feature before's last task
        else:
            first = feature * 25 + (layer - 1) * 4 + 1
            blockers.append(first + index % 4)
            if index % 4 != 3:
                blockers.append(first + (index + 1) % 4)
        batch_start = (number - 1) // 500 * 500 + 1
        ops.append(
            {
                "op": "create",
                "ref": f"t{number}",
                "subject": f"Feature {feature + 1} step {index + 1}",
                "blockedBy": [f"t{b}" if b >= batch_start else str(b) for b in blockers],
            }
        )
    return ops


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


class Command(BaseCommand):
    help = "Measure the board's speed on servers it starts itself; prints a table, writes JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="small counts: checks the harness")
        parser.add_argument("--changes", type=int, default=200, help="changes per push run")
        parser.add_argument("--pages", default="1,20", help="Chromium page counts")
        parser.add_argument("--clients", default="1,50,200", help="WebSocket client counts")
        parser.add_argument("--sizes", default="100,1000,5000", help="board sizes to render")
        parser.add_argument("--calls", type=int, default=300, help="tool calls per latency run")
        parser.add_argument("--racers", type=int, default=16)
        parser.add_argument("--race-tasks", type=int, default=200)
        parser.add_argument(
            "--pg-url",
            default=os.environ.get(
                "KANBAN_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres"
            ),
            help="PostgreSQL server for the scale-out run (a database is created and dropped)",
        )
        parser.add_argument(
            "--redis-url",
            default=os.environ.get("KANBAN_BENCH_REDIS_URL", "redis://127.0.0.1:6379/1"),
        )
        parser.add_argument(
            "--skip", default="", help="comma-separated: sqlite, browser, pg (runs to leave out)"
        )
        parser.add_argument("--out", default="bench-results.json")
        parser.add_argument(
            "--scale",
            action="store_true",
            help="only the history-independence run: the same calls at 1,000 and 20,000 tasks",
        )
        parser.add_argument("--scale-sizes", default="1000,20000")
        parser.add_argument("--scale-calls", type=int, default=100)
        parser.add_argument(
            "--graph",
            action="store_true",
            help="only the graph page: open tasks laid out and drawn in Chromium",
        )
        parser.add_argument("--graph-tasks", type=int, default=1000)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["quick"]:
            options.update(
                changes=9, pages="1", clients="1,5", sizes="100", calls=20, racers=4, race_tasks=20
            )
        skip = set(filter(None, options["skip"].split(",")))
        results: dict[str, Any] = {
            "machine": f"{os.cpu_count()} cores",
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "command": "python manage.py bench " + " ".join(sys.argv[2:]),
        }
        if options["scale"]:
            with tempfile.TemporaryDirectory() as tmp:
                results["scale"] = self.scale(Path(tmp), options)
            self.report_scale(results["scale"])
            Path(options["out"]).write_text(json.dumps(results, indent=2))
            self.stdout.write(f"\nwrote {options['out']}")
            return
        if options["graph"]:
            self.check_extras({"pg"})
            with tempfile.TemporaryDirectory() as tmp:
                results["graph"] = self.graph(Path(tmp), options["graph_tasks"])
            self.report_graph(results["graph"])
            Path(options["out"]).write_text(json.dumps(results, indent=2))
            self.stdout.write(f"\nwrote {options['out']}")
            return
        self.check_extras(skip)
        with tempfile.TemporaryDirectory() as tmp:
            if "sqlite" not in skip:
                self.single_process(Path(tmp), options, skip, results)
            if "pg" not in skip:
                results["postgresql_redis"] = self.scale_out(Path(tmp), options)
        self.report(results)
        Path(options["out"]).write_text(json.dumps(results, indent=2))
        self.stdout.write(f"\nwrote {options['out']}")

    def check_extras(self, skip: set[str]) -> None:
        """Refuse at once, before any server starts, when a run lacks what it measures with."""
        runs = {"sqlite", "pg"} - skip
        needed = {
            "websockets": bool(runs),
            "playwright": "sqlite" in runs and "browser" not in skip,
        }
        missing = [
            f"{name} ({NEEDS[name]})"
            for name, used in needed.items()
            if used and not importlib.util.find_spec(name)
        ]
        if missing:
            raise CommandError(
                f"bench needs {', '.join(missing)}: install the test extras with "
                "pip install -e '.[test]'"
            )
        if needed["playwright"] and not Path(CHROMIUM_PATH).exists():
            raise CommandError(
                f"{CHROMIUM_PATH} is missing: install Debian's chromium, or pass --skip browser"
            )

    def single_process(
        self, workdir: Path, options: dict[str, Any], skip: set[str], results: dict[str, Any]
    ) -> None:
        cluster = Cluster(workdir / "sqlite", env=BENCH_ENV, app=BENCH_APP)
        try:
            cluster.start()
            self.make_user(cluster)
            sqlite: dict[str, Any] = {}
            sqlite["tool_calls"] = self.tool_calls(cluster, options["calls"])
            if "browser" not in skip:
                sqlite["browser_push"] = [
                    self.browser_push(cluster, int(n), options["changes"])
                    for n in options["pages"].split(",")
                ]
            sqlite["socket_push"] = self.socket_push(
                cluster, [int(n) for n in options["clients"].split(",")], options["changes"] // 2
            )
            sqlite["render"] = [self.render(cluster, int(n)) for n in options["sizes"].split(",")]
            sqlite["race"] = self.race(cluster, options["racers"], options["race_tasks"])
            results["sqlite"] = sqlite
        finally:
            cluster.stop()

    def make_user(self, cluster: Cluster) -> None:
        cluster.user("bench", "bench-pass-1")

    def board(self, cluster: Cluster, slug: str, *, team: bool = False) -> Agent:
        cluster.manage("createboard", slug)
        args = ["issuetoken", slug, "bench-agent", *(["--team"] if team else [])]
        return Agent(cluster.bases[0], slug, cluster.manage(*args), "bench-agent" if team else "")

    def scale_out(self, workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
        """The same figures on PostgreSQL + Redis with two server processes."""
        try:
            import psycopg

            with psycopg.connect(options["pg_url"], connect_timeout=3):
                pass
            import redis  # channels-redis depends on it

            redis.Redis.from_url(options["redis_url"], socket_connect_timeout=3).ping()
        except Exception as exc:
            self.stderr.write(f"skipping PostgreSQL + Redis: {exc}")
            return {"skipped": str(exc)}
        cluster = Cluster(
            workdir / "pg",
            backend="postgresql",
            admin_url=options["pg_url"],
            env={**BENCH_ENV, "REDIS_URL": options["redis_url"]},
            app=BENCH_APP,
        )
        try:
            cluster.start()
            cluster.start()
            self.make_user(cluster)
            counts = [int(n) for n in options["clients"].split(",")]
            figures: dict[str, Any] = {"processes": 2}
            sections = {
                "tool_calls": lambda: self.tool_calls(cluster, options["calls"]),
                "socket_push": lambda: self.socket_push(cluster, counts, options["changes"] // 2),
                "race": lambda: self.race(cluster, options["racers"], options["race_tasks"]),
            }
            for name, measure in sections.items():
                try:
                    figures[name] = measure()
                except Exception as exc:  # report the figures that were measured
                    self.stderr.write(f"PostgreSQL + Redis {name} failed: {exc!r}")
                    figures[name] = {"failed": repr(exc)}
            return figures
        finally:
            cluster.stop()

    def tool_calls(self, cluster: Cluster, calls: int) -> dict[str, Any]:
        agent = self.board(cluster, f"calls{len(cluster.bases)}")

        def timed(fn: Any) -> list[float]:
            samples = []
            for i in range(calls):
                start = time.perf_counter()
                fn(i)
                samples.append((time.perf_counter() - start) * 1000)
            return samples

        def empty(_: int) -> None:
            with urllib.request.urlopen(f"{cluster.bases[0]}/healthz", timeout=10) as response:
                response.read()

        def ok(tool: str, body: dict[str, Any]) -> None:
            status, answer = agent.call(tool, body)
            assert status == 200, (tool, status, answer)

        def pre_tool(i: int) -> dict[str, Any]:
            # A Claude Code session's call that no gate rule matches: recorded, no decision.
            return {
                "hook_event_name": "PreToolUse",
                "session_id": "bench-session",
                "cwd": "/srv/project",
                "tool_name": "Bash",
                "tool_input": {"command": f"npm test -- --shard {i}"},
                "tool_use_id": f"toolu_{i}",
            }

        def hooked(body: dict[str, Any]) -> None:
            status, answer = hook(agent.base, agent.slug, agent.token, body)
            assert status == 200 and "permissionDecision" not in json.dumps(answer), answer

        figures = {"empty JSON view": timed(empty)}
        figures["TaskCreate"] = timed(lambda i: ok("TaskCreate", {"subject": f"Task {i}"}))
        figures["TaskGet"] = timed(lambda i: ok("TaskGet", {"taskId": str(i % calls + 1)}))
        figures["TaskUpdate"] = timed(
            lambda i: ok("TaskUpdate", {"taskId": str(i % calls + 1), "metadata": {"n": i}})
        )
        figures["TaskClaim"] = timed(lambda i: ok("TaskClaim", {"taskId": str(i + 1)}))
        figures["hook PreToolUse"] = timed(lambda i: hooked(pre_tool(i)))
        figures["hook PostToolUse"] = timed(
            lambda i: hooked({**pre_tool(i), "hook_event_name": "PostToolUse", "duration_ms": 5})
        )
        for size in (100, 1000):
            lister = self.board(cluster, f"list{size}x{len(cluster.bases)}")
            self.fill(lister, size)
            figures[f"TaskList ({size} tasks)"] = timed(
                lambda i, lister=lister: lister.call("TaskList", {})
            )
        base = statistics.median(figures["empty JSON view"])
        return {
            name: {
                "p50_ms": round(statistics.median(s), 2),
                "p99_ms": round(percentile(s, 99), 2),
                "per_s": round(1000 / statistics.mean(s)),
                "x_empty": round(statistics.median(s) / base, 1),
            }
            for name, s in figures.items()
        }

    def fill(self, agent: Agent, size: int) -> None:
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

    def socket_push(
        self, cluster: Cluster, counts: list[int], changes: int
    ) -> list[dict[str, Any]]:
        """Agent call sent → the card's fragment received by every WebSocket client, against
        a bare group_send echo to the same number of sockets (the floor)."""
        cookie = session_cookie(cluster.bases[0], "bench", "bench-pass-1")
        rows = []
        for count in counts:
            slug = f"ws{count}x{len(cluster.bases)}"
            agent = self.board(cluster, slug)
            board_urls = [
                cluster.bases[i % len(cluster.bases)].replace("http", "ws", 1)
                + f"/ws/boards/{slug}/"
                for i in range(count)
            ]
            echo_urls = [
                cluster.bases[i % len(cluster.bases)].replace("http", "ws", 1) + "/ws/bench-echo/"
                for i in range(count)
            ]
            before = [rss_mb(cluster, i) for i in range(len(cluster.bases))]
            push, rss = asyncio.run(
                self._socket_run(cluster, board_urls, cookie, changes, agent=agent)
            )
            echo, _ = asyncio.run(self._socket_run(cluster, echo_urls, cookie, changes, agent=None))
            p50 = statistics.median(push)
            rows.append(
                {
                    "clients": count,
                    "changes": changes,
                    "p50_ms": round(p50, 1),
                    "p99_ms": round(percentile(push, 99), 1),
                    "echo_p50_ms": round(statistics.median(echo), 1),
                    "echo_p99_ms": round(percentile(echo, 99), 1),
                    "x_echo": round(p50 / statistics.median(echo), 1),
                    "rss_mb_idle": before,
                    "rss_mb_connected": rss,
                }
            )
        return rows

    async def _socket_run(
        self, cluster: Cluster, urls: list[str], cookie: str, changes: int, *, agent: Agent | None
    ) -> tuple[list[float], list[float]]:
        import websockets

        sockets = []
        for url in urls:
            origin = "http://" + url.split("://", 1)[1].split("/", 1)[0]
            sockets.append(
                await websockets.connect(
                    url, additional_headers={"Cookie": cookie, "Origin": origin}, max_size=None
                )
            )
        queues: list[asyncio.Queue] = [asyncio.Queue() for _ in sockets]

        async def reader(ws: Any, queue: asyncio.Queue) -> None:
            async for frame in ws:
                await queue.put((time.perf_counter(), frame))

        readers = [
            asyncio.create_task(reader(ws, q)) for ws, q in zip(sockets, queues, strict=True)
        ]
        await asyncio.sleep(0.5)  # let catch-up frames arrive, then drop them
        for queue in queues:
            while not queue.empty():
                queue.get_nowait()
        rss = [rss_mb(cluster, i) for i in range(len(cluster.bases))]
        samples: list[float] = []
        steps = [
            ("TaskCreate", lambda n: {"subject": f"Change {n}"}, "pending"),
            ("TaskClaim", lambda n: {"taskId": str(n)}, "in_progress"),
            ("TaskUpdate", lambda n: {"taskId": str(n), "status": "completed"}, "completed"),
        ]
        for index in range(changes):
            number = index // 3 + 1
            tool, body, column = steps[index % 3]
            if agent is None:
                marker = f"^echo-{index}$"
                sent = time.perf_counter()
                await asyncio.to_thread(
                    urllib.request.urlopen, f"{cluster.bases[0]}/bench/echo/?n=echo-{index}"
                )
            else:
                marker = f'beforeend:#cards-{column}">\\s*<article id="task-{number}"'
                sent = time.perf_counter()
                status, answer = await asyncio.to_thread(agent.call, tool, body(number))
                assert status == 200, answer
            for client, queue in enumerate(queues):
                while True:
                    try:
                        received, frame = await asyncio.wait_for(queue.get(), 10)
                    except TimeoutError:
                        raise RuntimeError(
                            f"client {client} of {len(queues)} ({urls[client]}) got no frame "
                            f"for change {index} in 10 s"
                        ) from None
                    if re.search(marker, frame):
                        samples.append((received - sent) * 1000)
                        break
        for task in readers:
            task.cancel()
        for ws in sockets:
            await ws.close()
        return samples, rss

    def race(self, cluster: Cluster, racers: int, tasks: int) -> dict[str, Any]:
        """``racers`` agents (threads, each its own connection) claim every task at once."""
        slug = f"race{len(cluster.bases)}"
        planner = self.board(cluster, slug, team=True)
        ops = [{"op": "create", "subject": f"Task {n}"} for n in range(1, tasks + 1)]
        assert planner.call("TaskBatch", {"ops": ops})[0] == 200
        barrier = threading.Barrier(racers)
        outcomes: list[list[tuple[int, int]]] = [[] for _ in range(racers)]

        def run(index: int) -> None:
            agent = Agent(
                cluster.bases[index % len(cluster.bases)], slug, planner.token, f"agent-{index}"
            )
            barrier.wait()
            for k in range(tasks):
                number = (k + index * 7) % tasks + 1
                outcomes[index].append(
                    (number, agent.call("TaskClaim", {"taskId": str(number)})[0])
                )

        threads = [threading.Thread(target=run, args=(i,)) for i in range(racers)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        codes = [status for rows in outcomes for _, status in rows]
        winners: dict[int, int] = {}
        for rows in outcomes:
            for number, status in rows:
                if status == 200:
                    winners[number] = winners.get(number, 0) + 1
        return {
            "agents": racers,
            "tasks": tasks,
            "attempts_per_s": round(len(codes) / elapsed),
            "seconds": round(elapsed, 2),
            "exactly_once": sorted(winners) == list(range(1, tasks + 1))
            and set(winners.values()) == {1},
            "server_errors": sum(1 for c in codes if c >= 500),
        }

    def login(self, context: Any, cluster: Cluster) -> None:
        page = context.new_page()
        page.goto(f"{cluster.bases[0]}/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", "bench-pass-1")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/boards/$"))
        page.close()

    def browser_push(self, cluster: Cluster, pages: int, changes: int) -> dict[str, Any]:
        from playwright.sync_api import sync_playwright

        slug = f"push{pages}"
        agent = self.board(cluster, slug)
        samples: list[float] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            context = browser.new_context()
            self.login(context, cluster)
            state = context.storage_state()
            opened = []
            for _ in range(pages):
                # One context per page: a page in the background of a shared context counts
                # as a hidden tab, and the board pauses its socket while hidden.
                page = browser.new_context(storage_state=state).new_page()
                page.goto(f"{cluster.bases[0]}/boards/{slug}/")
                # A selector, not wait_for_function: the page's CSP allows no eval.
                page.wait_for_selector('#live-status[data-state="live"]', timeout=10_000)
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

    def render(self, cluster: Cluster, size: int) -> dict[str, Any]:
        slug = f"render{size}"
        agent = self.board(cluster, slug)
        self.fill(agent, size)
        # Some work in progress, so every kind of card is on the page.
        for number in range(1, size + 1, 8):
            agent.call("TaskClaim", {"taskId": str(number)})
        page = urllib.request.Request(
            f"{cluster.bases[0]}/boards/{slug}/",
            headers={"Cookie": session_cookie(cluster.bases[0], "bench", "bench-pass-1")},
        )
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            with urllib.request.urlopen(page) as response:
                html = response.read()
            samples.append((time.perf_counter() - start) * 1000)
        shown = html.count(b"data-task-id=")
        assert 0 < shown <= size
        list_samples = []
        for _ in range(7):
            start = time.perf_counter()
            agent.call("TaskList", {})
            list_samples.append((time.perf_counter() - start) * 1000)
        queries = cluster.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User\n"
            "from django.db import connection\n"
            "from django.test import Client\n"
            "from django.test.utils import CaptureQueriesContext\n"
            "client = Client()\n"
            "client.force_login(User.objects.get(username='bench'))\n"
            "with CaptureQueriesContext(connection) as captured:\n"
            f"    assert client.get('/boards/{slug}/').status_code == 200\n"
            "print(len(captured))",
        )
        return {
            "tasks": size,
            "queries": int(queries.splitlines()[-1]),
            "page_ms": round(statistics.median(samples), 1),
            "page_kb": round(len(html) / 1024),
            "cards_shown": shown,
            "tasklist_ms": round(statistics.median(list_samples), 1),
        }

    # -- history independence (--scale) -------------------------------------------------

    def scale(self, workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
        sizes = [int(n) for n in options["scale_sizes"].split(",")]
        calls = options["scale_calls"]
        cluster = Cluster(workdir / "scale", env=BENCH_ENV, app=BENCH_APP)
        try:
            base = cluster.start()
            self.make_user(cluster)
            boards = {}
            for size in sizes:
                agent = self.board(cluster, f"scale{size}")
                self.fill(agent, size)
                # History: all but the last 100 finished, as a board that ran for weeks.
                cluster.manage(
                    "shell",
                    "-c",
                    "from django.utils import timezone\n"
                    "from boards.models import Board, Task\n"
                    f"n = Task.objects.filter(board__slug='scale{size}', number__lte={size - 100})"
                    ".update(status='completed', completed_at=timezone.now(), blocked=False)\n"
                    f"Board.objects.filter(slug='scale{size}').update(completed_count=n)",
                )
                # Fresh blockers with five dependents each, one per measured completion.
                ops: list[dict[str, Any]] = []
                for i in range(calls):
                    ops.append({"op": "create", "ref": f"b{i}", "subject": f"Blocker {i}"})
                    ops += [
                        {"op": "create", "subject": f"Dependent {i}.{d}", "blockedBy": [f"b{i}"]}
                        for d in range(5)
                    ]
                for start in range(0, len(ops), 480):
                    status, body = agent.call("TaskBatch", {"ops": ops[start : start + 480]})
                    assert status == 200, body
                boards[size] = (agent, size + 1)
            # Weeks of history for the metrics page: 20,000 finished tasks, 200,000 events.
            self.board(cluster, "history")
            cluster.manage(
                "makehistory",
                "history",
                "--tasks",
                str(sizes[-1]),
                "--events",
                str(10 * sizes[-1]),
                timeout=600,
            )
            cookie = session_cookie(base, "bench", "bench-pass-1")
            figures = {
                size: self._scale_calls(base, *boards[size], calls, cookie) for size in sizes
            }
            metrics_ms = {
                f"{sizes[0]} tasks, fresh": self._metrics_p50(base, f"scale{sizes[0]}", cookie),
                f"{sizes[-1]} tasks, {10 * sizes[-1]} events": self._metrics_p50(
                    base, "history", cookie
                ),
            }
        finally:
            cluster.stop()
        small, big = sizes[0], sizes[-1]
        return {
            "sizes": sizes,
            "calls": calls,
            "metrics_p50_ms": metrics_ms,
            "p50_ms": {str(size): figures[size] for size in sizes},
            "growth": {
                name: round(figures[big][name] / figures[small][name], 2)
                for name in figures[small]
                if not name.startswith("page_kb")
            },
            "x_floor_at_largest": {
                name: round(value / figures[big]["floor (401)"], 2)
                for name, value in figures[big].items()
                if not name.startswith("page")
            },
        }

    def _scale_calls(
        self, base: str, agent: Agent, first_blocker: int, calls: int, cookie: str
    ) -> dict[str, float]:
        """p50 of each call on one keep-alive connection, as an agent's client makes them."""
        parts = urllib.parse.urlsplit(base)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        path = f"/api/boards/{agent.slug}/tools/"

        def post(tool: str, body: dict[str, Any], token: str | None = agent.token) -> bytes:
            headers = {"Content-Type": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            conn.request("POST", path + tool, body=json.dumps(body), headers=headers)
            response = conn.getresponse()
            data = response.read()
            assert response.status in (200, 401), (tool, response.status, data[:200])
            return data

        open_task = json.loads(post("TaskCreate", {"subject": "Kept open"}))["task"]["id"]
        kinds: dict[str, Any] = {
            "floor (401)": lambda i: post("TaskList", {}, token=None),
            "TaskCreate": lambda i: post("TaskCreate", {"subject": f"New {i}"}),
            "TaskUpdate notes": lambda i: post(
                "TaskUpdate", {"taskId": open_task, "notes": str(i)}
            ),
            "complete, 5 dependents": lambda i: post(
                "TaskUpdate",
                {"taskId": str(first_blocker + 6 * i), "status": "completed", "result": "ok"},
            ),
            "TaskList in_progress": lambda i: post("TaskList", {"view": "in_progress"}),
            "TaskList ready (100)": lambda i: post("TaskList", {"view": "ready"}),
        }
        # Interleaved, one of each call in turn: whatever else the machine does in the
        # meantime slows every kind alike, so the ratios to the floor hold within a run.
        timed: dict[str, list[float]] = {name: [] for name in kinds}
        for i in range(calls):
            for name, make in kinds.items():
                start = time.perf_counter()
                make(i)
                timed[name].append((time.perf_counter() - start) * 1000)
        row = {name: round(statistics.median(times), 2) for name, times in timed.items()}
        conn.close()
        page = urllib.request.Request(f"{base}/boards/{agent.slug}/", headers={"Cookie": cookie})
        samples, size = [], 0
        for _ in range(7):
            start = time.perf_counter()
            with urllib.request.urlopen(page, timeout=60) as response:
                size = len(response.read())
            samples.append((time.perf_counter() - start) * 1000)
        row["board page"] = round(statistics.median(samples), 1)
        row["page_kb"] = round(size / 1024, 1)
        listed = post("TaskList", {})
        row["page_kb TaskList default"] = round(len(listed) / 1024, 1)
        return row

    def _metrics_p50(self, base: str, slug: str, cookie: str, loads: int = 15) -> float:
        """p50 of the metrics API (30 days) for a logged-in person, in ms."""
        request = urllib.request.Request(
            f"{base}/api/boards/{slug}/metrics?days=30", headers={"Cookie": cookie}
        )
        samples = []
        for _ in range(loads):
            start = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
            samples.append((time.perf_counter() - start) * 1000)
        return round(statistics.median(samples), 1)

    def report_scale(self, scale: dict[str, Any]) -> None:
        small, big = (str(n) for n in (scale["sizes"][0], scale["sizes"][-1]))
        self.stdout.write(
            f"\n== Cost of history: p50 of {scale['calls']} calls, one keep-alive connection (ms)"
        )
        self.stdout.write(
            f"  {'call':<26}{small + ' tasks':>12}{big + ' tasks':>13}{'growth':>8}{'x floor':>9}"
        )
        for name, value in scale["p50_ms"][big].items():
            if name.startswith("page_kb"):
                continue
            self.stdout.write(
                f"  {name:<26}{scale['p50_ms'][small][name]:>12}{value:>13}"
                f"{scale['growth'][name]:>8}{scale['x_floor_at_largest'].get(name, ''):>9}"
            )
        for key in ("page_kb", "page_kb TaskList default"):
            self.stdout.write(
                f"  {key.replace('page_kb', 'KB'):<26}{scale['p50_ms'][small][key]:>12}"
                f"{scale['p50_ms'][big][key]:>13}"
            )
        for name, value in scale.get("metrics_p50_ms", {}).items():
            self.stdout.write(f"  metrics API, {name}: {value} ms (p50 of 15)")

    # -- the graph page (--graph) ------------------------------------------------------

    def graph(self, workdir: Path, size: int, loads: int = 3) -> dict[str, Any]:
        """Navigation start → graph.json fetched, laid out by dagre, drawn as SVG and
        painted (graph.js stamps ``data-rendered-ms`` on the SVG after the next frame)."""
        from playwright.sync_api import sync_playwright

        cluster = Cluster(workdir / "graph", env=BENCH_ENV, app=BENCH_APP)
        try:
            base = cluster.start()
            self.make_user(cluster)
            agent = self.board(cluster, "graph")
            ops = graph_plan(size)
            for start in range(0, len(ops), 500):
                status, body = agent.call("TaskBatch", {"ops": ops[start : start + 500]})
                assert status == 200, body
            edges = sum(len(op["blockedBy"]) for op in ops)
            samples: list[dict[str, float]] = []
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1440, "height": 900})
                self.login(context, cluster)
                page = context.new_page()
                for _ in range(loads):
                    page.goto(f"{base}/boards/graph/graph/")
                    page.wait_for_selector("svg#graph[data-rendered-ms]", state="attached")
                    samples.append(page.evaluate(GRAPH_FIGURES_JS))
                browser.close()
        finally:
            cluster.stop()
        assert all(s["nodes"] == size and s["edges"] == edges for s in samples), samples
        return {
            "tasks": size,
            "edges": edges,
            "loads": loads,
            "rendered_ms_p50": statistics.median(s["rendered"] for s in samples),
            "layout_ms_p50": statistics.median(s["layout"] for s in samples),
            "rendered_ms": [s["rendered"] for s in samples],
        }

    def report_graph(self, graph: dict[str, Any]) -> None:
        self.stdout.write(
            f"graph: {graph['tasks']} open tasks, {graph['edges']} edges, layout+render "
            f"{graph['rendered_ms_p50']:.0f} ms (p50 of {graph['loads']} loads; dagre "
            f"{graph['layout_ms_p50']:.0f} ms of it)"
        )

    def report(self, results: dict[str, Any]) -> None:
        for name, run in (
            ("SQLite, 1 process", results.get("sqlite")),
            ("PostgreSQL + Redis, 2 processes", results.get("postgresql_redis")),
        ):
            if not run or "skipped" in run:
                continue
            self.stdout.write(f"\n== {name}")
            failed = [k for k, v in run.items() if isinstance(v, dict) and "failed" in v]
            for key in failed:
                self.stdout.write(f"{key}: FAILED {run.pop(key)['failed']}")
            if "tool_calls" not in run:
                continue
            self.stdout.write("Tool calls, one agent in sequence (ms)")
            self.stdout.write(f"  {'call':<22}{'p50':>8}{'p99':>8}{'per s':>8}{'x empty':>9}")
            for call, row in run["tool_calls"].items():
                self.stdout.write(
                    f"  {call:<22}{row['p50_ms']:>8}{row['p99_ms']:>8}{row['per_s']:>8}{row['x_empty']:>9}"
                )
            for row in run.get("browser_push", []):
                self.stdout.write(
                    f"Chromium push, {row['pages']} page(s), {row['changes']} changes: "
                    f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, max {row['max_ms']} ms"
                )
            self.stdout.write("WebSocket push: agent call sent → fragment at every client (ms)")
            for row in run.get("socket_push", []):
                self.stdout.write(
                    f"  {row['clients']:>4} clients: p50 {row['p50_ms']}  p99 {row['p99_ms']}   "
                    f"bare group_send echo p50 {row['echo_p50_ms']}  p99 {row['echo_p99_ms']}   "
                    f"x echo {row['x_echo']}   RSS {row['rss_mb_connected']} MB"
                )
            for row in run.get("render", []):
                self.stdout.write(
                    f"Board page, {row['tasks']} tasks: {row['page_ms']} ms, {row['queries']} queries, "
                    f"{row['page_kb']} KB; TaskList {row['tasklist_ms']} ms"
                )
            race = run.get("race")
            if not race:
                continue
            self.stdout.write(
                f"Claim race: {race['agents']} agents x {race['tasks']} tasks: "
                f"{race['attempts_per_s']} claims/s, exactly once: {race['exactly_once']}, "
                f"5xx: {race['server_errors']}"
            )

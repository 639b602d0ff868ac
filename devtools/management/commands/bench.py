"""``python manage.py bench``: measure the board's speed in one run, on its own server.

Starts daphne on a fresh SQLite database in a temporary directory, then:

* push latency: from the moment an agent's HTTP tool call is sent to the card
  standing in its new column in Chromium, p50 / p99, with 1 and with 20 pages;
* tool call latency against an empty JSON view on the same server (the ratio);
* the writes' and a search's cost above the floor (a 401) and a filtered list, interleaved
  on a 5,000-task board (``--ratios``: only these);
* board page render time at 100 / 1,000 / 5,000 tasks;
* ``--scale``: the same calls on a 1,000- and a 20,000-task board (mostly finished
  history) in one run, each call's p50 on one keep-alive connection and the ratio
  between the two boards, plus the board page's time and size;
* ``--graph``: the dependency graph page with 1,000 open tasks (``graph_plan``), from
  navigation start to the SVG laid out and painted in Chromium, p50 of 3 loads;
* ``--hooks``: what Claude Code's hooks cost per tool call, with the real CLI
  (``devtools.bench.hooks``).

Prints a table and writes the figures as JSON (``--out``). The scenarios live in
``devtools.bench``, one module each.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from devtools.bench import backlog, graph, hooks, report, runs, scale


class Command(BaseCommand):
    help = "Measure the board's speed on servers it starts itself; prints a table, writes JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="small counts: checks the harness")
        parser.add_argument("--changes", type=int, default=200, help="changes per push run")
        parser.add_argument("--pages", default="1,20", help="Chromium page counts")
        parser.add_argument("--clients", default="1,50,200", help="WebSocket client counts")
        parser.add_argument("--sizes", default="100,1000,5000", help="board sizes to render")
        parser.add_argument("--calls", type=int, default=300, help="tool calls per latency run")
        parser.add_argument(
            "--ratio-tasks", type=int, default=5000, help="board size of the ratios' calls"
        )
        parser.add_argument(
            "--ratios",
            action="store_true",
            help="only the writes' and the search's cost above the 401 floor, on SQLite",
        )
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
        parser.add_argument(
            "--backlog",
            action="store_true",
            help="only the open backlog: the same calls at 1,000 and 20,000 open tasks",
        )
        parser.add_argument("--backlog-sizes", default="1000,20000")
        parser.add_argument("--scale-calls", type=int, default=100)
        parser.add_argument(
            "--graph",
            action="store_true",
            help="only the graph page: open tasks laid out and drawn in Chromium",
        )
        parser.add_argument("--graph-tasks", type=int, default=1000)
        parser.add_argument(
            "--hooks",
            action="store_true",
            help="only Claude Code's hooks: the real CLI's calls with and without the block",
        )
        parser.add_argument("--hook-calls", type=int, default=100)
        parser.add_argument("--hook-rounds", type=int, default=5)
        parser.add_argument(
            "--hook-connect-file",
            action="store_true",
            help="with --hooks: also the whole settings file connect writes for Claude Code",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["quick"]:
            options.update(
                changes=9,
                pages="1",
                clients="1,5",
                sizes="100",
                calls=20,
                racers=4,
                race_tasks=20,
                ratio_tasks=500,
            )
        skip = set(filter(None, options["skip"].split(",")))
        results: dict[str, Any] = {
            "machine": f"{os.cpu_count()} cores",
            "when": time.strftime("%Y-%m-%d %H:%M"),
            "command": "python manage.py bench " + " ".join(sys.argv[2:]),
        }
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            if options["ratios"]:
                results["ratios"] = runs.ratios_only(workdir, options)
                report.report_ratios(results["ratios"], self.stdout.write)
            elif options["scale"]:
                results["scale"] = scale.scale(workdir, options)
                scale.report_scale(results["scale"], self.stdout.write)
            elif options["backlog"]:
                results["backlog"] = backlog.backlog(workdir, options)
                backlog.report_backlog(results["backlog"], self.stdout.write)
            elif options["hooks"]:
                results["hooks"] = hooks.hooks(workdir, options)
                hooks.report_hooks(results["hooks"], self.stdout.write)
            elif options["graph"]:
                runs.check_extras({"pg"})
                results["graph"] = graph.graph(workdir, options["graph_tasks"])
                graph.report_graph(results["graph"], self.stdout.write)
            else:
                runs.check_extras(skip)
                if "sqlite" not in skip:
                    runs.single_process(workdir, options, skip, results)
                if "pg" not in skip:
                    results["postgresql_redis"] = runs.scale_out(
                        workdir, options, self.stderr.write
                    )
                report.report(results, self.stdout.write)
        Path(options["out"]).write_text(json.dumps(results, indent=2))
        self.stdout.write(f"\nwrote {options['out']}")

"""The default run's tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .ratios import report_ratios


def report(results: dict[str, Any], write: Callable[[str], object]) -> None:
    for name, run in (
        ("SQLite, 1 process", results.get("sqlite")),
        ("PostgreSQL + Redis, 2 processes", results.get("postgresql_redis")),
    ):
        if not run or "skipped" in run:
            continue
        write(f"\n== {name}")
        failed = [k for k, v in run.items() if isinstance(v, dict) and "failed" in v]
        for key in failed:
            write(f"{key}: FAILED {run.pop(key)['failed']}")
        if "tool_calls" not in run:
            continue
        write("Tool calls, one agent in sequence (ms)")
        write(f"  {'call':<22}{'p50':>8}{'p99':>8}{'per s':>8}{'x empty':>9}")
        for call, row in run["tool_calls"].items():
            write(
                f"  {call:<22}{row['p50_ms']:>8}{row['p99_ms']:>8}{row['per_s']:>8}{row['x_empty']:>9}"
            )
        if isinstance(run.get("ratios"), dict) and "p50_ms" in run["ratios"]:
            report_ratios(run["ratios"], write)
        for row in run.get("browser_push", []):
            write(
                f"Chromium push, {row['pages']} page(s), {row['changes']} changes: "
                f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, max {row['max_ms']} ms"
            )
        write("WebSocket push: agent call sent → fragment at every client (ms)")
        for row in run.get("socket_push", []):
            write(
                f"  {row['clients']:>4} clients: p50 {row['p50_ms']}  p99 {row['p99_ms']}   "
                f"bare group_send echo p50 {row['echo_p50_ms']}  p99 {row['echo_p99_ms']}   "
                f"x echo {row['x_echo']}   RSS {row['rss_mb_connected']} MB"
            )
        for row in run.get("render", []):
            write(
                f"Board page, {row['tasks']} tasks: {row['page_ms']} ms, {row['queries']} queries, "
                f"{row['page_kb']} KB; TaskList {row['tasklist_ms']} ms"
            )
        race = run.get("race")
        if not race:
            continue
        write(
            f"Claim race: {race['agents']} agents x {race['tasks']} tasks: "
            f"{race['attempts_per_s']} claims/s, exactly once: {race['exactly_once']}, "
            f"5xx: {race['server_errors']}"
        )

"""The default run: every figure on SQLite with one server process, then on PostgreSQL +
Redis with two; and the check that a run has what it measures with."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from devtools.liveserver import CHROMIUM_PATH

from . import calls, push, race, ratios, render
from .common import bench_cluster, make_user

# Not dependencies of the board itself: ``pip install -e '.[test]'`` brings them.
NEEDS = {"websockets": "the WebSocket push figures", "playwright": "the Chromium push figures"}


def check_extras(skip: set[str]) -> None:
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
    workdir: Path, options: dict[str, Any], skip: set[str], results: dict[str, Any]
) -> None:
    cluster = bench_cluster(workdir / "sqlite")
    try:
        cluster.start()
        make_user(cluster)
        sqlite: dict[str, Any] = {}
        sqlite["tool_calls"] = calls.tool_calls(cluster, options["calls"])
        sqlite["ratios"] = ratios.ratios(cluster, options["calls"], options["ratio_tasks"])
        if "browser" not in skip:
            sqlite["browser_push"] = [
                push.browser_push(cluster, int(n), options["changes"])
                for n in options["pages"].split(",")
            ]
        sqlite["socket_push"] = push.socket_push(
            cluster, [int(n) for n in options["clients"].split(",")], options["changes"] // 2
        )
        sqlite["render"] = [render.render(cluster, int(n)) for n in options["sizes"].split(",")]
        sqlite["race"] = race.race(cluster, options["racers"], options["race_tasks"])
        results["sqlite"] = sqlite
    finally:
        cluster.stop()


def scale_out(
    workdir: Path, options: dict[str, Any], warn: Callable[[str], object]
) -> dict[str, Any]:
    """The same figures on PostgreSQL + Redis with two server processes."""
    try:
        import psycopg

        with psycopg.connect(options["pg_url"], connect_timeout=3):
            pass
        import redis  # channels-redis depends on it

        redis.Redis.from_url(options["redis_url"], socket_connect_timeout=3).ping()
    except Exception as exc:
        warn(f"skipping PostgreSQL + Redis: {exc}")
        return {"skipped": str(exc)}
    cluster = bench_cluster(
        workdir / "pg",
        backend="postgresql",
        admin_url=options["pg_url"],
        env={"REDIS_URL": options["redis_url"]},
    )
    try:
        cluster.start()
        cluster.start()
        make_user(cluster)
        counts = [int(n) for n in options["clients"].split(",")]
        figures: dict[str, Any] = {"processes": 2}
        sections = {
            "tool_calls": lambda: calls.tool_calls(cluster, options["calls"]),
            "ratios": lambda: ratios.ratios(cluster, options["calls"], options["ratio_tasks"]),
            "socket_push": lambda: push.socket_push(cluster, counts, options["changes"] // 2),
            "race": lambda: race.race(cluster, options["racers"], options["race_tasks"]),
        }
        for name, measure in sections.items():
            try:
                figures[name] = measure()
            except Exception as exc:  # report the figures that were measured
                warn(f"PostgreSQL + Redis {name} failed: {exc!r}")
                figures[name] = {"failed": repr(exc)}
        return figures
    finally:
        cluster.stop()


def ratios_only(workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Only the writes' and the search's cost above the floor, on SQLite (``--ratios``)."""
    cluster = bench_cluster(workdir / "ratios")
    try:
        cluster.start()
        return ratios.ratios(cluster, options["calls"], options["ratio_tasks"])
    finally:
        cluster.stop()

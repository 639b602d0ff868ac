"""A big open backlog (``--backlog``, issue #24): the same calls on a board with 1,000 and
one with 20,000 tasks, every one open (chains of 10, so most wait on another), each
call's p50 on one keep-alive connection, and the board page's time and size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from devtools.liveserver import Agent, session_cookie

from .common import PASSWORD, USER, bench_cluster, board, make_user
from .scale import _scale_calls, add_blockers

CHAIN = 10


def fill_open(agent: Agent, size: int, label_every: int = 50) -> None:
    """``size`` open tasks in chains of ``CHAIN`` (each waits on the one before), every
    ``label_every``-th labelled "rare"."""
    made = 0
    while made < size:
        ops: list[dict[str, Any]] = []
        for i in range(min(500, size - made)):
            number = made + i + 1
            op: dict[str, Any] = {"op": "create", "subject": f"Fix failing test {number}"}
            if number % CHAIN != 1:
                op["blockedBy"] = [str(number - 1)]
            if number % label_every == 0:
                op["labels"] = ["rare"]
            ops.append(op)
        status, body = agent.call("TaskBatch", {"ops": ops}, timeout=600)
        assert status == 200, body
        made += len(ops)


def backlog(workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
    sizes = [int(n) for n in options["backlog_sizes"].split(",")]
    calls = options["scale_calls"]
    cluster = bench_cluster(workdir / "backlog")
    try:
        base = cluster.start()
        make_user(cluster)
        boards = {}
        for size in sizes:
            agent = board(cluster, f"backlog{size}")
            fill_open(agent, size)
            add_blockers(agent, calls)
            boards[size] = (agent, size + 1)
        cookie = session_cookie(base, USER, PASSWORD)
        extra = {
            "TaskList label (rare)": {"label": "rare"},
            "TaskList open (100)": {"view": "open"},
            "TaskList blocked (100)": {"view": "blocked"},
        }
        figures = {
            size: _scale_calls(base, *boards[size], calls, cookie, extra=extra) for size in sizes
        }
    finally:
        cluster.stop()
    small, big = sizes[0], sizes[-1]
    return {
        "sizes": sizes,
        "calls": calls,
        "p50_ms": {str(size): figures[size] for size in sizes},
        "growth": {
            name: round(figures[big][name] / figures[small][name], 2)
            for name in figures[small]
            if not name.startswith("page_kb")
        },
    }


def report_backlog(result: dict[str, Any], write: Callable[[str], object]) -> None:
    small, big = (str(n) for n in (result["sizes"][0], result["sizes"][-1]))
    write(f"\n== Open backlog: p50 of {result['calls']} calls, one keep-alive connection (ms)")
    write(f"  {'call':<26}{small + ' open':>12}{big + ' open':>13}{'growth':>8}")
    for name, value in result["p50_ms"][big].items():
        if name.startswith("page_kb"):
            continue
        write(
            f"  {name:<26}{result['p50_ms'][small][name]:>12}{value:>13}{result['growth'][name]:>8}"
        )
    for key in ("page_kb", "page_kb TaskList default"):
        write(
            f"  {key.replace('page_kb', 'KB'):<26}{result['p50_ms'][small][key]:>12}"
            f"{result['p50_ms'][big][key]:>13}"
        )

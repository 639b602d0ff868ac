"""Tool call latency: one agent's calls in sequence, against the empty JSON view."""

from __future__ import annotations

import json
import statistics
import time
import urllib.request
from typing import Any

from devtools.liveserver import Cluster, hook

from .common import board, fill, percentile


def tool_calls(cluster: Cluster, calls: int) -> dict[str, Any]:
    agent = board(cluster, f"calls{len(cluster.bases)}")

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
        lister = board(cluster, f"list{size}x{len(cluster.bases)}")
        fill(lister, size)
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

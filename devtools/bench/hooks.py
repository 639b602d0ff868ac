"""``bench --hooks``: what Claude Code's hooks cost per tool call (SPEC §11, at little cost).

With the real CLI (``tests/claude``) against a scripted Anthropic stand-in and a live
board, in interleaved rounds:

* a tool call (``Bash: true``) with no hooks, with the Connect block, and with the same
  block whose commands are ``true`` (what the client pays for hooks at all): the gap
  between the model's successive requests, p50;
* the forwarder's own part: its run (a ``PreToolUse`` on stdin, answered by the board)
  less the board's answer to the same request, against a bare ``python3 -I -S -c pass``;
* the hook door against the tool API's 401 floor (a refused token), one connection each.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from boards.clients import claude_code
from devtools.liveserver import Cluster
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse
from tests.support.claude_cli import run_claude

from .common import bench_cluster, board, percentile

FORWARDER = Path(__file__).resolve().parents[2] / "boards" / "clients" / "forwarder.py"
PYTHON = shutil.which("python3") or sys.executable
# The forwarder imported from its cached bytecode: as a script (``python3 -I -S file``) it
# is compiled on every run, which costs more than the interpreter's start.
LEAN = shlex.join(
    [
        PYTHON,
        "-I",
        "-S",
        "-c",
        f"import sys;sys.path[:0]=[{str(FORWARDER.parent)!r}];"
        "import forwarder;sys.exit(forwarder.main())",
    ]
)
TARGETS = {"block_x_none": 2.0, "board_x_bare": 3.0, "forwarder_x_bare": 2.0, "door_x_floor": 2.0}


def _p50(samples: list[float]) -> float:
    return round(percentile(samples, 50), 1)


def _block(hook_url: str, true_commands: bool) -> dict[str, Any]:
    settings = claude_code.claude_settings(hook_url, 300, forwarder=LEAN)
    if true_commands:
        for entries in settings["hooks"].values():
            for entry in entries:
                for hook in entry["hooks"]:
                    if hook["type"] == "command":
                        hook["command"] = "true"
    return settings


def _session_gaps(
    workdir: Path, settings: dict[str, Any], calls: int, env: dict[str, str]
) -> list[float]:
    """One session making ``calls`` Bash calls: the ms between the model's requests."""
    script = [ToolUse("Bash", {"command": "true", "description": "nothing"})] * calls
    with AnthropicStandin([*script, Text("Done.")]) as api:
        run = run_claude(
            "Run true.",
            api_url=api.url,
            workdir=workdir,
            settings=settings,
            allowed_tools=["Bash"],
            env=env,
            timeout=600,
        )
        stamps = [r.at for r in api.main_loop]
    if run.returncode != 0 or len(stamps) < calls + 1:
        raise RuntimeError(
            f"claude ended {run.returncode} after {len(stamps)} turns: {run.stderr[-300:]}"
        )
    return [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _run(command: list[str], stdin: bytes, env: dict[str, str]) -> None:
    subprocess.run(command, input=stdin, env=env, capture_output=True, check=True)  # noqa: S603


def _post(url: str, token: str, body: bytes) -> int:
    """One request on a connection of its own (as every hook makes it)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request(
            "POST",
            parts.path,
            body,
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def hooks(workdir: Path, options: dict[str, Any]) -> dict[str, Any]:
    calls, rounds = options["hook_calls"], options["hook_rounds"]
    cluster: Cluster = bench_cluster(workdir / "hooks")
    try:
        base = cluster.start()
        agent = board(cluster, "hooks")
        hook_url = f"{base}/api/boards/{agent.slug}/hooks/claude-code"
        env = {"KANBAN_TOKEN": agent.token, "KANBAN_AGENT": "", "KANBAN_HOOK_URL": hook_url}
        sessions: dict[str, list[float]] = {
            "no hooks": [],
            "Connect block": [],
            "block, true commands": [],
        }
        configs = {
            "no hooks": {},
            "Connect block": _block(hook_url, False),
            "block, true commands": _block(hook_url, True),
        }
        per_round = max(1, calls // rounds)
        for n in range(rounds):
            for name, settings in configs.items():
                where = workdir / f"run-{n}-{len(sessions[name])}-{name.split()[0]}"
                sessions[name] += _session_gaps(where, settings, per_round, env)

        event = json.dumps(
            {
                "hook_event_name": "PreToolUse",
                "session_id": "bench-forwarder",
                "cwd": "/srv/project",
                "tool_name": "Bash",
                "tool_input": {"command": "true"},
                "tool_use_id": "toolu_bench",
            }
        ).encode()
        run_env = {"PATH": os.environ.get("PATH", ""), **env}
        lean = [*shlex.split(LEAN), "--client", "claude-code", "--timeout", "30"]
        bare = [PYTHON, "-I", "-S", "-c", "pass"]
        tool_url = f"{base}/api/boards/{agent.slug}/tools/TaskList"
        parts: dict[str, list[float]] = {
            "forwarder": [],
            "bare start": [],
            "door": [],
            "401 floor": [],
        }
        for _ in range(calls):
            parts["forwarder"].append(_timed(lambda: _run(lean, event, run_env)))
            parts["bare start"].append(_timed(lambda: _run(bare, b"", run_env)))
            parts["door"].append(_timed(lambda: _post(hook_url, agent.token, event)))
            parts["401 floor"].append(_timed(lambda: _post(tool_url, "ak_not_a_token", b"{}")))
    finally:
        cluster.stop()
    p50 = {name: _p50(samples) for name, samples in {**sessions, **parts}.items()}
    board_part = p50["Connect block"] - p50["block, true commands"]
    ratios = {
        "block_x_none": round(p50["Connect block"] / p50["no hooks"], 2),
        "board_x_bare": round(board_part / p50["bare start"], 2),
        "forwarder_x_bare": round((p50["forwarder"] - p50["door"]) / p50["bare start"], 2),
        "door_x_floor": round(p50["door"] / p50["401 floor"], 2),
    }
    return {
        "calls": calls,
        "rounds": rounds,
        "forwarder": LEAN,
        "p50_ms": p50,
        "ratios": ratios,
        "missed": [name for name, ratio in ratios.items() if ratio > TARGETS[name]],
    }


def report_hooks(figures: dict[str, Any], write: Callable[[str], object]) -> None:
    write(
        f"\n== Claude Code hooks: {figures['calls']} Bash calls, {figures['rounds']} rounds, p50 ms"
    )
    for name, ms in figures["p50_ms"].items():
        write(f"{name:24} {ms:8.1f}")
    for name, ratio in figures["ratios"].items():
        mark = "ok" if ratio <= TARGETS[name] else "MISSED"
        write(f"{name:24} {ratio:8.2f}×  (target ≤ {TARGETS[name]:g}×)  {mark}")

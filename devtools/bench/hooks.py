"""``bench --hooks``: what Claude Code's hooks cost per tool call (SPEC §11, at little cost).

With the real CLI (``tests/claude``) against a scripted Anthropic stand-in and a live
board, in interleaved rounds:

* a tool call (``Bash: true``) with no hooks, with the Connect block, and with the same
  block whose commands are ``true`` (what the client pays for hooks at all): the gap
  between the model's successive requests, p50. The block's commands are the ones
  ``agent-kanban connect`` writes (``setup.forwarder``/``setup.command``: this Python,
  ``-I -S``, the forwarder imported from its cached bytecode, a gated event's command
  guarded), reading the board and token from a ``boards.json`` that connect's own code
  writes; with ``--hook-connect-file``, also the whole file connect writes for Claude
  Code (every event a command), beside them, with no target;
* the forwarder's own part: connect's PreToolUse command run as the client runs it
  (``sh -c``, a ``PreToolUse`` on stdin, answered by the board) less the board's answer
  to the same request, against a bare ``python3 -I -S -c pass`` (the same interpreter);
* the hook door against the tool API's 401 floor (a refused token), one connection each;
* each other client's gated hook as ``connect`` writes it (Codex, Copilot, Gemini and Qwen
  run a command per tool call; opencode's plugin posts from inside its own process):
  its shell call, in its own shape, answered by the board through its door — what the
  client waits for on every tool call — beside the bare start.
"""

from __future__ import annotations

import http.client
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from boards.clients import claude_code, setup
from devtools.liveserver import Cluster
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse
from tests.support.claude_cli import run_claude
from tests.support.hook_payloads import shell_call

from .common import bench_cluster, board, percentile

# The interpreter connect writes into the hooks (the one running it: never a pyenv shim
# or whatever ``python3`` on PATH is, which may be a shell script that costs more than
# the interpreter it starts), and the bare start it is measured against.
PYTHON = sys.executable
FORWARDER = setup.forwarder(PYTHON)
COMMAND_EVENTS = ("SessionStart", "PreToolUse", "PreSkillShellCommand", "TaskCompleted")
# The clients whose hooks are commands (opencode's is a plugin in the client's process).
COMMAND_CLIENTS = ("codex", "copilot", "gemini", "qwen")
TARGETS = {"block_x_none": 2.0, "board_x_bare": 3.0, "forwarder_x_bare": 2.0, "door_x_floor": 2.0}


def _p50(samples: list[float]) -> float:
    return round(percentile(samples, 50), 1)


def _connect_command(event: str, seconds: int) -> str:
    return setup.command(FORWARDER, "claude-code", seconds, gated=event in setup.GATED_EVENTS)


def _block(hook_url: str, true_commands: bool) -> dict[str, Any]:
    """The Connect block, its commands as connect writes them (or ``true``); the board and
    token from boards.json, as after ``connect``."""
    settings = claude_code.claude_settings(hook_url, 300)
    settings["env"].pop("KANBAN_HOOK_URL")
    for event, entries in settings["hooks"].items():
        for entry in entries:
            for hook in entry["hooks"]:
                if hook["type"] == "command":
                    seconds = hook["timeout"] - setup.CLIENT_MARGIN_SECONDS
                    hook["command"] = "true" if true_commands else _connect_command(event, seconds)
    return settings


def _connect_file(home: Path) -> dict[str, Any]:
    """The settings file ``connect --client claude-code`` writes (every event a command)."""
    change = setup.client_change(
        "claude-code", setup.Home(home, {}), hook=FORWARDER, remove=False, system=False
    )
    assert change.text is not None
    return json.loads(change.text)


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
        results = [r.text for r in api.tool_results()]
    if run.returncode != 0 or len(stamps) < calls + 1:
        raise RuntimeError(
            f"claude ended {run.returncode} after {len(stamps)} turns: {run.stderr[-300:]}"
        )
    # A call the hooks blocked (no board found, say) still ends a turn: count only ran ones.
    refused = [text for text in results if "completed with no output" not in text]
    if refused:
        raise RuntimeError(f"{len(refused)} of {calls} calls did not run: {refused[0][:300]}")
    return [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _run(command: list[str], stdin: bytes, env: dict[str, str]) -> None:
    done = subprocess.run(command, input=stdin, env=env, capture_output=True)  # noqa: S603
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{command[:3]} ended {done.returncode}: {done.stderr[-300:]!r}")


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
        # boards.json as connect writes it: the forwarder finds the board and token there.
        machine = workdir / "machine"
        home = setup.Home(machine, {"XDG_CONFIG_HOME": str(machine / "config")})
        connected = setup.boards_change(
            home, setup.board_of(f"{base}/boards/{agent.slug}/"), agent.token, "", remove=False
        )
        setup.apply(connected)
        env = {"KANBAN_TOKEN": agent.token, "KANBAN_AGENT": "", **home.env}
        configs = {
            "no hooks": {},
            "Connect block": _block(hook_url, False),
            "block, true commands": _block(hook_url, True),
        }
        if options.get("hook_connect_file"):
            configs["connect's file"] = _connect_file(machine)
        sessions: dict[str, list[float]] = {name: [] for name in configs}
        per_round = max(1, calls // rounds)
        for n in range(rounds):
            for i, (name, settings) in enumerate(configs.items()):
                sessions[name] += _session_gaps(workdir / f"run-{n}-{i}", settings, per_round, env)

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
        run_env = {"PATH": "/usr/bin:/bin", **env}
        # As the client runs it: connect's PreToolUse command, through a shell.
        forwarder = ["/bin/sh", "-c", _connect_command("PreToolUse", 30)]
        bare = [PYTHON, "-I", "-S", "-c", "pass"]
        tool_url = f"{base}/api/boards/{agent.slug}/tools/TaskList"
        parts: dict[str, list[float]] = {
            "forwarder": [],
            "bare start": [],
            "door": [],
            "401 floor": [],
        }
        clients = {
            client: (
                ["/bin/sh", "-c", setup.command(FORWARDER, client, 30, gated=True)],
                json.dumps(shell_call(client, "true", session=f"bench-{client}")).encode(),
            )
            for client in COMMAND_CLIENTS
        }
        per_client: dict[str, list[float]] = {client: [] for client in clients}
        for _ in range(calls):
            parts["forwarder"].append(_timed(lambda: _run(forwarder, event, run_env)))
            parts["bare start"].append(_timed(lambda: _run(bare, b"", run_env)))
            parts["door"].append(_timed(lambda: _post(hook_url, agent.token, event)))
            parts["401 floor"].append(_timed(lambda: _post(tool_url, "ak_not_a_token", b"{}")))
            for client, (line, body) in clients.items():
                per_client[client].append(_timed(partial(_run, line, body, run_env)))
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
        "forwarder": forwarder[2],
        "p50_ms": p50,
        "ratios": ratios,
        "missed": [name for name, ratio in ratios.items() if ratio > TARGETS[name]],
        "clients_p50_ms": {client: _p50(samples) for client, samples in per_client.items()},
    }


def report_hooks(figures: dict[str, Any], write: Callable[[str], object]) -> None:
    write(
        f"\n== Claude Code hooks: {figures['calls']} Bash calls, {figures['rounds']} rounds, p50 ms"
    )
    write(f"connect's PreToolUse command: {figures['forwarder']}")
    for name, ms in figures["p50_ms"].items():
        write(f"{name:24} {ms:8.1f}")
    for name, ratio in figures["ratios"].items():
        mark = "ok" if ratio <= TARGETS[name] else "MISSED"
        write(f"{name:24} {ratio:8.2f}×  (target ≤ {TARGETS[name]:g}×)  {mark}")
    bare = figures["p50_ms"]["bare start"]
    write("\nEach client's gated hook per tool call (connect's command, answered by the board):")
    for client, ms in figures.get("clients_p50_ms", {}).items():
        write(f"{client:24} {ms:8.1f} ms  ({ms / bare:.2f}× a bare start)")

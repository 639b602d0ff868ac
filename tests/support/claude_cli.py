"""The real Claude Code CLI (``tests/claude``, pinned 2.1.332), run headless in tests.

The CLI talks to a scripted stand-in for the Anthropic API (``tests/support/anthropic_standin``)
and sends its hook calls wherever its settings say::

    with AnthropicStandin([ToolUse("Bash", {"command": "touch x"}), Text("Done.")]) as api:
        run = run_claude(
            "clean up",
            api_url=api.url,
            workdir=tmp_path,
            settings=command_hook_settings(board_url),
            allowed_tools=["Bash"],
            env={"KANBAN_TOKEN": token},
        )
    assert run.returncode == 0
    assert not (run.project / "x").exists()
    assert "could not be reached" in api.tool_results()[0].text

``run_claude`` runs ``claude -p PROMPT --output-format stream-json --verbose
--include-hook-events`` in ``workdir/project`` with ``HOME=workdir/home`` and a small
environment of its own (no ``ANTHROPIC_*``/``KANBAN_*`` from the caller's); it returns
the stream's messages parsed, the exit status and stderr.

It runs as root: ``--dangerously-skip-permissions`` refuses root, so a test lets the
client allow a tool with ``allowed_tools`` and the hooks then gate it.

What 2.1.332 does with hooks (checked with this harness; docs/claude-code-hooks.md has
the payloads): ``http`` hooks are never sent for ``SessionStart`` (nor ``Setup``), only
``command`` hooks; an http hook that fails (refused, 4xx/5xx, not JSON, past its
``timeout``) gives no verdict, so a tool the client allows runs; a ``command`` hook that
exits 2 blocks the call whatever the client allows, and one the client kills for its
``timeout`` does not.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.liveserver import ROOT
from tests.support.npm import npm_ci

CLAUDE_DIR = ROOT / "tests" / "claude"
CLAUDE_BINARY = CLAUDE_DIR / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
VERSION = "2.1.332"

# The events a board listens to. Tool events take a matcher on the tool's name.
HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"})
NO_HTTP_EVENTS = frozenset({"SessionStart", "Setup"})  # 2.1.332 skips http hooks on these
HTTP_EVENTS = tuple(event for event in HOOK_EVENTS if event not in NO_HTTP_EVENTS)
GATED_EVENTS = frozenset({"PreToolUse"})

HELD_SECONDS = 600  # how long a gated call may wait for a person (kanban-hook --timeout)
QUICK_SECONDS = 10  # every other event: the board answers at once


def claude_binary() -> Path:
    """The pinned CLI's native binary, ``npm ci`` first when missing (skips without Node)."""
    npm_ci(CLAUDE_DIR)
    return CLAUDE_BINARY


@dataclass
class ClaudeRun:
    """One headless run: the stream-json messages, exit status and stderr."""

    returncode: int
    messages: list[dict[str, Any]]
    stderr: str
    project: Path

    @property
    def result(self) -> dict[str, Any]:
        """The last ``{"type": "result"}`` message (``{}`` when the run ended without one)."""
        results = [m for m in self.messages if m.get("type") == "result"]
        return results[-1] if results else {}

    @property
    def init(self) -> dict[str, Any]:
        """The first ``system``/``init`` message: session id, model, tools, cwd."""
        return next(
            (m for m in self.messages if m.get("type") == "system" and m.get("subtype") == "init"),
            {},
        )

    def hook_responses(self, event: str | None = None) -> list[dict[str, Any]]:
        """The client's record of each hook that ran (``exit_code`` is the HTTP status for
        an http hook), optionally of one event."""
        return [
            m
            for m in self.messages
            if m.get("type") == "system"
            and m.get("subtype") == "hook_response"
            and event in (None, m.get("hook_event"))
        ]


def run_claude(
    prompt: str,
    *,
    api_url: str,
    workdir: Path,
    settings: Mapping[str, Any] | None = None,
    mcp_config: Mapping[str, Any] | None = None,
    allowed_tools: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 120,
) -> ClaudeRun:
    """Run ``claude -p prompt`` against the API at ``api_url``; see the module docstring.

    ``settings`` and ``mcp_config`` are written to ``workdir`` and passed as
    ``--settings`` / ``--mcp-config``; ``env`` goes over the run's own environment (put
    ``KANBAN_TOKEN`` there: http hooks read it through ``allowedEnvVars``, command hooks
    inherit it). Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds.
    """
    binary = claude_binary()
    project, home = workdir / "project", workdir / "home"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    # The forwarder takes a board only from boards.json (issue #42): the board the
    # settings' KANBAN_HOOK_URL names goes there with the run's KANBAN_TOKEN, as connect
    # would write it; the environment then only picks it.
    hook_url = ((settings or {}).get("env") or {}).get("KANBAN_HOOK_URL")
    token = (env or {}).get("KANBAN_TOKEN")
    if hook_url and token:
        config = home / ".config" / "agent-kanban" / "boards.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"version": 1, "boards": [{"url": hook_url, "token": token}]}))
        config.chmod(0o600)
    args = [
        str(binary),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-hook-events",
    ]
    if settings is not None:
        path = workdir / "settings.json"
        path.write_text(json.dumps(settings, indent=2))
        args += ["--settings", str(path)]
    if mcp_config is not None:
        path = workdir / "mcp.json"
        path.write_text(json.dumps(mcp_config, indent=2))
        args += ["--mcp-config", str(path)]
    if allowed_tools:
        args += ["--allowedTools", *allowed_tools]
    args += extra_args
    run_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "sk-ant-standin",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # The command hooks run `python -m boards.clients.forwarder` from this checkout.
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    completed = subprocess.run(
        args,
        cwd=project,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    messages = []
    for line in completed.stdout.splitlines():
        try:
            messages.append(json.loads(line))
        except ValueError:
            messages.append({"type": "unparsed", "line": line})
    return ClaudeRun(completed.returncode, messages, completed.stderr, project)


def _matchers(
    events: Iterable[str], hook: Mapping[str, Any], tool_matcher: str
) -> dict[str, list[dict[str, Any]]]:
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        entry: dict[str, Any] = {"hooks": [dict(hook)]}
        if event in TOOL_EVENTS:
            entry = {"matcher": tool_matcher, **entry}
        hooks[event] = [entry]
    return hooks


def http_hook_settings(
    url: str,
    *,
    events: Iterable[str] = HTTP_EVENTS,
    tool_matcher: str = "*",
    timeout: int = HELD_SECONDS,
) -> dict[str, Any]:
    """``.claude/settings.json`` with an ``http`` hook on each event, POSTing to ``url``.

    The token comes from ``$KANBAN_TOKEN`` and the agent's name (for a team token) from
    ``$KANBAN_AGENT``, interpolated into the headers (``allowedEnvVars``; an unset one is
    sent empty). Fails open: a tool the client allows runs when ``url`` cannot be reached.
    """
    events = tuple(events)
    unsupported = sorted(NO_HTTP_EVENTS.intersection(events))
    if unsupported:
        raise ValueError(f"Claude Code {VERSION} sends no http hooks for {unsupported}")
    hook = {
        "type": "http",
        "url": url,
        "headers": {"Authorization": "Bearer $KANBAN_TOKEN", "X-Agent": "$KANBAN_AGENT"},
        "allowedEnvVars": ["KANBAN_TOKEN", "KANBAN_AGENT"],
        "timeout": timeout,
    }
    return {"hooks": _matchers(events, hook, tool_matcher)}


def forwarder_command(url: str, *, timeout: int) -> str:
    """The shell command that runs ``kanban-hook`` from this checkout with this Python.

    A user's settings say ``kanban-hook --url URL --client claude-code`` (the console script
    of the installed project); tests run the working tree's module instead.
    """
    module = [sys.executable, "-m", "boards.clients.forwarder"]
    return shlex.join([*module, "--url", url, "--timeout", str(timeout), "--client", "claude-code"])


def command_hook_settings(
    url: str,
    *,
    events: Iterable[str] = HOOK_EVENTS,
    tool_matcher: str = "*",
    held_seconds: int = HELD_SECONDS,
) -> dict[str, Any]:
    """``.claude/settings.json`` with a ``command`` hook (``kanban-hook``) on each event.

    A gated event's forwarder waits ``held_seconds`` for the board and the client waits
    30 s longer, so the forwarder always answers (or blocks) before the client gives up
    on it (a killed hook gives no verdict and the call would run). Other events wait
    :data:`QUICK_SECONDS`. The forwarder reads ``KANBAN_TOKEN``/``KANBAN_AGENT`` from the
    environment the client passes on, and the board's URL from ``KANBAN_HOOK_URL``, which
    the settings' ``"env"`` sets (as the Connect block does): ``--url`` alone never
    configures a board.
    """
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        seconds = held_seconds if event in GATED_EVENTS else QUICK_SECONDS
        hook = {
            "type": "command",
            "command": forwarder_command(url, timeout=seconds),
            "timeout": seconds + 30,
        }
        hooks.update(_matchers([event], hook, tool_matcher))
    return {"env": {"KANBAN_HOOK_URL": url}, "hooks": hooks}

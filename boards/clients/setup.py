"""``connect``: every installed coding client's user-scope hooks, written to go through
the forwarder (``kanban-hook``, run in its fast form: see :func:`forwarder`) with
``--client NAME`` to one board (SPEC §13).

For each client, the file its hooks live in and what goes in it; merged into what the
file already says (other keys and other hooks kept), our entries known by their command
(:func:`ours`: ``kanban-hook … --client`` or the fast form), so running it again
replaces them and ``remove`` takes them out. The board's URL and token go to ``$XDG_CONFIG_HOME/agent-kanban/boards.json``
(mode 0600), which the forwarder and the opencode plugin read. Plain files and JSON: no
Django, so a person's machine needs only the project installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from boards.clients import registry
from boards.clients.forwarder import GATED_EVENTS

# What a client runs to find it on PATH.
BINARIES = {
    "claude-code": "claude",
    "codex": "codex",
    "copilot": "copilot",
    "gemini": "gemini",
    "qwen": "qwen",
    "opencode": "opencode",
}
# The forwarder waits this long for a person (the longest a rule may wait, and a margin),
# and the client a little longer: a hook the client kills gives no verdict.
HELD_SECONDS = 3630
QUICK_SECONDS = 10
CLIENT_MARGIN_SECONDS = 30
BOARD_URL = re.compile(r"^(?P<prefix>.*?)/boards/(?P<slug>[-a-zA-Z0-9_]+)/?$")
PLUGIN = Path(__file__).with_name("opencode_plugin.js")
# Where forwarder.py is: the fast form imports it from there as a module of its own.
FORWARDER_DIR = Path(__file__).resolve().parent
# The fast form's program (``python -I -S -c``): the directory comes as its first argument,
# so this text is the same on every machine and :func:`ours` knows the command by it.
# Appended, not prepended, to the path: no file beside the forwarder can stand in for a
# module of the standard library (``ssl`` imports a dozen for https).
FAST_MARK = "import forwarder;sys.exit(forwarder.main())"
FAST_ENTRY = "import sys;sys.path.append(sys.argv.pop(1));" + FAST_MARK
# A gated call's command blocks (exit 2, with a reason) when the forwarder did not run at
# all: an interpreter gone (a venv deleted, a Python upgraded) exits 127, a broken install
# 1, and the clients read any status but 2 as "no verdict", so the call would run. The
# forwarder's own 2 passes as it is, its reason already on stderr.
GUARD = (
    " || { [ $? = 2 ] || echo 'kanban-hook did not run, so this tool call is blocked: "
    "run agent-kanban connect again' >&2; exit 2; }"
)
# Gated like a tool call but held for a person too: a skill's shell line (Claude Code).
HELD_EVENTS = frozenset({"PreSkillShellCommand"})


class SetupError(Exception):
    """A person's input or file that ``connect`` cannot use; the message says which."""


@dataclass(frozen=True)
class Board:
    url: str  # http(s)://HOST:PORT/boards/<slug>/
    prefix: str
    slug: str

    def hook_url(self, client: str) -> str:
        return f"{self.prefix}/api/boards/{self.slug}/hooks/{client}"


def board_of(url: str) -> Board:
    """The board a ``--url`` names (``http(s)://HOST:PORT/boards/<slug>/``)."""
    parts = urlsplit(url.strip())
    found = BOARD_URL.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or found is None:
        raise SetupError(f"{url!r} is not a board URL: give http(s)://HOST:PORT/boards/<slug>/")
    prefix = f"{parts.scheme}://{parts.netloc}{found['prefix']}"
    return Board(f"{prefix}/boards/{found['slug']}/", prefix, found["slug"])


@dataclass(frozen=True)
class Home:
    """Where a person's clients keep their settings (their environment, or defaults)."""

    home: Path
    env: Mapping[str, str]

    def config(self) -> Path:
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")

    def codex(self, system: bool) -> Path:
        if system:
            return Path("/etc/codex/hooks.json")
        return Path(self.env.get("CODEX_HOME") or self.home / ".codex") / "hooks.json"

    def copilot(self) -> Path:
        base = Path(self.env.get("COPILOT_HOME") or self.home / ".copilot")
        return base / "hooks" / "agent-kanban.json"

    def boards_file(self) -> Path:
        return self.config() / "agent-kanban" / "boards.json"


def installed(env: Mapping[str, str]) -> list[str]:
    """The clients whose command is on PATH."""
    path = env.get("PATH", "")
    return [name for name, binary in BINARIES.items() if shutil.which(binary, path=path)]


def forwarder(python: str | None = None) -> str:
    """The forwarder as the hooks run it, as shell words: this interpreter by its absolute
    path, isolated (``-I``: no environment, no user site, no current directory on the path)
    and without ``site`` (``-S``), importing ``forwarder.py`` from its cached bytecode. The
    console script ``kanban-hook`` pays for ``site`` and the editable install's finder on
    every run (about 40 ms; a pyenv shim on PATH several times that); this form starts
    about as fast as a bare ``python3 -I -S -c pass``. The forwarder imports nothing
    outside the interpreter, so it needs neither. With no interpreter known (an embedded
    Python), the console script by name."""
    python = sys.executable if python is None else python
    if not python:
        return "kanban-hook"
    return shlex.join([python, "-I", "-S", "-c", FAST_ENTRY, str(FORWARDER_DIR)])


def command(hook: str, client: str, seconds: int, *, gated: bool) -> str:
    """One hook's command line: the forwarder (``hook``, shell words) for ``client``,
    waiting ``seconds`` for the board; a gated event's blocks even if it cannot start."""
    line = f"{hook} --client {client} --timeout {seconds}"
    return line + GUARD if gated else line


def ours(command: Any) -> bool:
    """Whether a hook command is one ``connect`` wrote: the console script
    (``kanban-hook … --client``, as earlier versions wrote it) or the fast form."""
    return (
        isinstance(command, str)
        and "--client" in command
        and ("kanban-hook" in command or FAST_MARK in command)
    )


@dataclass
class Change:
    """One file ``connect`` writes (``text`` None: it removes the file)."""

    client: str
    path: Path
    text: str | None
    mode: int = 0o644
    advice: str = ""


# -- Claude Code's layout (Claude Code, Codex, Qwen Code, and Gemini CLI's own names) -------


def _layout_hooks(
    events: tuple[str, ...], gated: str, command: Callable[[str], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        entry: dict[str, Any] = {"hooks": [command(event)]}
        if event == gated or "Tool" in event:
            entry = {"matcher": "*", **entry}
        hooks[event] = [entry]
    return hooks


def _merged_settings(
    existing: dict[str, Any], hooks: dict[str, list[dict[str, Any]]] | None
) -> dict[str, Any]:
    """``existing`` with our hook entries replaced by ``hooks`` (None: taken out)."""
    merged = dict(existing)
    current = merged.get("hooks")
    kept: dict[str, Any] = {}
    if isinstance(current, dict):
        for event, entries in current.items():
            if not isinstance(entries, list):
                kept[event] = entries
                continue
            others = [e for e in entries if not _entry_is_ours(e)]
            if others:
                kept[event] = others
    for event, entries in (hooks or {}).items():
        kept[event] = [*kept.get(event, []), *entries]
    if kept:
        merged["hooks"] = kept
    else:
        merged.pop("hooks", None)
    return merged


def _entry_is_ours(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    inner = entry.get("hooks")
    if isinstance(inner, list) and inner:
        return all(isinstance(h, dict) and ours(h.get("command")) for h in inner)
    return ours(entry.get("command")) or ours(entry.get("bash"))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SetupError(f"Cannot read {path}: {exc.strerror}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SetupError(f"{path} is not JSON ({exc}); fix or move it, then run again") from exc
    if not isinstance(data, dict):
        raise SetupError(f"{path} is not a JSON object; fix or move it, then run again")
    return data


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _settings_change(
    client: str, path: Path, hooks: dict[str, list[dict[str, Any]]] | None, advice: str = ""
) -> Change:
    return Change(client, path, _dump(_merged_settings(_read_json(path), hooks)), advice=advice)


def client_change(client: str, home: Home, *, hook: str, remove: bool, system: bool) -> Change:
    """The file ``client``'s hooks live in, as ``connect`` leaves it."""
    row = registry.BY_NAME[client]
    held = HELD_SECONDS
    if row.holds_at_most is not None:
        # Below the client's own cap, so the forwarder answers before the client gives up.
        held = min(held, row.holds_at_most - 2)

    def seconds(event: str) -> int:
        return held if event == row.gated or event in HELD_EVENTS else QUICK_SECONDS

    def line(event: str) -> str:
        gated = event == row.gated or event in GATED_EVENTS
        return command(hook, client, seconds(event), gated=gated)

    def entry(event: str, unit: int = 1, key: str = "timeout") -> dict[str, Any]:
        wait = seconds(event)
        timeout = wait + CLIENT_MARGIN_SECONDS
        if row.holds_at_most is not None:
            timeout = min(timeout, row.holds_at_most)
        return {"type": "command", "command": line(event), key: timeout * unit}

    if client in ("claude-code", "codex", "qwen"):
        path = {
            "claude-code": home.home / ".claude" / "settings.json",
            "codex": home.codex(system),
            "qwen": home.home / ".qwen" / "settings.json",
        }[client]
        advice = ""
        if client == "codex" and not remove and not system:
            advice = (
                "Codex skips hooks it has not been told to trust: open `codex`, type /hooks "
                "and trust them once (or run connect again with --system, as root, to "
                "install them as managed in /etc/codex/hooks.json)."
            )
        hooks = None if remove else _layout_hooks(row.events, row.gated, entry)
        return _settings_change(client, path, hooks, advice)
    if client == "gemini":
        hooks = None
        if not remove:
            hooks = _layout_hooks(row.events, row.gated, lambda e: entry(e, unit=1000))
        return _settings_change(client, home.home / ".gemini" / "settings.json", hooks)
    if client == "copilot":
        path = home.copilot()
        if remove:
            return Change(client, path, None)
        copilot_hooks = {
            event: [
                {
                    "type": "command",
                    "bash": line(event),
                    "timeoutSec": seconds(event) + CLIENT_MARGIN_SECONDS,
                }
            ]
            for event in row.events
        }
        return Change(client, path, _dump({"version": 1, "hooks": copilot_hooks}))
    assert client == "opencode"
    path = home.config() / "opencode" / "plugin" / "agent-kanban.js"
    return Change(client, path, None if remove else PLUGIN.read_text())


def boards_change(home: Home, board: Board, token: str, agent: str, *, remove: bool) -> Change:
    """``boards.json`` with this board's entry added, replaced or taken out."""
    path = home.boards_file()
    data = _read_json(path)
    listed = data.get("boards")
    boards = [
        b
        for b in (listed if isinstance(listed, list) else [])
        if not (isinstance(b, dict) and b.get("url") == board.url)
    ]
    if not remove:
        boards.append({"url": board.url, "token": token, "agent": agent})
    return Change("", path, _dump({**data, "version": 1, "boards": boards}), mode=0o600)


def apply(change: Change) -> None:
    """Write (or remove) one file; a token's file is never readable by others, not even
    for the moment between its creation and its first write."""
    if change.text is None:
        change.path.unlink(missing_ok=True)
        return
    change.path.parent.mkdir(parents=True, exist_ok=True)
    temporary = change.path.with_name(change.path.name + ".agent-kanban-tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, change.mode)
    try:
        os.fchmod(descriptor, change.mode)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(change.text)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    os.replace(temporary, change.path)


def check(change: Change) -> str:
    """Why the written file would not load, or "" (JSON files parse; the plugin is there)."""
    if change.text is None or change.path.suffix != ".json":
        return ""
    try:
        json.loads(change.path.read_text())
    except (OSError, ValueError) as exc:
        return f"{change.path} does not read back as JSON: {exc}"
    return ""

"""``connect``: every installed coding client's user-scope hooks (or, with ``--system``,
its managed ones), written to go through the forwarder (``kanban-hook``, run in its fast
form: see :func:`forwarder`) with ``--client NAME`` to one board (SPEC §13).

For each client, the file its hooks live in and what goes in it; merged into what the
file already says (other keys and other hooks kept), our hooks known by their exact
command (:func:`ours`), so running it again replaces them and ``remove`` takes them out.
A gated hook says ``"onFailure": "block"`` where the client has it (:data:`ON_FAILURE`).
The board's URL and token go to ``$XDG_CONFIG_HOME/agent-kanban/boards.json`` (mode 0600),
the only place the forwarder and the opencode plugin take a board from; the forwarder
itself is copied beside it, out of the agent's reach, as is the interpreter the hooks
run (:func:`python_for_hooks`). Plain files and JSON: no Django, so a person's machine
needs only the project installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from boards.clients import registry
from boards.clients.forwarder import GATED_EVENTS

# What a client runs to find it on PATH (each row's ``binary``).
BINARIES = {row.name: row.binary for row in registry.CLIENTS}
# The forwarder waits this long for a person (the longest a rule may wait, and a margin),
# and the client a little longer: a hook the client kills gives no verdict.
HELD_SECONDS = 3630
QUICK_SECONDS = 10
CLIENT_MARGIN_SECONDS = 30
BOARD_URL = re.compile(r"^(?P<prefix>.*?)/boards/(?P<slug>[-a-zA-Z0-9_]+)/?$")
PLUGIN = Path(__file__).with_name("opencode_plugin.js")
# The forwarder connect copies out of the installed project into the config folder, and
# the folder it goes to with --system (managed hooks run as any user: root's alone).
FORWARDER_SOURCE = Path(__file__).with_name("forwarder.py")
SYSTEM_DIR = Path("etc/agent-kanban")
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
# What a client reads, on a gated command hook, as "a hook that failed (killed by a
# signal, timed out, could not start) blocks the call": a model's
# ``pkill -f 'import forwarder'`` loop otherwise frees every later call. Only Claude Code
# has one (registry: ``killed_hook``); the others run the call (docs/clients.md).
ON_FAILURE = {row.name: row.settings.gated_keys for row in registry.CLIENTS}
# Each client's managed (system) settings, under the machine's root: hooks there are the
# administrator's, and a project's own settings cannot switch them off (docs/clients.md).
SYSTEM_SETTINGS = {
    row.name: Path(row.settings.system) for row in registry.CLIENTS if row.settings.system
}


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
    root: Path = Path("/")  # the machine's root, for --system (a scratch folder in tests)

    def config(self) -> Path:
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")

    def settings(self, row: registry.Client, system: bool) -> Path:
        """The file ``row``'s hooks go to: its managed file under the root (``system``),
        or its user file under the home folder, the first folder moved by its variable
        (``CODEX_HOME``, ``XDG_CONFIG_HOME``) when set."""
        where = row.settings
        if system:
            return self.root / where.system
        first, rest = where.user.split("/", 1)
        moved = self.env.get(where.home_env) if where.home_env else None
        return Path(moved or self.home / first) / rest

    def forwarder_dir(self, system: bool) -> Path:
        """Where the hooks import the forwarder from: beside boards.json, out of every
        project (root's folder with --system)."""
        return self.root / SYSTEM_DIR if system else self.boards_file().parent

    def boards_file(self) -> Path:
        return self.config() / "agent-kanban" / "boards.json"


def installed(env: Mapping[str, str]) -> list[str]:
    """The clients whose command is on PATH."""
    path = env.get("PATH", "")
    return [name for name, binary in BINARIES.items() if shutil.which(binary, path=path)]


def forwarder(python: str | None = None, directory: Path | None = None) -> str:
    """The forwarder as the hooks run it, as shell words: ``python`` by its absolute path,
    isolated (``-I``: no environment, no user site, no current directory on the path)
    and without ``site`` (``-S``), importing the copy of ``forwarder.py`` in
    ``directory`` (:func:`forwarder_change`) from its cached bytecode. The console script
    ``kanban-hook`` pays for ``site`` and the editable install's finder on every run
    (about 40 ms; a pyenv shim on PATH several times that); this form starts about as
    fast as a bare ``python3 -I -S -c pass``. The forwarder imports nothing outside the
    interpreter, so it needs neither. Without ``directory``, the installed project's own
    copy (the bench's form; connect always names the config folder's)."""
    python = python or sys.executable
    folder = FORWARDER_SOURCE.resolve().parent if directory is None else directory
    return shlex.join([python, "-I", "-S", "-c", FAST_ENTRY, str(folder)])


def in_reach(path: Path, cwd: Path, home: Path) -> str:
    """Why an agent could rewrite ``path`` with one unheld line ("" when it is out of
    reach): it lies under the folder connect runs in or in that folder's git work tree
    (the home folder and above are too broad to count as a project), or it is a venv's
    interpreter inside any git work tree (a project's ``.venv``:
    ``ln -sf /bin/true .venv/bin/python`` made every hook pass). An interpreter a tool
    keeps in a clone of its own (pyenv's ``~/.pyenv``) is no venv, and is not refused."""
    path = Path(os.path.abspath(path))
    cwd = Path(os.path.realpath(cwd))
    broad = (home, *home.parents)
    if cwd not in broad:
        if path == cwd or cwd in path.parents:
            return f"it is under the current folder {cwd}"
        tree = _work_tree(cwd, broad)
        if tree is not None and tree in path.parents:
            return f"it is inside the git work tree {tree}, where connect runs"
    venv = path.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        tree = _work_tree(venv, broad)
        if tree is not None:
            return f"it is the venv {venv}, inside the git work tree {tree}"
    return ""


def _work_tree(folder: Path, broad: tuple[Path, ...]) -> Path | None:
    """The git work tree ``folder`` lies in (below the home folder), or None."""
    for candidate in (folder, *folder.parents):
        if candidate in broad:
            return None
        if (candidate / ".git").exists():
            return candidate
    return None


def python_for_hooks(python: str | None, cwd: Path, home: Path) -> tuple[str, str]:
    """The interpreter the hooks run, and a note for the person ("" when none).

    ``python`` (``--python``), else this one; a venv's link inside a project gives way to
    the interpreter it links to (the forwarder needs only the standard library). One
    still within an agent's reach, by its path or its real path, is refused: a warning
    would leave every hook one ``ln -sf`` from passing every call."""
    given = python or sys.executable
    if not given:
        raise SetupError("No Python interpreter is known: name one with --python PATH")
    if not os.path.isabs(given):
        raise SetupError(f"--python {given!r} is not an absolute path")
    real = os.path.realpath(given)
    if not (os.path.isfile(real) and os.access(real, os.X_OK)):
        raise SetupError(f"{given} is not an interpreter that can run (no executable file)")
    home = Path(os.path.realpath(home))
    why_real = in_reach(Path(real), cwd, home)
    if why_real:
        raise SetupError(
            f"The hooks' interpreter {real} is within an agent's reach ({why_real}): an "
            "agent's command could replace it and every hook would pass. Name one outside "
            "every project with --python PATH (e.g. /usr/bin/python3)."
        )
    if in_reach(Path(given), cwd, home):
        return real, f"The hooks run {real}, the interpreter {given} links to (out of the project)."
    return given, ""


def command(hook: str, client: str, seconds: int, *, gated: bool) -> str:
    """One hook's command line: the forwarder (``hook``, shell words) for ``client``,
    waiting ``seconds`` for the board; a gated event's blocks even if it cannot start."""
    line = f"{hook} --client {client} --timeout {seconds}"
    return line + GUARD if gated else line


def ours(command: Any) -> bool:
    """Whether a hook command is exactly one ``connect`` writes (or wrote): the fast form
    (``PYTHON -I -S -c <FAST_ENTRY> DIR``) or the console script (``…/kanban-hook``), then
    ``--client NAME --timeout N``, and the guard for a gated event. A person's own hook
    that merely mentions ``kanban-hook`` (``kanban-hook …; ./notify.sh``) is theirs."""
    if not isinstance(command, str):
        return False
    line = command.removesuffix(GUARD)
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    if len(words) >= 5 and words[1:5] == ["-I", "-S", "-c", FAST_ENTRY]:
        rest = words[6:] if len(words) > 5 else []
    elif words and words[0].rsplit("/", 1)[-1] == "kanban-hook":
        rest = words[1:]
    else:
        return False
    return (
        len(rest) == 4
        and (rest[0], rest[2]) == ("--client", "--timeout")
        and rest[1] in registry.NAMES
        and rest[3].isdigit()
    )


@dataclass
class Change:
    """One file ``connect`` writes (``text`` None: it removes the file)."""

    client: str
    path: Path
    text: str | None
    mode: int = 0o644
    advice: str = ""
    compile_with: str = ""  # the interpreter that compiles it (the copied forwarder)


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
    """``existing`` with our hooks taken out and ``hooks`` added (None: only taken out).
    Ours come out of an entry the person edited (their own hook added beside ours in the
    same matcher group) with theirs left in it."""
    merged = dict(existing)
    current = merged.get("hooks")
    kept: dict[str, Any] = {}
    if isinstance(current, dict):
        for event, entries in current.items():
            if not isinstance(entries, list):
                kept[event] = entries
                continue
            others = [e for e in (_without_ours(e) for e in entries) if e is not None]
            if others:
                kept[event] = others
    for event, entries in (hooks or {}).items():
        kept[event] = [*kept.get(event, []), *entries]
    if kept:
        merged["hooks"] = kept
    else:
        merged.pop("hooks", None)
    return merged


def _without_ours(entry: Any) -> Any:
    """An entry with our hooks taken out; None when nothing of the person's is left."""
    if not isinstance(entry, dict):
        return entry
    inner = entry.get("hooks")
    if isinstance(inner, list):
        theirs = [h for h in inner if not (isinstance(h, dict) and ours(h.get("command")))]
        if len(theirs) == len(inner):
            return entry
        return {**entry, "hooks": theirs} if theirs else None
    if ours(entry.get("command")) or ours(entry.get("bash")):
        return None
    return entry


def _regular(path: Path) -> Path:
    """The file a settings path names (through a symlink, so the link stays a link);
    refused when it is not a regular file (a FIFO would hang the read, a device worse)."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise SetupError(f"Cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(mode):
        raise SetupError(
            f"{path} is not a regular file (a FIFO, a device or a folder): move it away, "
            "then run again"
        )
    return target


def _read_json(path: Path) -> dict[str, Any]:
    target = _regular(path)
    try:
        # O_NONBLOCK: a FIFO put there after the check still cannot hang the read.
        descriptor = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SetupError(f"Cannot read {path}: {exc.strerror}") from exc
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SetupError(f"{path} is not a regular file: move it away, then run again")
        raw = handle.read()
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path} is not UTF-8 text; fix or move it, then run again") from exc
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
    client: str,
    path: Path,
    hooks: dict[str, list[dict[str, Any]]] | None,
    advice: str = "",
    keys: Mapping[str, Any] | None = None,
) -> Change:
    """The settings file with our hooks merged in, and ``keys`` set (taken out again with
    the hooks, where they still say what we set)."""
    merged = _merged_settings(_read_json(path), hooks)
    for key, value in (keys or {}).items():
        if hooks is not None:
            merged[key] = value
        elif merged.get(key) == value:
            merged.pop(key)
    return Change(client, path, _dump(merged), advice=advice)


class _Hooks:
    """How ``connect`` writes one client's hooks: each event's wait, command and entry."""

    def __init__(self, client: str, hook: str) -> None:
        self.client = client
        self.hook = hook
        self.row = row = registry.BY_NAME[client]
        self.held = HELD_SECONDS
        if row.holds_at_most is not None:
            # Below the client's own cap, so the forwarder answers before the client gives up.
            self.held = min(self.held, row.holds_at_most - 2)

    def seconds(self, event: str) -> int:
        return self.held if event == self.row.gated or event in HELD_EVENTS else QUICK_SECONDS

    def gated(self, event: str) -> bool:
        return event == self.row.gated or event in GATED_EVENTS

    def line(self, event: str) -> str:
        return command(self.hook, self.client, self.seconds(event), gated=self.gated(event))

    def entry(self, event: str, unit: int = 1) -> dict[str, Any]:
        timeout = self.seconds(event) + CLIENT_MARGIN_SECONDS
        if self.row.holds_at_most is not None:
            timeout = min(timeout, self.row.holds_at_most)
        written = {"type": "command", "command": self.line(event), "timeout": timeout * unit}
        if self.gated(event):
            written.update(ON_FAILURE.get(self.client, {}))
        return written

    def layout(self, unit: int = 1) -> dict[str, list[dict[str, Any]]]:
        return _layout_hooks(self.row.events, self.row.gated, lambda e: self.entry(e, unit))


def by_hand_settings(client: str, hook: str = "kanban-hook") -> dict[str, Any]:
    """The hooks ``connect`` writes for ``client`` (Claude Code's layout), with the console
    script by name: what the Connect page shows a person who writes the file by hand. No
    token and no board: the forwarder takes both from boards.json."""
    return {"hooks": _Hooks(client, hook).layout()}


def client_change(client: str, home: Home, *, hook: str, remove: bool, system: bool) -> Change:
    """The file ``client``'s hooks live in, as ``connect`` leaves it (``system``: the
    client's managed settings, :data:`SYSTEM_SETTINGS`)."""
    row = registry.BY_NAME[client]
    if system and client not in SYSTEM_SETTINGS:
        raise SetupError(
            f"{row.display} has no managed (system) settings connect can write: "
            "run connect for it without --system"
        )
    hooks_of = _Hooks(client, hook)
    line, seconds = hooks_of.line, hooks_of.seconds

    where = row.settings
    path = home.settings(row, system)
    if where.layout == "plugin":
        return Change(client, path, None if remove else PLUGIN.read_text())
    if where.layout == "copilot":
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
    hooks = None if remove else hooks_of.layout(unit=1000 if where.layout == "claude-ms" else 1)
    advice = where.advice if not (remove or system) else ""
    return _settings_change(client, path, hooks, advice, where.system_keys if system else None)


def forwarder_change(home: Home, *, python: str, system: bool) -> Change:
    """The forwarder's own copy, where the hooks import it from (:meth:`Home.forwarder_dir`):
    out of the installed project, which may be a checkout an agent works in."""
    path = home.forwarder_dir(system) / "forwarder.py"
    return Change("", path, FORWARDER_SOURCE.read_text(), mode=0o644, compile_with=python)


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
    """Write (or remove) one file, atomically: through a symlink to the file it names (the
    link stays), keeping the file's mode (a token's file is 0600 from its first byte),
    from a temporary file ``mkstemp`` creates in the same folder (``O_EXCL``: a link
    planted under any name is never followed); a FIFO or device is refused, never read."""
    target = _regular(change.path)
    if change.text is None:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = change.mode
    if change.path.name != "boards.json" and target.exists():
        mode = stat.S_IMODE(os.stat(target).st_mode)
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".agent-kanban-tmp", dir=target.parent
    )
    try:
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(change.text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if change.compile_with:
        _compile(target, change.compile_with)


def _compile(path: Path, python: str) -> None:
    """The copied forwarder's bytecode, by the interpreter the hooks run (its own cache
    tag), so the hooks' fast form reads it and never compiles it on a hook's time."""
    program = "import py_compile,sys;py_compile.compile(sys.argv[1],doraise=True)"
    try:
        subprocess.run(  # noqa: S603 — the person's own interpreter, checked, no shell
            [python, "-I", "-S", "-c", program, str(path)],
            capture_output=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SetupError(f"{python} cannot compile {path}: {exc}") from exc


def check(change: Change) -> str:
    """Why the written file would not load, or "" (JSON files parse; the plugin is there)."""
    if change.text is None or change.path.suffix != ".json":
        return ""
    try:
        json.loads(change.path.read_text())
    except (OSError, ValueError) as exc:
        return f"{change.path} does not read back as JSON: {exc}"
    return ""

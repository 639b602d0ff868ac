"""``agent-kanban runner``: the command line, and the one connection to the board.

Standard library only, and nothing of the board: this runs on people's machines. The
runner says hello (who it is: host, clients with their versions, repositories by name,
how many sessions it takes), then holds one long poll to the board at a time, outbound
only: the board answers a poll at once with any command queued for it, else when one is
sent, else after its poll period (``pollSeconds``). A command is answered on the next
poll (``acks``). When the board is away the runner retries, 1 s doubling to 30 s with
jitter, and says hello again once it is back. Between commands it waits in a blocking
read: no CPU.

Commands it takes now: ``ping`` (answered with a pong). Any other kind is answered as
refused, with the reason; the run commands come with the clients' adapters.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROGRAM = "agent-kanban runner"
# The coding clients a runner may start, by the board's name for each, and their binary.
CLIENT_BINARIES = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "qwen": "qwen",
    "copilot": "copilot",
    "opencode": "opencode",
}
TOKEN_ENV = "KANBAN_RUNNER_TOKEN"  # noqa: S105 — the variable's name, no secret
BACKOFF_FIRST = 1.0
BACKOFF_MOST = 30.0
# How much longer than the board's poll period a poll may take before it counts as lost.
POLL_SLACK_SECONDS = 15.0
VERSION_SECONDS = 15.0
# Until this slice's successor checks each client's hooks, no client is said to be gated.
GATE_UNCHECKED = "not checked: this runner starts no runs yet"
BOARD_URL = re.compile(r"^(?P<prefix>(?:/[^/]+)*?)/boards/(?P<slug>[-a-zA-Z0-9_]+)/?$")


class RunnerError(Exception):
    """What the person starting the runner must fix (a URL, a repository, the token):
    said once, and the runner stops."""


class BoardAway(Exception):
    """The board did not answer (down, unreachable, or answering 5xx): retry later."""


class Unregistered(Exception):
    """The board does not know this runner (yet, or any more): say hello again."""


@dataclass(frozen=True)
class Board:
    url: str  # as boards.json names it: http(s)://HOST:PORT/boards/<slug>/
    base: str  # http(s)://HOST:PORT[/prefix]
    slug: str

    def api(self, path: str) -> str:
        return f"{self.base}/api/boards/{self.slug}/{path}"


def board_of(url: str) -> Board:
    """The board a ``--url`` names (``http(s)://HOST:PORT/boards/<slug>/``)."""
    parts = urllib.parse.urlsplit(url.strip())
    found = BOARD_URL.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or found is None:
        raise RunnerError(f"{url!r} is not a board URL: give http(s)://HOST:PORT/boards/<slug>/")
    base = f"{parts.scheme}://{parts.netloc}{found['prefix']}"
    return Board(f"{base}/boards/{found['slug']}/", base, found["slug"])


@dataclass(frozen=True)
class Repo:
    """A repository the runner works in. Its path stays here: the board knows it by name
    and an opaque id."""

    name: str
    path: Path
    id: str
    branch: str

    def told(self) -> dict[str, str]:
        return {"name": self.name, "id": self.id, "branch": self.branch}


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 — git by name from PATH, fixed arguments, no shell
        ["git", "-C", str(path), *args],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def repo_of(spec: str) -> Repo:
    """A ``--repo`` (``PATH`` or ``NAME=PATH``): a git work tree, else a RunnerError."""
    name, sep, where = spec.partition("=")
    if not sep or "/" in name or not name:
        name, where = "", spec
    path = Path(where).expanduser()
    if not path.is_dir():
        raise RunnerError(f"--repo {spec}: {path} is not a folder")
    if shutil.which("git") is None:
        raise RunnerError("git is not on PATH: the runner works in git work trees")
    inside = _git(path, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise RunnerError(f"--repo {spec}: {path} is not a git work tree")
    top = Path(_git(path, "rev-parse", "--show-toplevel").stdout.strip()).resolve()
    branch = _git(top, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip()
    digest = hashlib.sha256(str(top).encode()).hexdigest()[:16]
    return Repo(name or top.name, top, digest, branch)


def version_of(binary: str, env: Mapping[str, str]) -> str:
    """What ``binary --version`` says, as its version number ("" when it will not say)."""
    try:
        done = subprocess.run(  # noqa: S603 — a client found on PATH, --version only
            [binary, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_SECONDS,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = re.search(r"\d+(?:\.\d+)+", done.stdout or done.stderr)
    return found.group(0) if found else ""


def clients_of(chosen: str | None, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The clients the runner offers: ``--clients a,b`` (board names or binaries), else
    every one found on PATH; each with its version. A named one not found is an error."""
    by_binary = {binary: name for name, binary in CLIENT_BINARIES.items()}
    path = env.get("PATH", os.defpath)
    if chosen is None:
        names = [
            name for name, binary in CLIENT_BINARIES.items() if shutil.which(binary, path=path)
        ]
    else:
        names = []
        for word in (w.strip() for w in chosen.split(",")):
            if not word:
                continue
            name = by_binary.get(word, word)
            if name not in CLIENT_BINARIES:
                raise RunnerError(
                    f"--clients: no client called {word!r}; the clients are "
                    + ", ".join(CLIENT_BINARIES)
                )
            if shutil.which(CLIENT_BINARIES[name], path=path) is None:
                raise RunnerError(f"--clients: {CLIENT_BINARIES[name]} is not on PATH")
            names.append(name)
    found = []
    for name in dict.fromkeys(names):
        binary = shutil.which(CLIENT_BINARIES[name], path=path) or CLIENT_BINARIES[name]
        found.append(
            {
                "client": name,
                "version": version_of(binary, env),
                "gate": False,
                "why": GATE_UNCHECKED,
            }
        )
    return found


def config_path(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/agent-kanban/boards.json`` (default ``~/.config/…``), the file
    ``agent-kanban connect`` writes."""
    base = env.get("XDG_CONFIG_HOME", "")
    if not base.startswith("/"):
        base = str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "agent-kanban" / "boards.json"


def token_of(board: Board, given: str, env: Mapping[str, str]) -> str:
    """The runner's token: ``--token``, else ``$KANBAN_RUNNER_TOKEN``, else this board's
    entry in boards.json's ``runners`` list (``{"url", "token"}``)."""
    if given.strip():
        return given.strip()
    if env.get(TOKEN_ENV, "").strip():
        return env[TOKEN_ENV].strip()
    path = config_path(env)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        data = {}
    except (OSError, ValueError) as exc:
        raise RunnerError(f"{path} cannot be read: {exc}") from None
    entries = data.get("runners") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("url") == board.url:
            token = entry.get("token")
            if isinstance(token, str) and token.strip():
                return token.strip()
    raise RunnerError(
        f"No runner token for {board.url}: pass --token, set ${TOKEN_ENV}, or add "
        f'{{"url": "{board.url}", "token": "…"}} to "runners" in {path} '
        f"(issue one with `agent-kanban issuetoken {board.slug} --runner NAME`)"
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Connection:
    """JSON over HTTP to one board with the runner's token."""

    board: Board
    token: str

    def post(self, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        # http(s) only: ``board_of`` refused any other scheme.
        request = urllib.request.Request(  # noqa: S310
            self.board.api(path),
            data=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                return _answer(response.read())
        except urllib.error.HTTPError as exc:
            answer = _answer(exc.read())
            found = answer.get("error")
            error: dict[str, Any] = found if isinstance(found, dict) else {}
            message = str(error.get("message") or exc.reason)
            if exc.code >= 500 or exc.code == 429:
                raise BoardAway(f"{exc.code} {message}") from None
            if exc.code == 404 and error.get("code") == "runner_unregistered":
                raise Unregistered(message) from None
            raise RunnerError(f"The board refused the runner ({exc.code}): {message}") from None
        except (OSError, ValueError) as exc:  # URLError, refused, reset, timed out
            raise BoardAway(str(getattr(exc, "reason", exc))) from None


def _answer(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def answer(command: Mapping[str, Any], *, host: str) -> dict[str, Any]:
    """The runner's answer to one command (an ack for its next poll): never an exception,
    whatever the board sent."""
    ident = command.get("id")
    kind = command.get("kind")
    if kind == "ping":
        return {"id": ident, "ok": True, "report": {"pong": True, "at": _now(), "host": host}}
    return {
        "id": ident,
        "ok": False,
        "why": f"this runner does not take {str(kind)[:40]!r} commands (it knows: ping)",
    }


@dataclass
class Runner:
    """The runner's one connection to its board: hello, then polls, answering each
    command on the next poll."""

    connection: Connection
    hello_body: dict[str, Any]
    say: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    acks: list[dict[str, Any]] = field(default_factory=list)
    poll_seconds: float = 25.0
    registered: bool = False

    def hello(self) -> None:
        told = self.connection.post("runners/hello", self.hello_body, timeout=30)
        self.poll_seconds = float(told.get("pollSeconds") or self.poll_seconds)
        found = told.get("runner")
        runner: dict[str, Any] = found if isinstance(found, dict) else {}
        self.registered = True
        self.say(
            f"runner {runner.get('name', '?')} connected to {self.connection.board.url} "
            f"(clients: {_listed(self.hello_body['clients'], 'client')}; "
            f"repos: {_listed(self.hello_body['repos'], 'name')})"
        )

    def poll(self) -> None:
        """One poll: this runner's answers go, the commands it is given are answered for
        the next one."""
        body = {"acks": self.acks, "running": 0}
        told = self.connection.post(
            "runners/poll", body, timeout=self.poll_seconds + POLL_SLACK_SECONDS
        )
        self.acks = []
        commands = told.get("commands")
        for command in commands if isinstance(commands, list) else []:
            if isinstance(command, dict):
                self.acks.append(answer(command, host=self.hello_body["host"]))

    def run(self, stopping: Callable[[], bool] = lambda: False) -> None:
        """Hello and polls until ``stopping()``; the board away is waited out with backoff.
        A refusal the person must fix (RunnerError) ends it."""
        delay = BACKOFF_FIRST
        while not stopping():
            try:
                if not self.registered:
                    self.hello()
                self.poll()
                delay = BACKOFF_FIRST
            except Unregistered:
                self.registered = False
            except BoardAway as away:
                self.registered = False
                wait = random.uniform(delay / 2, delay)
                self.say(f"board away ({away}); retrying in {wait:.1f} s")
                self.sleep(wait)
                delay = min(delay * 2, BACKOFF_MOST)


def _listed(rows: Sequence[Mapping[str, Any]], key: str) -> str:
    return ", ".join(str(row.get(key, "")) for row in rows) or "none"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The runner's options, on its own parser or the management command's."""
    parser.add_argument("--url", required=True, help="http(s)://HOST:PORT/boards/<slug>/")
    parser.add_argument(
        "--repo",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="a git work tree the runner works in (repeat for more); named by its folder",
    )
    parser.add_argument(
        "--name", default="", help="the runner's name (default: its token's runner name)"
    )
    parser.add_argument(
        "--max-sessions", type=int, default=2, help="sessions it runs at once (default 2)"
    )
    parser.add_argument(
        "--clients",
        default=None,
        help="the coding clients it may start, comma-separated (default: those on PATH of "
        + ", ".join(CLIENT_BINARIES.values())
        + ")",
    )
    parser.add_argument(
        "--token", default="", help=f"its runner token (default: ${TOKEN_ENV}, or boards.json)"
    )


def prepare(options: Mapping[str, Any], env: Mapping[str, str]) -> Runner:
    """The runner the options describe, each checked (a RunnerError says what is wrong)."""
    board = board_of(options["url"])
    if not 1 <= int(options["max_sessions"]) <= 64:
        raise RunnerError("--max-sessions: 1 to 64")
    repos = [repo_of(spec) for spec in options["repo"]]
    names = [r.name for r in repos]
    if len(set(names)) != len(names):
        raise RunnerError(
            f"--repo: two repositories are named alike ({', '.join(names)}): "
            "name them with NAME=PATH"
        )
    token = token_of(board, options.get("token") or "", env)
    body: dict[str, Any] = {
        "host": socket.gethostname(),
        "version": "1",
        "clients": clients_of(options.get("clients"), env),
        "repos": [r.told() for r in repos],
        "maxSessions": int(options["max_sessions"]),
    }
    if options.get("name"):
        body["name"] = options["name"]
    return Runner(Connection(board, token), body, say=_say)


def _say(line: str) -> None:
    print(f"{PROGRAM}: {line}", file=sys.stderr, flush=True)


def serve(options: Mapping[str, Any], env: Mapping[str, str] | None = None) -> int:
    """Run until stopped (SIGTERM, SIGINT); 0 when stopped, 2 on a RunnerError."""
    try:
        runner = prepare(options, os.environ if env is None else env)
    except RunnerError as exc:
        _say(str(exc))
        return 2

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        runner.run()
    except RunnerError as exc:
        _say(str(exc))
        return 2
    except KeyboardInterrupt:
        _say("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return serve(vars(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

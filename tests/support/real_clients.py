"""Running the real coding CLIs (pinned in tests/<cli>/) headless in a scratch HOME set up
by ``connect`` alone, against a live board and a scripted stand-in of their model API."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.liveserver import ROOT, Cluster, free_port, session_cookie
from tests.support.npm import npm_ci

TESTS = ROOT / "tests"


@dataclass
class Machine:
    """A person's machine: a scratch HOME, a folder of its own on PATH, and a project.

    Its clients run the hooks as ``connect`` writes them: this checkout's forwarder in its
    fast form (the Python that ran ``connect``, ``-I -S``), so nothing named kanban-hook
    is on PATH and the PYTHONPATH the clients pass on is not read.
    """

    home: Path
    bin: Path
    project: Path

    @classmethod
    def make(cls, root: Path) -> Machine:
        machine = cls(root / "home", root / "bin", root / "project")
        for folder in (machine.home, machine.bin, machine.project):
            folder.mkdir(parents=True, exist_ok=True)
        return machine

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT),
            **extra,
        }

    def connect(
        self,
        cluster: Cluster,
        url: str,
        token: str,
        *clients: str,
        env: dict[str, str] | None = None,
    ) -> str:
        """``connect`` run as the person would, in the environment their clients see."""
        args = [arg for client in clients for arg in ("--client", client)]
        environment = {k: v for k, v in self.env(**(env or {})).items() if k != "PYTHONPATH"}
        environment.setdefault("CODEX_HOME", str(self.home / ".codex"))
        return cluster.manage("connect", "--url", url, "--token", token, *args, env=environment)


def deny_pushes(cluster: Cluster, slug: str, note: str) -> None:
    """Board ``slug`` denies a shell ``git push`` (saying ``note``), in place of the default
    rule that asks a person about it (which comes first, and would decide)."""
    listed = cluster.manage(
        "gaterules",
        slug,
        "--add",
        "Bash",
        "--pattern",
        r"\bgit\s+push\b",
        "--decision",
        "deny",
        "--note",
        note,
    )
    [default] = [line.split("\t")[0] for line in listed.splitlines() if line.endswith("git push")]
    cluster.manage("gaterules", slug, "--remove", default)


def binary(cli: str, relative: str) -> Path:
    """The pinned CLI's entry point (``npm ci`` first when missing)."""
    folder = TESTS / cli
    npm_ci(folder)
    return folder / "node_modules" / relative


def run(args: list[str], machine: Machine, env: dict[str, str], timeout: float = 180) -> str:
    done = subprocess.run(
        args,
        cwd=machine.project,
        env=machine.env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def board_down(machine: Machine) -> str:
    """Point ``boards.json`` at a port nothing listens on (the board is down); its URL."""
    path = machine.home / ".config" / "agent-kanban" / "boards.json"
    config = json.loads(path.read_text())
    url = f"http://127.0.0.1:{free_port()}/boards/team/"
    for entry in config["boards"]:
        entry["url"] = url
    path.write_text(json.dumps(config))
    return url


@dataclass(frozen=True)
class Decision:
    """What a person saw of a held call and did with it."""

    call: str  # the call's id
    action: str  # "approve", "deny", "approve-board", …
    subject: str  # the Needs-you item's subject: the tool and the command
    shown: str  # the call's item on the board page, as its text reads


@dataclass
class Person:
    """A board's approver in a browser: decides held calls through the board's decide URLs
    (as the Needs-you buttons post them): the first held call shown on the board
    (``approve_soon``), or the calls of given commands (``decide_soon``)."""

    base: str
    slug: str
    cookie: str
    approved: list[str] = field(default_factory=list)
    decided: list[Decision] = field(default_factory=list)

    @classmethod
    def make(cls, cluster: Cluster, base: str, slug: str, name: str) -> Person:
        cluster.user(name, "a long pass phrase")
        cluster.manage("addmember", slug, name, "approver")
        return cls(base, slug, session_cookie(base, name, "a long pass phrase"))

    def _open(self, path: str, data: bytes | None = None) -> str:
        csrf = re.search(r"csrftoken=([^;]+)", self.cookie)
        headers = {"Cookie": self.cookie, "Referer": self.base + path}
        if csrf:
            headers["X-CSRFToken"] = csrf.group(1)
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode()

    def approve_soon(self, timeout: float = 120) -> threading.Thread:
        """In the background: wait for a held call on the board, then approve it."""

        def approve() -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                page = self._open(f"/boards/{self.slug}/")
                held = re.search(rf"/boards/{self.slug}/calls/(\d+)/approve/", page)
                if held:
                    self._open(held.group(0), data=b"note=fine")
                    self.approved.append(held.group(1))
                    return
                time.sleep(0.5)

        worker = threading.Thread(target=approve, daemon=True)
        worker.start()
        return worker

    def held(self, command: str) -> dict[str, Any] | None:
        """The Needs-you item (as ``/api/inbox`` lists it) of a call of exactly ``command``
        that waits for a person on this board, or None."""
        for item in json.loads(self._open("/api/inbox"))["items"]:
            if (
                item["board"] == self.slug
                and item["id"].startswith("call-")
                and item["subject"].endswith(f": {command}")
                and any(a["action"] == "deny" for a in item["actions"])
            ):
                return item
        return None

    def shown(self, call: str) -> str:
        """The text of call ``call``'s item on the board page (its Needs-you strip)."""
        page = self._open(f"/boards/{self.slug}/")
        start = page.find(f'data-call="{call}"')
        if start < 0:
            return ""
        end = page.find('class="need need--', start)
        fragment = page[start : end if end > 0 else len(page)]
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())

    def decide_soon(
        self, steps: list[tuple[str, str]], note: str = "", timeout: float = 120
    ) -> Deciding:
        """In the background, for each ``(action, command)`` in turn: wait for the held call
        of exactly ``command``, read its item on the board page, then post ``action``
        ("approve", "deny", "approve-session", "approve-board") with ``note``. Each step
        done is in the worker's ``decided`` (and the person's); a step not reached by
        ``timeout`` (or by ``stop()``) is in its ``errors``."""
        worker = Deciding(self, steps, note, timeout)
        worker.start()
        return worker


class Deciding(threading.Thread):
    """A person deciding held calls in the background (``Person.decide_soon``)."""

    def __init__(self, person: Person, steps: list[tuple[str, str]], note: str, timeout: float):
        super().__init__(daemon=True)
        self.person, self.steps, self.note, self.timeout = person, steps, note, timeout
        self.decided: list[Decision] = []
        self.errors: list[str] = []
        self._stop_asked = threading.Event()

    def stop(self) -> None:
        """Stop waiting (the steps not reached go to ``errors``)."""
        self._stop_asked.set()
        self.join(timeout=10)

    def run(self) -> None:
        try:
            self._decide()
        except Exception as exc:  # the test reads it: a thread's exception is lost
            self.errors.append(repr(exc))

    def _decide(self) -> None:
        person = self.person
        deadline = time.monotonic() + self.timeout
        for action, command in self.steps:
            while (item := person.held(command)) is None:
                if time.monotonic() > deadline or self._stop_asked.wait(0.2):
                    self.errors.append(f"no held call of {command!r}")
                    return
            [url] = [a["url"] for a in item["actions"] if a["action"] == action]
            call = item["id"].removeprefix("call-")
            shown = person.shown(call)
            person._open(url, data=urllib.parse.urlencode({"note": self.note}).encode())
            done = Decision(call, action, item["subject"], shown)
            self.decided.append(done)
            person.decided.append(done)


def agents(base: str, slug: str, token: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{base}/api/boards/{slug}/agents", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["agents"]


def sessions(base: str, slug: str, token: str) -> list[dict[str, Any]]:
    return [a["session"] for a in agents(base, slug, token) if a.get("session")]


__all__ = [
    "Decision",
    "Machine",
    "Person",
    "agents",
    "binary",
    "board_down",
    "os",
    "run",
    "sessions",
]

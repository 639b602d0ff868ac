"""Installing like other tools (SPEC §15): the wheel, built from these sources, goes into a
fresh virtual environment outside the checkout, and its one command, ``agent-kanban``,
serves a board whose data lives in the user's data directory.

The wheel is built once per run (a module fixture), from a copy of the sources, so that
building writes nothing (build/, *.egg-info) into the checkout. Installing its
dependencies takes the package index; CI's first pass runs this (``slow``).
"""

import http.cookiejar
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from boards.management.commands.up import port_taken
from boards.models import Board
from devtools.liveserver import ROOT

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


# -- `up` and a taken port (quick, in-process) ----------------------------------------------


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 something else already listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.django_db
def test_up_on_a_taken_port_fails_before_printing_an_address_or_a_password(listening, capsys):
    with pytest.raises(CommandError, match=rf"Cannot serve on 127\.0\.0\.1:{listening}: .*--port"):
        call_command("up", host="127.0.0.1", port=listening)
    assert capsys.readouterr().out == ""
    # Nothing was prepared either: no login whose password nobody saw, no demo board.
    assert not get_user_model().objects.exists()
    assert not Board.objects.exists()


def test_port_taken_names_why_and_passes_a_free_port(listening):
    assert port_taken("127.0.0.1", listening)
    assert port_taken("no-such-host.invalid", 8000).startswith("the address does not resolve")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert port_taken("127.0.0.1", free) is None


# -- the wheel, installed outside the checkout (slow) ---------------------------------------


@dataclass
class Installed:
    wheel: Path
    command: Path  # the venv's agent-kanban
    env: dict[str, str]  # no checkout on the path, HOME and XDG_DATA_HOME in the temp folder
    data: Path  # where the user's data directory should be
    work: Path  # an empty folder to start the board in

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.command), *arguments],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )


def clean_environment() -> dict[str, str]:
    """This process's environment without what points at the checkout or its settings."""
    return {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL", "REDIS_URL", "SECRET_KEY"}
        and not name.startswith(("DJANGO_", "KANBAN_", "PYTEST_", "ALLOWED_HOSTS"))
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    sources = base / "sources"
    shutil.copytree(
        ROOT,
        sources,
        ignore=shutil.ignore_patterns(
            ".git", "node_modules", "build", "dist", "*.egg-info", "__pycache__", "*_cache",
            "staticfiles", ".venv", "*.sqlite3*", "tests",
        ),
    )  # fmt: skip
    clean = clean_environment()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", base / "dist", sources],
        env=clean,
        check=True,
        timeout=300,
    )
    (wheel,) = (base / "dist").glob("agent_kanban-*.whl")
    subprocess.run([sys.executable, "-m", "venv", base / "venv"], check=True, timeout=120)
    subprocess.run(
        [base / "venv/bin/python", "-m", "pip", "install", "-q", wheel],
        env=clean,
        check=True,
        timeout=600,
    )
    work = base / "work"
    work.mkdir()
    env = {
        **clean,
        "HOME": str(base / "home"),
        "XDG_DATA_HOME": str(base / "data"),
        "PYTHONUNBUFFERED": "1",
    }
    return Installed(wheel, base / "venv/bin/agent-kanban", env, base / "data/agent-kanban", work)


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_the_wheel_carries_templates_static_files_migrations_the_demo_and_the_license(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for name in [
        "kanban/cli.py",
        "kanban/templates/base.html",
        "kanban/templates/registration/login.html",
        "kanban/static/app.css",
        "kanban/static/vendor/htmx-4.0.1/htmx.min.js",
        "boards/migrations/0001_initial.py",
        "devtools/management/commands/demo.py",
        "devtools/demo/team.py",
        f"agent_kanban-{VERSION}.dist-info/licenses/LICENSE",
    ]:
        assert name in names
    # Every template and static file of the checkout, none left behind.
    for folder in ("templates", "static"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file():
                assert f"kanban/{path.relative_to(ROOT)}" in names


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_agent_kanban_answers_its_version_and_lists_every_management_command(installed):
    answer = installed.run("--version")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == f"agent-kanban {VERSION}"

    listing = installed.run("help")
    assert listing.returncode == 0, listing.stderr
    assert "Type 'agent-kanban help <subcommand>'" in listing.stdout
    for command in ["up", "demo", "issuetoken", "createboard", "invite", "migrate"]:
        assert re.search(rf"^\s+{command}$", listing.stdout, re.MULTILINE), command

    demo = installed.run("demo", "--help")
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.startswith("usage: agent-kanban demo")

    # connect from the wheel: it prints what it would write for Claude Code, and writes
    # nothing (the board's address and token only said, not kept).
    url = "http://127.0.0.1:9/boards/demo/"
    args = ("connect", "--url", url, "--token", "ak_x", "--client", "claude-code", "--dry-run")
    dry = installed.run(*args)
    assert dry.returncode == 0, dry.stderr
    assert "would write" in dry.stdout
    # The fast form: the venv's own Python, -I -S, the forwarder's copy beside boards.json
    # (out of the agents' reach: the wheel's own copy lies in a folder they may write).
    home = Path(installed.env["HOME"])
    fast = re.search(
        rf"({re.escape(str(installed.command.parent))}/python[0-9.]*) -I -S -c "
        r"'import sys;sys.path.append\(sys.argv.pop\(1\)\);import forwarder;"
        rf"sys.exit\(forwarder.main\(\)\)' {re.escape(str(home))}/\.config/agent-kanban "
        r"--client claude-code --timeout 3630 \|\| ",
        dry.stdout,
    )
    assert fast, dry.stdout
    assert not (home / ".claude").exists()
    assert not (home / ".config" / "agent-kanban").exists()
    assert not list(installed.work.iterdir())

    # Written for real (in a HOME of its own), its gated command runs from the wheel: the
    # board at port 9 is away, so the call is blocked, naming it.
    elsewhere = installed.work.parent / "connect-home"
    elsewhere.mkdir()
    env = {**installed.env, "HOME": str(elsewhere)}
    subprocess.run(
        [str(installed.command), *args[:-1]], env=env, check=True, capture_output=True, timeout=60
    )
    settings = json.loads((elsewhere / ".claude" / "settings.json").read_text())
    gate = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    event = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}
    blocked = subprocess.run(
        ["/bin/sh", "-c", gate],
        input=json.dumps(event),
        env={"HOME": str(elsewhere), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert blocked.returncode == 2, blocked
    assert "The Agent Kanban board at http://127.0.0.1:9/" in blocked.stderr


class Server:
    """``agent-kanban up`` in the work folder, its output read line by line."""

    def __init__(self, installed: Installed, port: int) -> None:
        self.process = subprocess.Popen(
            [str(installed.command), "up", "--port", str(port)],
            cwd=installed.work,
            env=installed.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = f"http://127.0.0.1:{port}"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def printed(self) -> str:
        """What it printed so far."""
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return "".join(self.output)

    def until(self, marker: str, seconds: float = 60) -> str:
        """The output up to the line with marker (all of it)."""
        deadline = time.monotonic() + seconds
        while not any(marker in line for line in self.output):
            try:
                self.output.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {marker!r} in: {''.join(self.output)}") from None
        return "".join(self.output)

    def wait_until_serving(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/login/", timeout=2).close()
                return
            except (urllib.error.URLError, ConnectionError):
                assert self.process.poll() is None, self.printed()
                assert time.monotonic() < deadline, "the server never answered"
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tool(url: str, token: str, name: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/api/boards/demo/tools/{name}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        return json.load(answer)


@pytest.mark.slow
@pytest.mark.xdist_group("wheel")
def test_agent_kanban_up_serves_a_board_with_its_data_in_the_user_data_directory(installed):
    port = free_port()
    server = Server(installed, port)
    try:
        printed = server.until("Agent Kanban on")
        password = re.search(r"Created login: admin / (\S+)", printed)
        token = re.search(r"Created board 'demo' with an agent token: (\S+)", printed)
        assert password and token, printed
        assert f"Data directory: {installed.data}" in printed
        assert f"Agent Kanban on {server.url}/" in printed
        server.wait_until_serving()

        # The login page with its static files, served from the installed package.
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        with browser.open(f"{server.url}/login/", timeout=10) as page:
            html = page.read().decode()
        assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', html)
        assert any(a.endswith(".css") for a in assets) and any(a.endswith(".js") for a in assets)
        for asset in assets:
            with urllib.request.urlopen(f"{server.url}{asset}", timeout=10) as answer:
                assert answer.status == 200 and answer.read()

        # The printed password logs in, and the board page renders.
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        assert csrf
        form = {"username": "admin", "password": password[1], "csrfmiddlewaretoken": csrf[1]}
        login = urllib.request.Request(
            f"{server.url}/login/",
            data=urllib.parse.urlencode(form).encode(),
            headers={"Referer": f"{server.url}/login/"},
        )
        with browser.open(login, timeout=10) as answer:
            assert answer.url == f"{server.url}/boards/"
        with browser.open(f"{server.url}/boards/demo/", timeout=10) as board:
            assert "Demo board" in board.read().decode()

        # The printed token works: a tool call writes, another reads.
        created = tool(server.url, token[1], "TaskCreate", {"subject": "Kept across restarts"})
        listed = tool(server.url, token[1], "TaskList", {})
        assert [t["subject"] for t in listed["tasks"]] == ["Kept across restarts"]
        assert created["task"]["id"] == listed["tasks"][0]["id"]

        # A second board on the same port is refused before it prints anything useful.
        second = installed.run("up", "--port", str(port))
        assert second.returncode == 1
        assert "Agent Kanban on" not in second.stdout and "Created" not in second.stdout
        assert f"Cannot serve on 127.0.0.1:{port}" in second.stderr
    finally:
        server.stop()

    # Nothing in the folder it was started from; the database and the generated secret
    # key (the owner's alone) in the user's data directory.
    assert not list(installed.work.iterdir())
    assert (installed.data / "db.sqlite3").is_file()
    assert (installed.data / "secret_key").stat().st_mode & 0o777 == 0o600
    secret = (installed.data / "secret_key").read_text()

    # Restarted, it finds its data: the same login (no new password), the same token and task.
    server = Server(installed, port)
    try:
        printed = server.until("Agent Kanban on")
        assert "Created" not in printed
        assert "change it with: agent-kanban changepassword admin" in printed
        server.wait_until_serving()
        listed = tool(server.url, token[1], "TaskList", {})
        assert [t["subject"] for t in listed["tasks"]] == ["Kept across restarts"]
    finally:
        server.stop()
    assert (installed.data / "secret_key").read_text() == secret
    assert not list(installed.work.iterdir())

"""``connect`` against an agent that would switch its supervision off (issue #42): a
killed hook blocks where the client can say so, the forwarder and its interpreter lie
out of the agent's reach, managed scope for the clients that have one, and the files it
writes are written as the person left them (modes, links) and never through a planted
link, a FIFO or a device; ``--remove`` takes out only its own hooks."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.management import CommandError

from boards.clients import registry, setup
from devtools.liveserver import ROOT
from tests.clients.test_connect import connect
from tests.clients.test_real_clients import CLIS
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse
from tests.support.claude_cli import run_claude
from tests.support.hook_server import HookServer, allow, deny
from tests.support.model_standins import Say, Standin
from tests.support.real_clients import Machine, run

URL = "http://127.0.0.1:8000/boards/team/"
TOKEN = "ak_test_token_123456"
CLAUDE = ("--client", "claude-code")


def hooks_of(settings: dict, event: str) -> list[dict]:
    return [h for entry in settings["hooks"][event] for h in entry["hooks"]]


# -- a killed hook blocks (Claude Code's onFailure) ------------------------------------------


def test_every_gated_command_hook_of_claude_code_blocks_when_it_fails(home):
    connect(*[a for n in registry.NAMES for a in ("--client", n)], "--token", TOKEN)

    claude = json.loads((home / ".claude/settings.json").read_text())
    for event in ("PreToolUse", "PreSkillShellCommand", "TaskCompleted"):
        [hook] = hooks_of(claude, event)
        assert hook["onFailure"] == "block", event
    for event in ("SessionStart", "PostToolUse", "Stop"):
        [hook] = hooks_of(claude, event)
        assert "onFailure" not in hook, event  # an after-call event never blocks
    # The others have no such setting: nothing they would refuse to load is written.
    for path in (".codex/hooks.json", ".gemini/settings.json", ".qwen/settings.json"):
        assert "onFailure" not in (home / path).read_text(), path


def test_the_connect_page_table_says_per_client_whether_a_killed_hook_blocks():
    sayings = {row.name: row.killed_hook for row in registry.CLIENTS}
    for name in ("claude-code", "copilot", "opencode"):
        assert sayings[name].startswith("blocks the call"), name
    for name in ("codex", "gemini", "qwen"):
        assert sayings[name].startswith("runs the call"), name


# -- the forwarder and its interpreter out of the agent's reach ---------------------------------


def project(tmp_path: Path) -> Path:
    """A project an agent works in: a git work tree."""
    folder = tmp_path / "work" / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def venv(folder: Path, python: Path) -> Path:
    """A venv in ``folder`` whose ``bin/python`` is ``python`` (as ``python -m venv`` links)."""
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    link = folder / ".venv" / "bin" / "python"
    link.symlink_to(python)
    return link


def test_a_project_venv_linking_a_system_python_gives_the_hooks_that_python(home, tmp_path):
    work = project(tmp_path)
    link = venv(work, Path(os.path.realpath(sys.executable)))

    out = connect("--client", "claude-code", "--token", TOKEN, "--python", str(link))

    gate = hooks_of(json.loads((home / ".claude/settings.json").read_text()), "PreToolUse")[0]
    assert gate["command"].startswith(os.path.realpath(sys.executable) + " -I -S -c ")
    assert str(link) not in gate["command"]
    assert "links to" in out


def test_an_interpreter_inside_the_project_is_refused(home, tmp_path, monkeypatch):
    work = project(tmp_path)
    copied = work / "tools" / "python3"
    copied.parent.mkdir()
    copied.write_bytes(b"#!/bin/sh\nexit 0\n")  # what `ln -sf /bin/true` would make of it
    copied.chmod(0o755)
    monkeypatch.chdir(work)

    with pytest.raises(CommandError, match="within an agent's reach"):
        connect("--client", "claude-code", "--token", TOKEN, "--python", str(copied))
    assert not (home / ".claude").exists()


def test_a_venv_of_its_own_inside_a_git_work_tree_is_refused_from_any_folder(home, tmp_path):
    work = project(tmp_path)
    real = work / ".venv" / "bin" / "python3.11"
    venv(work, real)
    real.write_bytes(b"#!/bin/sh\nexit 0\n")
    real.chmod(0o755)

    with pytest.raises(CommandError, match=r"venv .*inside the git work tree"):
        connect("--client", "claude-code", "--token", TOKEN, "--python", str(real))


def test_the_hooks_import_the_copy_beside_boards_json_not_the_checkout(home):
    connect("--client", "claude-code", "--token", TOKEN)

    config = home / ".config" / "agent-kanban"
    gate = hooks_of(json.loads((home / ".claude/settings.json").read_text()), "PreToolUse")[0]
    assert f" {config} --client claude-code " in gate["command"]
    assert str(ROOT) not in gate["command"]
    # Run as written with the checkout's forwarder out of the way (PYTHONPATH unread, -I):
    # it answers from the copy, blocking for want of a board at 127.0.0.1:8000.
    result = subprocess.run(
        ["/bin/sh", "-c", gate["command"]],
        input=json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}),
        capture_output=True,
        text=True,
        cwd="/",
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "kanban-hook did not run" not in result.stderr  # the copy ran, and said why
    assert "http://127.0.0.1:8000/api/boards/team/hooks/claude-code" in result.stderr


# -- managed scope --------------------------------------------------------------------------------


def test_system_scope_writes_each_clients_managed_settings(tmp_path):
    home = setup.Home(tmp_path / "home", {}, root=tmp_path / "root")
    hook = setup.forwarder(sys.executable, home.forwarder_dir(True))
    changes = {
        client: setup.client_change(client, home, hook=hook, remove=False, system=True)
        for client in setup.SYSTEM_SETTINGS
    }

    assert {
        c: str(change.path.relative_to(tmp_path / "root")) for c, change in changes.items()
    } == {
        "claude-code": "etc/claude-code/managed-settings.json",
        "codex": "etc/codex/hooks.json",
        "gemini": "etc/gemini-cli/settings.json",
        "qwen": "etc/qwen-code/settings.json",
    }
    assert home.forwarder_dir(True) == tmp_path / "root" / "etc" / "agent-kanban"
    claude = json.loads(changes["claude-code"].text or "")
    assert hooks_of(claude, "PreToolUse")[0]["onFailure"] == "block"
    assert (
        f" {tmp_path / 'root/etc/agent-kanban'} --client"
        in hooks_of(claude, "PreToolUse")[0]["command"]
    )
    assert json.loads(changes["qwen"].text or "")["disableAllHooks"] is False
    assert json.loads(changes["gemini"].text or "")["hooksConfig"] == {"enabled": True}
    for client in ("copilot", "opencode"):
        with pytest.raises(setup.SetupError, match="no managed"):
            setup.client_change(client, home, hook=hook, remove=False, system=True)


def test_system_scope_removal_takes_out_the_hooks_and_the_key_it_set(tmp_path):
    home = setup.Home(tmp_path / "home", {}, root=tmp_path / "root")
    hook = setup.forwarder(sys.executable, home.forwarder_dir(True))
    setup.apply(setup.client_change("qwen", home, hook=hook, remove=False, system=True))

    removed = setup.client_change("qwen", home, hook=hook, remove=True, system=True)

    assert json.loads(removed.text or "") == {}


# -- the files, written as the person left them ---------------------------------------------


def test_a_0600_settings_file_stays_0600(home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}')
    settings.chmod(0o600)

    connect("--client", "claude-code", "--token", TOKEN)

    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert json.loads(settings.read_text())["model"] == "opus"


def test_a_symlinked_settings_file_is_written_through_and_stays_a_link(home, tmp_path):
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "opus"}')
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.symlink_to(dotfiles)

    connect("--client", "claude-code", "--token", TOKEN)

    assert settings.is_symlink() and settings.resolve() == dotfiles
    data = json.loads(dotfiles.read_text())
    assert data["model"] == "opus" and "PreToolUse" in data["hooks"]


def test_a_planted_temporary_file_link_is_never_followed(home, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    folder = home / ".claude"
    folder.mkdir()
    for name in ("settings.json.agent-kanban-tmp", ".settings.json.agent-kanban-tmp"):
        (folder / name).symlink_to(victim)

    connect("--client", "claude-code", "--token", TOKEN)

    assert victim.read_text() == "precious\n"
    settings = folder / "settings.json"
    assert settings.is_file() and not settings.is_symlink()
    assert "PreToolUse" in json.loads(settings.read_text())["hooks"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_in_place_of_the_settings_is_refused_at_once(home, kind):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(settings)
    else:
        settings.symlink_to("/dev/zero")  # a device, through a link: reading it never ends
    # In a process of its own: the old connect hung on a FIFO, and a test must not.
    result = subprocess.run(
        [sys.executable, "manage.py", "connect", "--url", URL, *CLAUDE, "--token", TOKEN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        timeout=60,
        check=False,
    )

    assert result.returncode != 0
    assert "is not a regular file" in result.stderr
    assert stat.S_ISFIFO(os.stat(settings).st_mode) or settings.is_symlink()


# -- --remove takes out only its own ------------------------------------------------------------


def test_remove_keeps_a_persons_hook_that_merely_mentions_kanban_hook(home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {
        "hooks": [
            {"type": "command", "command": "kanban-hook --client claude-code --timeout 10; ./me"}
        ]
    }
    settings.write_text(json.dumps({"hooks": {"Stop": [theirs]}}))

    connect("--client", "claude-code", "--token", TOKEN)
    connect("--client", "claude-code", "--remove")

    assert json.loads(settings.read_text()) == {"hooks": {"Stop": [theirs]}}


def test_remove_takes_our_hooks_out_of_an_entry_the_person_edited_and_keeps_theirs(home):
    connect("--client", "claude-code", "--token", TOKEN)
    settings = home / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    mine = {"type": "command", "command": "./audit.sh"}
    data["hooks"]["PreToolUse"][0]["hooks"].append(mine)  # their hook in our matcher group
    settings.write_text(json.dumps(data))

    connect("--client", "claude-code", "--token", TOKEN)  # a rerun: ours once, theirs kept
    rerun = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert [h["command"] for e in rerun for h in e["hooks"]].count("./audit.sh") == 1
    assert sum(setup.ours(h["command"]) for e in rerun for h in e["hooks"]) == 1

    connect("--client", "claude-code", "--remove")

    assert json.loads(settings.read_text()) == {
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [mine]}]}
    }


# -- the real Claude Code, its hook killed over and over (issue #42's loop) -------------------


class KillLoop:
    """Kills, by pid and over and over, every process whose command line names ``mark``
    (the folder connect copied the forwarder to: unique to this test, so only the hooks
    of this test's session match), as ``pkill -f 'import forwar[d]er'`` in a loop did,
    from outside the session."""

    def __init__(self, mark: str) -> None:
        self.mark = mark.encode()
        self.kills = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> KillLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.done.wait(0.005):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry.name}/cmdline", "rb") as file:
                        if self.mark not in file.read():
                            continue
                    os.kill(int(entry.name), signal.SIGKILL)
                    self.kills += 1
                except OSError:  # gone already
                    continue


def connected_home(home: Path, board_url: str, *, on_failure: bool = True) -> None:
    """What ``connect --client claude-code`` writes into ``home`` (``on_failure`` False:
    as it wrote before ``onFailure``)."""
    where = setup.Home(home, {})
    hook = setup.forwarder(sys.executable, where.forwarder_dir(False))
    change = setup.client_change("claude-code", where, hook=hook, remove=False, system=False)
    if not on_failure:
        change.text = (change.text or "").replace(',\n            "onFailure": "block"', "")
        assert "onFailure" not in change.text
    board = setup.board_of(board_url)
    for each in (
        setup.forwarder_change(where, python=sys.executable, system=False),
        change,
        setup.boards_change(where, board, TOKEN, "", remove=False),
    ):
        setup.apply(each)


@pytest.mark.slow
@pytest.mark.parametrize("on_failure", [True, False], ids=["as connect writes it", "without"])
def test_a_killed_hook_blocks_the_call_in_the_real_claude_code(tmp_path, on_failure):
    with HookServer() as board:
        board.hold.set()  # the board holds the call (a person deciding): the hook waits
        board_url = board.url.replace("api/boards/ops/hooks/claude-code", "boards/ops/")
        connected_home(tmp_path / "home", board_url, on_failure=on_failure)
        mark = str(tmp_path / "home" / ".config" / "agent-kanban")
        script = [ToolUse("Bash", {"command": "touch ran", "description": "t"}), Text("Done.")]
        with AnthropicStandin(script) as api, KillLoop(mark) as loop:
            run = run_claude(
                "Touch a file.", api_url=api.url, workdir=tmp_path, allowed_tools=["Bash"]
            )
        board.hold.clear()

    assert loop.kills > 0, run.stderr
    if on_failure:
        assert not (run.project / "ran").exists(), run.messages
        [result] = api.tool_results()
        assert result.is_error, result
    else:  # what the loop did before: the denied-or-held call ran
        assert (run.project / "ran").exists(), run.messages


@pytest.mark.slow
def test_a_repository_env_naming_another_board_sends_it_nothing_in_the_real_claude_code(
    tmp_path,
):
    # The attack of issue #42: a repository's .claude/settings.json exports another
    # board's URL (and the person's token): that board would sign "allow" with any token.
    with HookServer() as mine, HookServer() as theirs:
        mine.answers["PreToolUse"] = deny("Not on main")
        theirs.answers["PreToolUse"] = allow("anything goes")
        connected_home(
            tmp_path / "home",
            mine.url.replace("api/boards/ops/hooks/claude-code", "boards/ops/"),
        )
        repository = tmp_path / "project" / ".claude"
        repository.mkdir(parents=True)
        env = {"KANBAN_HOOK_URL": theirs.url, "KANBAN_TOKEN": TOKEN}
        (repository / "settings.json").write_text(json.dumps({"env": env}))
        script = [ToolUse("Bash", {"command": "touch ran", "description": "t"}), Text("Done.")]
        with AnthropicStandin(script) as api:
            run = run_claude(
                "Touch a file.", api_url=api.url, workdir=tmp_path, allowed_tools=["Bash"]
            )

    assert theirs.calls == []
    assert not (run.project / "ran").exists(), run.messages
    [result] = api.tool_results()
    assert result.is_error and "KANBAN_HOOK_URL is not a configured board" in result.text


@pytest.mark.slow
@pytest.mark.parametrize("client", ["codex", "copilot", "gemini", "qwen"])
def test_what_each_other_real_client_does_when_its_gated_hook_is_killed(tmp_path, client):
    """What the Connect page's "A killed hook" column says, tried: the gated hook's shell
    kills itself (``kill -KILL $$``, as the kill loop would), and the call runs or not.
    A client that changes this fails here first."""
    cli = CLIS[client]
    machine = Machine.make(tmp_path)
    api = Standin([cli.shell("touch ran"), Say("Done.")], cli.dialect)
    try:
        env = cli.prepare(machine, api.url, tmp_path / "cache")
        where = setup.Home(machine.home, {k: v for k, v in env.items() if k.endswith("_HOME")})
        # Everything after the # is a comment: the shell dies by the signal, guard and all.
        setup.apply(
            setup.client_change(client, where, hook="kill -KILL $$ #", remove=False, system=False)
        )
        outcome = run(cli.command(machine), machine, env, timeout=240)
    finally:
        api.close()

    ran = (machine.project / "ran").exists()
    blocks = registry.BY_NAME[client].killed_hook.startswith("blocks the call")
    assert ran is not blocks, outcome

"""``python manage.py connect`` (SPEC §13): each client's user hooks written into a
scratch HOME, merged into what its settings already say, updated by a rerun and taken
out by ``--remove``; the board and token in boards.json, mode 0600."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from boards.clients import registry
from boards.models import AgentToken
from tests.support.factories import make_board

URL = "http://127.0.0.1:8000/boards/team/"
TOKEN = "ak_test_token_123456"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # nothing installed unless a test says
    for name in ("XDG_CONFIG_HOME", "CODEX_HOME", "COPILOT_HOME", "KANBAN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def connect(*args: str) -> str:
    out = io.StringIO()
    call_command("connect", "--url", URL, *args, stdout=out)
    return out.getvalue()


def every_client() -> list[str]:
    return [arg for name in registry.NAMES for arg in ("--client", name)]


def commands(settings: dict) -> list[str]:
    return [
        h["command"] for entries in settings["hooks"].values() for e in entries for h in e["hooks"]
    ]


def test_each_client_gets_its_hooks_where_it_reads_them(home):
    out = connect(*every_client(), "--token", TOKEN)

    claude = json.loads((home / ".claude/settings.json").read_text())
    [pre] = claude["hooks"]["PreToolUse"]
    assert pre["matcher"] == "*"
    assert pre["hooks"][0]["command"] == "kanban-hook --client claude-code --timeout 3630"
    assert set(claude["hooks"]) == set(registry.BY_NAME["claude-code"].events)
    codex = json.loads((home / ".codex/hooks.json").read_text())
    assert "--client codex" in codex["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    gemini = json.loads((home / ".gemini/settings.json").read_text())
    [before] = gemini["hooks"]["BeforeTool"]
    assert before["hooks"][0]["timeout"] == (3630 + 30) * 1000  # milliseconds
    qwen = json.loads((home / ".qwen/settings.json").read_text())
    [held] = qwen["hooks"]["PreToolUse"][0]["hooks"]
    assert held["command"].endswith("--timeout 58") and held["timeout"] == 60  # under its cap
    copilot = json.loads((home / ".copilot/hooks/agent-kanban.json").read_text())
    assert copilot["version"] == 1
    assert set(copilot["hooks"]) >= {"PreToolUse", "PostToolUse", "SessionStart"}  # PascalCase
    assert copilot["hooks"]["PreToolUse"][0]["bash"].startswith("kanban-hook --client copilot")
    plugin = (home / ".config/opencode/plugin/agent-kanban.js").read_text()
    assert '"tool.execute.before"' in plugin and "hooks/opencode" in plugin
    assert "/hooks" in out  # Codex's trust step is said

    boards = home / ".config/agent-kanban/boards.json"
    assert stat.S_IMODE(boards.stat().st_mode) == 0o600
    assert json.loads(boards.read_text()) == {
        "version": 1,
        "boards": [{"url": URL, "token": TOKEN, "agent": ""}],
    }


def test_it_keeps_what_a_settings_file_already_says_and_a_rerun_updates_in_place(home):
    settings = home / ".gemini/settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "write_file", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    settings.write_text(json.dumps({"theme": "dark", "hooks": {"BeforeTool": [mine]}}))

    connect("--client", "gemini", "--token", TOKEN)
    connect("--client", "gemini", "--token", TOKEN)

    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    assert data["hooks"]["BeforeTool"][0] == mine
    assert len(data["hooks"]["BeforeTool"]) == 2  # theirs and one of ours, not two
    assert sum("kanban-hook" in c for c in commands(data)) == len(registry.BY_NAME["gemini"].events)


def test_remove_takes_out_only_what_connect_wrote(home):
    settings = home / ".claude/settings.json"
    settings.parent.mkdir()
    mine = {"hooks": [{"type": "command", "command": "./notify.sh"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [mine]}}))
    connect(
        "--client", "claude-code", "--client", "copilot", "--client", "opencode", "--token", TOKEN
    )

    out = connect(
        "--client", "claude-code", "--client", "copilot", "--client", "opencode", "--remove"
    )

    assert json.loads(settings.read_text()) == {"model": "opus", "hooks": {"Stop": [mine]}}
    assert not (home / ".copilot/hooks/agent-kanban.json").exists()
    assert not (home / ".config/opencode/plugin/agent-kanban.js").exists()
    assert json.loads((home / ".config/agent-kanban/boards.json").read_text())["boards"] == []
    assert "removed" in out


def test_a_dry_run_prints_the_files_writes_nothing_and_hides_the_token(home):
    out = connect("--client", "codex", "--token", TOKEN, "--dry-run")

    assert "would write" in out and ".codex/hooks.json" in out and "--client codex" in out
    assert TOKEN not in out
    assert not any(home.rglob("*.json"))


def test_the_installed_clients_are_found_on_path(home):
    (home / "bin").mkdir()
    for binary in ("gemini", "qwen"):
        (home / "bin" / binary).write_text("#!/bin/sh\n")
        (home / "bin" / binary).chmod(0o755)

    connect("--token", TOKEN)

    assert (home / ".gemini/settings.json").exists() and (home / ".qwen/settings.json").exists()
    assert not (home / ".claude").exists()


def test_with_no_client_installed_or_named_it_says_so(home):
    with pytest.raises(CommandError, match="--client"):
        connect("--token", TOKEN)


@pytest.mark.parametrize(
    "url", ["ftp://h/boards/team/", "http://h/team/", "http://h/boards/", "not a url"]
)
def test_a_url_that_names_no_board_is_refused_and_nothing_is_written(home, url):
    with pytest.raises(CommandError, match="not a board URL"):
        call_command("connect", "--url", url, "--client", "codex", "--token", TOKEN)
    assert not any(home.rglob("*.json"))


def test_a_settings_file_that_is_not_json_is_left_alone(home):
    settings = home / ".qwen/settings.json"
    settings.parent.mkdir()
    settings.write_text("{ // a comment\n}")
    with pytest.raises(CommandError, match="not JSON"):
        connect("--client", "qwen", "--token", TOKEN)
    assert settings.read_text() == "{ // a comment\n}"


def test_without_a_token_it_issues_a_team_token_for_a_board_on_this_server(home, db):
    board = make_board("team", "Team board")
    connect("--client", "codex")
    [entry] = json.loads((home / ".config/agent-kanban/boards.json").read_text())["boards"]
    token = AgentToken.objects.get(board=board)
    assert token.is_team and entry["token"].startswith(token.prefix)


def test_without_a_token_for_a_board_elsewhere_it_asks_for_one(home, db):
    with pytest.raises(CommandError, match="--token"):
        connect("--client", "codex")

"""Which client on which machine (SPEC §13): the roster, the cards and the inbox items
say it ("codex on build-box · rm -rf dist"), from what the door and forwarder told."""

from __future__ import annotations

import html
import json
import re

from django.test import Client

from boards.clients import sessions, setup
from boards.core import services
from boards.models import Board
from tests.support.factories import make_task, make_token

CWD = "/home/dev/project"


def _start(board: Board, client: str, **headers: str) -> None:
    """The session's first event through its client's door, as the forwarder sends it."""
    response = Client().post(
        f"/api/boards/team/hooks/{client}",
        data=json.dumps({"hook_event_name": "SessionStart", "session_id": "x-1", "cwd": CWD}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {make_token(board, 'dev')}", **headers},
    )
    assert response.status_code == 200, response.content


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_roster_card_and_inbox_say_which_client_on_which_machine(board, person_client):
    task = make_task(board, "Clean the build", actor="dev")
    services.task_claim(board=board, agent="dev", task_id=task.number)
    _start(board, "codex", **{"X-Kanban-Host": "build-box", "X-Kanban-Client-Version": "0.171.0"})
    # A default rule asks before a recursive delete: the call is held for a person (the
    # door would wait for them; the write path alone holds it).
    event = {
        "hook_event_name": "PreToolUse",
        "session_id": "x-1",
        "cwd": CWD,
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf dist"},
    }
    sessions.session_event(board=board, agent="dev", event=event, client="codex")

    page = _text(person_client.get("/boards/team/").content.decode())
    assert "codex on build-box · rm -rf dist" in page  # the card of the task dev works on
    assert "codex on build-box · /home/dev/project" in page  # the roster
    inbox = _text(person_client.get("/inbox/").content.decode())
    assert "codex on build-box · rm -rf dist" in inbox
    assert "codex on build-box 0.171.0" in inbox


def test_a_session_without_a_host_says_only_its_client(board, person_client):
    _start(board, "gemini")
    page = _text(person_client.get("/boards/team/").content.decode())
    assert "gemini · /home/dev/project" in page
    assert "gemini on" not in page


def test_the_connect_page_says_what_connect_writes_and_each_clients_limits(board, person_client):
    page = _text(person_client.get("/boards/team/connect/").content.decode())
    assert "agent-kanban connect --url http://testserver/boards/team/ --token" in page
    for name in ("Codex", "GitHub Copilot CLI", "Gemini CLI", "Qwen Code", "opencode"):
        assert name in page
    assert "$COPILOT_HOME/hooks/agent-kanban.json" in page
    assert "PascalCase" in page
    assert "/hooks" in page and "/etc/codex/hooks.json" in page  # Codex's trust step
    assert "ends with its rule's fallback 55 s after it" in page  # Qwen's cap
    assert "opencode/plugin/agent-kanban.js" in page


def test_the_connect_page_leads_with_connect_and_its_by_hand_block_carries_no_token(
    board, person_client
):
    # Issue #42: a project's .claude/settings.json with the token in its "env" sent the
    # token wherever the repository said; the page now says user scope, boards.json only.
    response = person_client.post("/boards/team/connect/", {"agent": "coder-1"}, follow=True)
    page = response.content.decode()
    token = re.search(r"data-new-token>(ak_[^<]+)<", page).group(1)
    assert page.index('data-snippet="connect"') < page.index('data-snippet="claude-settings"')
    block = html.unescape(re.search(r'id="claude-settings">(.*?)</code>', page, re.S).group(1))
    settings = json.loads(block)
    assert token not in block and "KANBAN_TOKEN" not in block and "KANBAN_HOOK_URL" not in block
    assert settings["env"] == {"CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"}
    assert settings["hooks"] == setup.by_hand_settings("claude-code")["hooks"]  # connect's own
    [gate] = settings["hooks"]["PreToolUse"][0]["hooks"]
    assert gate["onFailure"] == "block" and gate["command"].startswith("kanban-hook --client")
    boards = html.unescape(re.search(r'data-snippet="boards-json">(.*?)</code>', page, re.S)[1])
    assert json.loads(boards)["boards"][0]["token"] == token
    text = _text(page)
    assert "~/.claude/settings.json (your user settings, never a project's)" in text
    assert "Put this in the project's" not in text
    assert "disableAllHooks" in text and "connect --system" in text
    killed = dict(re.findall(r'data-client="([-\w]+)".*?<td data-killed-hook>([^<]*)<', page, re.S))
    assert killed["claude-code"].startswith("blocks the call")
    assert killed["codex"].startswith("runs the call")


def test_the_rules_page_says_which_clients_a_rule_covers(board, person_client):
    page = _text(person_client.get("/boards/team/gates/").content.decode())
    assert "Which clients a rule covers" in page
    assert "Claude Code, Codex, Copilot CLI, Gemini CLI, Qwen Code and opencode" in page
    assert "at most 55 s after it" in page

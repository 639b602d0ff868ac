"""A session's goal (issue #38): the person's latest prompt, kept on the session, shown in
a held call's "What is decided" and on the roster line, escaped and bounded."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from boards.clients import sessions
from boards.core import limits
from boards.models import ClientSession, ToolCall

CWD = "/home/dev/project"


def hook(name: str, session: str = "s-1", **fields) -> dict:
    return {"hook_event_name": name, "session_id": session, "cwd": CWD, **fields}


def send(token: str, body: dict, client: str = "claude-code") -> int:
    response = Client().post(
        f"/api/boards/team/hooks/{client}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code


def hold_push(board) -> ToolCall:
    """A held ``git push`` of session s-1 (a new board's rules ask before one)."""
    sessions.session_event(
        board=board,
        agent="claude",
        event=hook(
            "PreToolUse",
            tool_name="Bash",
            tool_input={"command": "git push origin main"},
            tool_use_id="tu-push",
        ),
    )
    return ToolCall.objects.get(board=board, state="requested")


def held_item(page: str, call: ToolCall) -> str:
    """The strip's or inbox's item of ``call``, as HTML."""
    found = re.search(rf'<li\s+class="need[^"]*"[^>]*data-call="{call.pk}".*?</li>\n', page, re.S)
    assert found, "the held call has no item"
    return found.group(0)


def test_a_held_calls_item_shows_the_sessions_latest_prompt_as_its_goal(
    board, token, person_client
):
    assert send(token, hook("SessionStart")) == 200
    assert send(token, hook("UserPromptSubmit", prompt="Tidy the README")) == 200
    assert send(token, hook("UserPromptSubmit", prompt="Release 2.0:\nbump, tag and push")) == 200
    # A prompt with nothing in it leaves the goal as it was.
    assert send(token, hook("UserPromptSubmit", prompt="   ")) == 200
    assert ClientSession.objects.get(board=board).goal == "Release 2.0:\nbump, tag and push"
    call = hold_push(board)

    for url in ("/boards/team/", "/inbox/"):
        item = held_item(person_client.get(url).content.decode(), call)
        assert "<dt>Goal</dt>" in item
        assert "Release 2.0:\nbump, tag and push" in item
        assert "Tidy the README" not in item
    roster = person_client.get("/boards/team/").content.decode()
    assert re.search(r'class="session-goal".*Release 2\.0:', roster)
    # Away from the page too: the inbox's JSON names the session, its goal and the deadline.
    (item,) = [
        i for i in person_client.get("/api/inbox").json()["items"] if i["id"] == f"call-{call.pk}"
    ]
    assert item["session"] == {
        "id": "s-1",
        "client": "claude-code",
        "host": None,
        "cwd": CWD,
        "goal": "Release 2.0:\nbump, tag and push",
    }
    assert item["deadline"] == call.deadline.isoformat().replace("+00:00", "Z")


def test_a_hostile_prompt_is_kept_bounded_and_shown_escaped(board, token, person_client):
    hostile = '<script>alert("goal")</script><img src=x onerror=alert(1)>\x07' + "x" * 50_000
    assert send(token, hook("UserPromptSubmit", prompt=hostile)) == 200
    goal = ClientSession.objects.get(board=board).goal
    assert len(goal) == limits.SESSION_GOAL_MAX and goal.endswith("…")
    assert "\x07" not in goal
    call = hold_push(board)

    page = person_client.get("/boards/team/").content.decode()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&quot;goal&quot;)&lt;/script&gt;" in held_item(page, call)
    assert "x" * 3000 not in page
    # Longer than any prompt a client sends (LONG_TEXT_MAX): refused naming the field.
    too_long = send(token, hook("UserPromptSubmit", prompt="y" * (limits.LONG_TEXT_MAX + 1)))
    assert too_long == 400
    assert ClientSession.objects.get(board=board).goal == goal


@pytest.mark.parametrize(
    ("client", "body"),
    [
        ("gemini", {"hook_event_name": "BeforeAgent", "prompt": "Port the parser to Rust"}),
        ("copilot", {"hookEventName": "userPromptSubmitted", "prompt": "Port the parser to Rust"}),
        ("codex", {"hook_event_name": "UserPromptSubmit", "prompt": "Port the parser to Rust"}),
    ],
)
def test_other_clients_prompts_become_the_goal_too(board, token, client, body):
    assert send(token, {"session_id": "s-9", "cwd": CWD, **body}, client=client) == 200
    assert ClientSession.objects.get(board=board).goal == "Port the parser to Rust"

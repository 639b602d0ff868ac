"""Claude Code sessions that say what is true (SPEC §11, issue #35): stopped apart from
idle, calls the client refused itself never "running", subagents' calls under their
session, a skill's shell line gated like a Bash call."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from boards.clients import actions, claude_code, sessions
from boards.gates import rules as gaterules
from boards.models import ClientSession, ToolCall
from tests.clients.test_hooks import bash, hook, send


def calls(token: str) -> list[dict]:
    response = Client().get("/api/boards/team/agents", headers={"Authorization": f"Bearer {token}"})
    [agent] = [a for a in response.json()["agents"] if a["session"]]
    return agent["session"]


@pytest.mark.django_db
def test_a_stop_failure_reads_stopped_not_idle(board, token):
    send(token, hook("UserPromptSubmit", prompt="go"))
    send(token, hook("StopFailure", error="rate_limit"))
    session = ClientSession.objects.get()
    assert (session.state, session.doing) == ("stopped", "Stopped: rate_limit")
    assert calls(token)["state"] == "stopped"


@pytest.mark.django_db
def test_a_working_session_silent_past_the_boards_limit_reads_stopped(board, token):
    send(token, bash("ls"))
    send(token, hook("PostToolUse", tool_name="Bash", tool_input={}, tool_use_id="tu-1"))
    assert calls(token)["state"] == "working"
    ClientSession.objects.update(
        last_event_at=timezone.now() - timedelta(seconds=board.silent_after_seconds + 1)
    )
    assert calls(token)["state"] == "stopped"


@pytest.mark.django_db
def test_a_call_the_client_refused_is_refused_also_after_the_session_ends(board, token):
    send(token, bash("ls", use="tu-1"))
    send(token, bash("pwd", use="tu-2"))
    send(
        token,
        hook(
            "PermissionDenied", tool_name="Bash", tool_input={}, tool_use_id="tu-2", reason="auto"
        ),
    )
    send(token, bash("whoami", use="tu-3"))
    batch = [{"tool_name": "Bash", "tool_input": {}, "tool_use_id": "tu-3"}]
    send(token, hook("PostToolBatch", tool_calls=batch))
    assert [c["outcome"] for c in calls(token)["calls"]] == ["running", "refused", "refused"]
    send(token, hook("SessionEnd", reason="other"))
    assert [c["outcome"] for c in calls(token)["calls"]] == ["refused"] * 3


@pytest.mark.django_db
def test_the_model_is_read_from_any_event_that_carries_it(board, token):
    send(token, hook("UserPromptSubmit", prompt="go", model="claude-opus-5"))
    assert calls(token)["model"] == "claude-opus-5"


@pytest.mark.django_db
def test_a_subagents_calls_are_marked_and_the_session_works_while_it_runs(board, token):
    inside = {"agent_id": "a-1", "agent_type": "Explore"}
    send(token, hook("SubagentStart", **inside))
    send(token, bash("ls", use="tu-1") | inside)
    send(token, bash("pwd", use="tu-2"))
    send(token, hook("PostToolUse", tool_name="Bash", tool_input={}, tool_use_id="tu-1", **inside))
    send(token, hook("PostToolUse", tool_name="Bash", tool_input={}, tool_use_id="tu-2"))
    send(token, hook("Stop"))
    session = calls(token)
    assert [(c["summary"], c["outcome"], c["subagent"]) for c in session["calls"]] == [
        ("Running `ls`", "ok", "Explore"),
        ("Running `pwd`", "ok", None),
    ]
    assert set(session["calls"][0]) == {"tool", "summary", "outcome", "ms", "subagent"}
    assert session["state"] == "working"
    send(token, hook("SubagentStop", agent_transcript_path="/t", stop_hook_active=False, **inside))
    assert calls(token)["state"] == "idle"


@pytest.mark.django_db
def test_a_subagents_calls_are_marked_on_the_board_page(board, token, person_client):
    inside = {"agent_id": "a-1", "agent_type": "Explore"}
    send(token, hook("SubagentStart", **inside))
    send(token, bash("ls", use="tu-1") | inside)
    send(token, bash("pwd", use="tu-2"))

    page = person_client.get("/boards/team/").content.decode()

    calls = re.findall(r'<li\s+class="call call--[a-z]+"[^>]*>.*?</li>', page, re.S)
    assert len(calls) == 2, calls
    pwd, ls = calls  # newest first
    assert 'data-subagent="Explore"' in ls
    assert re.search(r'<span class="call-subagent"[^>]*>Explore ·</span> Running `ls`', ls), ls
    assert "data-subagent" not in pwd and "call-subagent" not in pwd and "Running `pwd`" in pwd


@pytest.mark.django_db
def test_an_unmatched_subagent_stop_is_ignored(board, token):
    send(token, hook("SubagentStart", agent_id="a-1", agent_type="Explore"))
    send(token, hook("SubagentStop", agent_id="c-1", agent_type="compact"))
    send(token, hook("SubagentStop", agent_id="c-2", agent_type="compact"))
    session = ClientSession.objects.get()
    assert (session.subagents, session.running_subagents) == (1, [{"id": "a-1", "type": "Explore"}])


def skill_line(command: str) -> dict:
    return hook(
        "PreSkillShellCommand",
        tool_name="Bash",
        tool_input={"command": command},
        tool_use_id="sk-1",
        command_name="clean",
    )


@pytest.mark.django_db
def test_a_skills_shell_line_is_refused_by_a_deny_rule_in_its_own_events_answer(board, token):
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern="echo *", decision="deny"
    )
    status, answer = send(token, skill_line("echo hi"))
    assert status == 200
    out = answer["hookSpecificOutput"]
    assert (out["hookEventName"], out["permissionDecision"]) == ("PreSkillShellCommand", "deny")


@pytest.mark.django_db
def test_a_skills_shell_line_waits_for_a_person_like_a_bash_call(board, token):
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern="rm -rf *", decision="ask", wait_seconds=30
    )
    event = actions.HookInput.model_validate(
        claude_code.normalise(skill_line("rm -rf build"))
    ).model_dump()
    verdict = sessions.session_event(board=board, agent="claude", event=event)
    assert verdict.held is not None
    held = ToolCall.objects.get(pk=verdict.held)
    assert (held.tool_name, held.summary, held.state) == ("Bash", "rm -rf build", "requested")
    [call] = ClientSession.objects.get().calls
    assert (call["outcome"], call["skill"]) == ("waiting", "clean")

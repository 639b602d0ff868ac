"""A Claude Code session's own plan as cards (SPEC §11, issue #35): TaskCreate/TaskUpdate,
TaskCreated/TaskCompleted and TodoWrite through the hook door become cards owned by the
session's agent, never twice; a card a person marks "needs approval" cannot be completed
by the session until a person approves it."""

from __future__ import annotations

import pytest

from boards.clients import actions, claude_code
from boards.core import selectors
from boards.models import ApprovalState, Status, Task
from boards.needs import reads
from tests.clients.test_hooks import hook, send
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse
from tests.support.claude_cli import command_hook_settings, http_hook_settings, run_claude
from tests.support.hook_server import HookServer


def created(task_id: str, subject: str, session: str = "s-1", **given) -> dict:
    return hook(
        "PostToolUse",
        session,
        tool_name="TaskCreate",
        tool_input={"subject": subject, "description": "", **given},
        tool_response={"task": {"id": task_id, "subject": subject, "description": "d"}},
        tool_use_id=f"tc-{task_id}",
    )


def updated(task_id: str, to: str, was: str = "pending", session: str = "s-1") -> dict:
    return hook(
        "PostToolUse",
        session,
        tool_name="TaskUpdate",
        tool_input={"taskId": task_id, "status": to},
        tool_response={
            "success": True,
            "taskId": task_id,
            "updatedFields": ["status"],
            "statusChange": {"from": was, "to": to},
        },
        tool_use_id=f"tu-{task_id}-{to}",
    )


def completed(task_id: str, subject: str, session: str = "s-1") -> dict:
    return hook("TaskCompleted", session, task_id=task_id, task_subject=subject)


@pytest.mark.django_db
def test_three_task_creates_and_their_status_changes_are_cards_owned_by_the_agent(board, token):
    for n, subject in enumerate(("Read the code", "Write the fix", "Run the tests"), 1):
        assert send(token, created(str(n), subject))[0] == 200
    send(token, updated("1", "in_progress"))
    send(token, updated("1", "completed", was="in_progress"))
    cards = list(Task.objects.filter(board=board).order_by("number"))
    assert [(c.subject, c.status, c.owner, c.session, c.client_task_id) for c in cards] == [
        ("Read the code", Status.COMPLETED, "claude", "s-1", "1"),
        ("Write the fix", Status.PENDING, "claude", "s-1", "2"),
        ("Run the tests", Status.PENDING, "claude", "s-1", "3"),
    ]
    shown = selectors.task_to_dict(selectors.task_view(board, cards[1].number))
    assert (shown["session"], shown["clientTaskId"]) == ("s-1", "2")
    summary = selectors.task_summary(selectors.task_view(board, cards[1].number))
    assert (summary["session"], summary["clientTaskId"]) == ("s-1", "2")


@pytest.mark.django_db
def test_replayed_and_compacted_events_never_duplicate_a_card(board, token):
    send(token, created("1", "Read the code"))
    send(token, created("1", "Read the code"))
    send(token, hook("TaskCreated", task_id="1", task_subject="Read the code"))
    assert Task.objects.filter(board=board).count() == 1


@pytest.mark.django_db
def test_sessions_sharing_a_task_list_are_one_plan(board, token):
    headers = {claude_code.TASK_LIST_HEADER: "release"}
    send(token, created("1", "Tag it", session="s-1"), **headers)
    send(token, updated("1", "in_progress", session="s-2"), **headers)
    send(token, created("1", "Its own", session="s-3"))
    assert sorted(Task.objects.values_list("subject", "status", "client_plan")) == [
        ("Its own", Status.PENDING, "s-3"),
        ("Tag it", Status.IN_PROGRESS, "release"),
    ]


@pytest.mark.django_db
def test_a_todo_write_list_becomes_cards_named_by_their_text(board, token):
    todos = [
        {"content": "Lint", "status": "completed", "activeForm": "Linting"},
        {"content": "Ship", "status": "pending", "activeForm": "Shipping"},
    ]
    body = hook(
        "PostToolUse",
        tool_name="TodoWrite",
        tool_input={"todos": todos},
        tool_response={"oldTodos": [], "newTodos": todos},
        tool_use_id="tw-1",
    )
    send(token, body)
    send(token, body | {"tool_use_id": "tw-2"})
    assert sorted(Task.objects.values_list("subject", "status", "active_form")) == [
        ("Lint", Status.COMPLETED, "Linting"),
        ("Ship", Status.PENDING, "Shipping"),
    ]


@pytest.mark.django_db
def test_a_card_needing_approval_is_not_completed_until_a_person_approves(
    board, token, person_client
):
    send(token, created("1", "Drop the table"))
    send(token, updated("1", "in_progress"))
    card = Task.objects.get(board=board, client_task_id="1")
    response = person_client.post(
        f"/boards/team/tasks/{card.number}/require-approval/", {"required": "1"}
    )
    assert response.status_code in (200, 204, 302)

    status, answer = send(token, completed("1", "Drop the table"))
    assert status == 200
    assert answer["decision"] == "block"
    assert f"#{card.number}" in answer["reason"] and "approval" in answer["reason"]
    card.refresh_from_db()
    assert (card.status, card.approval_state) == (Status.IN_PROGRESS, ApprovalState.REQUESTED)
    assert "approval" in [i["reason"] for i in selectors_needs(board)]

    person_client.post(f"/boards/team/tasks/{card.number}/approve/", {"note": ""})
    card.refresh_from_db()
    assert card.approval_state == ApprovalState.APPROVED
    assert send(token, completed("1", "Drop the table")) == (200, {})
    send(token, updated("1", "completed", was="in_progress"))
    card.refresh_from_db()
    assert card.status == Status.COMPLETED


@pytest.mark.django_db
def test_a_completion_of_a_card_no_one_gated_goes_through(board, token):
    send(token, created("1", "Small thing"))
    assert send(token, completed("1", "Small thing")) == (200, {})


def selectors_needs(board) -> list[dict]:
    return [{"reason": item.reason} for item in reads.needs_you([board])]


def test_the_connect_block_turns_the_task_tools_on_and_never_hooks_worktree_creation():
    block = claude_code.claude_settings("http://board/api/boards/team/hooks/claude-code", 300)
    assert block["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"] == "1"
    assert "WorktreeCreate" not in block["hooks"]
    commands = {
        e for e, [entry] in block["hooks"].items() if entry["hooks"][0]["type"] == "command"
    }
    assert commands == {"SessionStart", "PreToolUse", "PreSkillShellCommand", "TaskCompleted"}
    assert {"StopFailure", "PostToolBatch", "PermissionDenied", "TaskCreated"} <= set(
        block["hooks"]
    )


@pytest.mark.slow  # the real CLI (2.1.332) against a stand-in board
def test_the_real_cli_sends_the_plan_we_read_and_obeys_a_refused_completion(tmp_path):
    reason = "Card #1 needs a person's approval on the board"
    with HookServer() as board:
        board.answers["TaskCompleted"] = {"decision": "block", "reason": reason}
        settings = command_hook_settings(board.url, events=["PreToolUse", "TaskCompleted"])
        settings["hooks"] |= http_hook_settings(board.url, events=["PostToolUse", "TaskCreated"])[
            "hooks"
        ]
        settings["env"]["CLAUDE_CODE_ENABLE_TODO_TOOLS"] = "1"
        script = [
            ToolUse("TaskCreate", {"subject": "Write the fix", "description": "d"}),
            ToolUse("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
            ToolUse("TaskUpdate", {"taskId": "1", "status": "completed"}),
            Text("Done."),
        ]
        with AnthropicStandin(script) as api:
            run_claude(
                "Plan.",
                api_url=api.url,
                workdir=tmp_path,
                settings=settings,
                allowed_tools=["TaskCreate", "TaskUpdate"],
                env={"KANBAN_TOKEN": "t", "KANBAN_AGENT": "alice"},
            )
            results = [r.text for r in api.tool_results()]
        steps = [
            step
            for call in board.calls
            for step in claude_code.plan_steps(
                actions.HookInput.model_validate(claude_code.normalise(call.json)).model_dump()
            )
        ]
    assert results[2] == f"TaskCompleted hook feedback:\n{reason}"
    assert [(s.client_task_id, s.subject, s.status) for s in steps] == [
        ("1", "Write the fix", None),  # TaskCreated
        ("1", "Write the fix", None),  # TaskCreate's PostToolUse
        ("1", "", "in_progress"),
        ("1", "Write the fix", None),  # TaskCompleted, refused: its TaskUpdate failed
    ]


@pytest.mark.django_db
def test_a_completion_whose_check_never_answered_asks_a_person(board, token, person_client):
    # The session's TaskCompleted hook died (the client then goes on: it ignores
    # onFailure there), so the board hears of the completion only from its PostToolUse:
    # the card stays, and a person is asked, never a silent drop.
    send(token, created("1", "Drop the table"))
    send(token, updated("1", "in_progress"))
    card = Task.objects.get(board=board, client_task_id="1")
    person_client.post(f"/boards/team/tasks/{card.number}/require-approval/", {"required": "1"})

    send(token, updated("1", "completed", was="in_progress"))

    card.refresh_from_db()
    assert (card.status, card.approval_state) == (Status.IN_PROGRESS, ApprovalState.REQUESTED)
    assert "without the board's approval" in card.approval_reason
    assert "approval" in [i["reason"] for i in selectors_needs(board)]

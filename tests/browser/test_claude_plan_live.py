"""Claude Code in depth on a live board, with the real CLI (issue #35 "Done when").

The real Claude Code CLI (``tests/claude``, 2.1.332) runs headless against the scripted
stand-in for the Anthropic API, with the ``.claude/settings.json`` copied from the
board's Connect page (which turns the client's task tools on), while a person watches the
board in Chromium (the harness of ``test_claude_code_live``). A :class:`Pause` in a
script holds the model between two steps, so the test can look at the page, or act on
it, at a known point of the session:

- a session's three TaskCreate calls and its TaskUpdate status changes are cards on the
  open page within 2 s of each call's hooks being answered, owned by the session's agent,
  and the same through the agents API's TaskList;
- a card a person marks "needs approval" on the page: the session's completion of it is
  refused (the model reads why) until the person approves, then it goes through;
- a subagent's two calls show under its parent session, marked with its type (a
  ``-p`` run starts it in the background: its turns and its parent's interleave, so the
  stand-in tells them apart by the subagent's prompt);
- a skill's ``!`rm -rf build``` line waits for a person, and a person's deny keeps
  ``build/`` (2.1.332 fires ``PreSkillShellCommand`` in headless ``-p`` runs too, as
  ``tool_name: Bash`` with the skill's name in ``command_name``; a refused line is left
  out of the skill's text the model reads, replaced by ``[not run: blocked by hook:
  <the board's reason>]``);
- a call the client refuses itself (its own ``permissions.deny``) is not "running" once
  the session ends.

Waits are conditions with a bounded timeout, never sleeps.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from devtools.liveserver import Cluster, Server, call
from tests.support.anthropic_standin import Pause, Step, Text, ToolUse
from tests.support.claude_cli import claude_binary

from .conftest import USERNAME, assert_not_reloaded
from .test_board_live import card
from .test_claude_code_live import (
    AGENT,
    CLI_MS,
    CLI_SECONDS,
    ClaudeBoard,
    Session,
    copied_settings,
    held_calls,
    new_board,
    new_boards,
    roster_row,
    start,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OpenPage = Callable[[], Page]

PLAN_MS = 2_000  # from a call's hooks being answered to its card on the page (issue #35)
TASK_TOOLS = ["TaskCreate", "TaskUpdate", "TaskList", "TaskGet"]
BOARDS = 5  # one per test


@pytest.fixture(scope="module", autouse=True)
def claude() -> Iterator[Path]:
    """The pinned CLI, and ``kanban-hook`` on PATH as the copied settings expect it."""
    binary = claude_binary()
    if shutil.which("kanban-hook") is None:
        pytest.fail("kanban-hook is not on PATH: `pip install -e .` installs it")
    yield binary


@pytest.fixture(scope="module")
def spare_boards(cluster: Cluster, server: Server) -> list[ClaudeBoard]:
    """This module's boards, made in one command: a Django start takes seconds on a busy
    machine, one per test would be most of the module's time."""
    return new_boards(cluster, server, BOARDS)


@pytest.fixture
def live_board(cluster: Cluster, server: Server, spare_boards: list[ClaudeBoard]) -> ClaudeBoard:
    """Overrides conftest's (``pages`` and ``open_page`` use it): a fresh board per test,
    with a token bound to the CLI's agent."""
    if not server.running:
        server.start()
    return spare_boards.pop() if spare_boards else new_board(cluster, server)


@pytest.fixture
def pause() -> Iterator[Callable[[], Pause]]:
    """Makes the script's pauses; all let go at the end, so a failed test leaves no CLI
    waiting on the stand-in."""
    made: list[Pause] = []

    def make() -> Pause:
        made.append(Pause())
        return made[-1]

    yield make
    for each in made:
        each.go.set()


# -- helpers -------------------------------------------------------------------------------------


def within_2_s(pause: Pause, page: Page, subject: str, column: str) -> float:
    """Once the CLI reaches ``pause`` (the step before it is done, its hooks answered),
    the card is in ``column`` on the page within :data:`PLAN_MS`; then the model goes on.
    Returns the seconds it took."""
    pause.wait_reached(CLI_SECONDS)
    began = time.monotonic()
    expect_card(page, subject, column)
    took = time.monotonic() - began
    assert took <= PLAN_MS / 1000, took
    pause.go.set()
    return took


def plan_card(page: Page, subject: str) -> Locator:
    return page.locator("[data-task-id]", has_text=subject)


def expect_card(page: Page, subject: str, column: str) -> None:
    """The session's card is in ``column``, once, owned by the session's agent."""
    shown = page.locator(f'[data-column="{column}"] [data-task-id]', has_text=subject)
    expect(shown).to_have_count(1, timeout=PLAN_MS)
    expect(plan_card(page, subject)).to_have_count(1, timeout=PLAN_MS)
    expect(shown).to_have_attribute("data-owner", AGENT, timeout=PLAN_MS)


def task_list(live_board: ClaudeBoard) -> list[dict[str, Any]]:
    """Every card, as the session's agent reads them through the agents API."""
    status, answer = call(
        live_board.server.base,
        live_board.slug,
        live_board.agent_token,
        "TaskList",
        {"view": "all"},
        timeout=10,
    )
    assert status == 200, answer
    return answer["tasks"]


def roster_api(live_board: ClaudeBoard) -> dict[str, Any]:
    """The session of the CLI's agent, as ``GET /api/boards/<slug>/agents`` gives it."""
    request = urllib.request.Request(
        f"{live_board.server.base}/api/boards/{live_board.slug}/agents",
        headers={"Authorization": f"Bearer {live_board.agent_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        agents = json.loads(response.read())["agents"]
    [agent] = [a for a in agents if a["name"] == AGENT]
    return agent["session"]


def session_calls(page: Page) -> Locator:
    return roster_row(page).locator(".session-calls li.call")


def expect_ended(page: Page) -> None:
    state = roster_row(page).locator("[data-session-state]")
    expect(state).to_have_attribute("data-session-state", "ended")


def last_result(session: Session) -> str:
    results = session.api.tool_results()
    assert results, "the model read no tool result"
    return results[-1].text


# -- the session's plan --------------------------------------------------------------------------


def test_a_sessions_task_calls_are_its_agents_cards_on_the_page_within_2_s(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path, pause: Callable[[], Pause]
):
    page = open_page()
    subjects = ["Read the code", "Write the fix", "Run the tests"]
    pauses = [pause() for _ in range(5)]
    script: list[Step] = []
    for subject, held in zip(subjects, pauses[:3], strict=True):
        script += [ToolUse("TaskCreate", {"subject": subject, "description": subject}), held]
    script += [
        ToolUse("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
        pauses[3],
        ToolUse("TaskUpdate", {"taskId": "1", "status": "completed"}),
        pauses[4],
        Text("Planned."),
    ]
    session = start(tmp_path, page, live_board, script, "plan", allowed_tools=TASK_TOOLS)

    took = [within_2_s(pauses[n], page, subject, "pending") for n, subject in enumerate(subjects)]
    took.append(within_2_s(pauses[3], page, subjects[0], "in_progress"))
    took.append(within_2_s(pauses[4], page, subjects[0], "completed"))
    run = session.result()
    print(f"\nseconds from each call's hooks answered to its card on the page: {took}")

    assert run.result.get("result") == "Planned."
    # The Connect block turned the client's task tools on.
    assert {"TaskCreate", "TaskUpdate"} <= set(run.init.get("tools", [])), run.init
    results = session.api.tool_results()
    assert [r.is_error for r in results] == [False] * 5, results
    expect_card(page, subjects[1], "pending")
    expect_card(page, subjects[2], "pending")
    expect(page.locator("[data-task-id]")).to_have_count(3)  # never twice
    listed = sorted(task_list(live_board), key=lambda t: t["clientTaskId"])
    session_id = run.init["session_id"]
    assert [
        (t["subject"], t["status"], t["owner"], t["session"], t["clientTaskId"]) for t in listed
    ] == [
        ("Read the code", "completed", AGENT, session_id, "1"),
        ("Write the fix", "pending", AGENT, session_id, "2"),
        ("Run the tests", "pending", AGENT, session_id, "3"),
    ]
    assert_not_reloaded(page)


def test_a_card_a_person_marks_needs_approval_is_completed_only_once_approved(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path, pause: Callable[[], Pause]
):
    page = open_page()
    subject = "Drop the legacy table"
    marked, refused = pause(), pause()
    complete = ToolUse("TaskUpdate", {"taskId": "1", "status": "completed"})
    script: list[Step] = [
        ToolUse("TaskCreate", {"subject": subject, "description": "3 GB of old rows"}),
        ToolUse("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
        marked,
        complete,
        refused,
        complete,
        Text("Dropped."),
    ]
    session = start(tmp_path, page, live_board, script, "approval", allowed_tools=TASK_TOOLS)

    # The person marks the session's card "needs approval" in its panel.
    marked.wait_reached(CLI_SECONDS)
    expect_card(page, subject, "in_progress")
    [number] = [t["id"] for t in task_list(live_board)]
    card(page, number).locator(".card-link").click()
    panel = page.locator(f'#detail [data-detail-task="{number}"]')
    panel.get_by_role("button", name="Mark “needs approval”").click()
    expect(card(page, number).locator(".tag", has_text="needs approval")).to_have_count(1)
    marked.go.set()

    # The session's completion is refused: the model reads why, and a person is asked.
    refused.wait_reached(CLI_SECONDS)
    reason = last_result(session)
    assert reason.startswith("TaskCompleted hook feedback:"), reason
    assert f"Card #{number} “{subject}” needs a person's approval on the board" in reason
    item = page.locator(f'#needs [data-approval-task="{number}"]')
    expect(item).to_have_count(1)
    expect(item.locator("strong")).to_have_text(AGENT)
    expect(item).to_contain_text(f"{AGENT} wants to complete “{subject}”")
    expect_card(page, subject, "in_progress")
    assert [t["status"] for t in task_list(live_board)] == ["in_progress"]

    # The person approves; the session's next completion goes through.
    item.get_by_role("button", name="Approve").click()
    expect(page.locator("#needs [data-approval-task]")).to_have_count(0)
    refused.go.set()
    run = session.result()

    assert run.result.get("result") == "Dropped."
    assert last_result(session) == "Updated task #1 status"
    expect_card(page, subject, "completed")
    [task] = task_list(live_board)
    assert (task["status"], task["owner"], task["approval"]) == ("completed", AGENT, "approved")
    assert_not_reloaded(page)


# -- subagents -----------------------------------------------------------------------------------


def test_a_subagents_two_calls_show_under_its_session_marked_with_its_type(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    agents = tmp_path / "claude" / "project" / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews the code\ntools: Bash\n---\n"
        "You review the code.\n"
    )
    brief = "Review the code in this folder."
    script: list[Step] = [
        ToolUse(
            "Agent",
            {"description": "Review the code", "prompt": brief, "subagent_type": "reviewer"},
        ),
        Text("The reviewer is on it."),
        Text("The review is done."),  # the turn the subagent's end starts
    ]
    # The subagent's own turns come to the same stand-in: told apart by its prompt.
    reviewer: list[Step] = [
        ToolUse("Bash", {"command": "echo one > one.txt", "description": "First look"}),
        ToolUse("Bash", {"command": "echo two > two.txt", "description": "Second look"}),
        Text("Reviewed: all good."),
    ]
    session = start(
        tmp_path,
        page,
        live_board,
        script,
        "subagent",
        allowed_tools=["Bash", "Agent"],
        threads={brief: reviewer},
    )
    run = session.result()

    assert (run.project / "one.txt").read_text() == "one\n"
    assert (run.project / "two.txt").read_text() == "two\n"
    expect(roster_row(page).locator("[data-session-state]")).to_have_count(1)  # one session
    expect_ended(page)
    marked = roster_row(page).locator('.session-calls li.call[data-subagent="reviewer"]')
    expect(marked).to_have_count(2)
    for command in ("echo one > one.txt", "echo two > two.txt"):
        expect(marked.filter(has_text=f"reviewer · Running `{command}`")).to_have_count(1)
    expect(marked).to_have_class([re.compile("call--ok")] * 2)
    # The parent's own call (starting the subagent) is not marked.
    expect(session_calls(page)).to_have_count(3)
    unmarked = roster_row(page).locator(".session-calls li.call:not([data-subagent])")
    expect(unmarked).to_have_count(1)
    calls = roster_api(live_board)["calls"]
    assert [(c["tool"], c["subagent"]) for c in calls] == [
        ("Agent", None),
        ("Bash", "reviewer"),
        ("Bash", "reviewer"),
    ], calls
    assert_not_reloaded(page)


# -- a skill's shell line ------------------------------------------------------------------------


def test_a_skills_rm_rf_line_waits_for_a_person_and_a_deny_keeps_the_folder(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    project = tmp_path / "claude" / "project"
    skill = project / ".claude" / "skills" / "clean"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: clean\ndescription: Cleans the build\n---\n"
        "Clean the build:\n\n!`rm -rf build`\n\nThen say it is clean.\n"
    )
    build = project / "build"
    build.mkdir()
    (build / "app.js").write_text("// built\n")
    script: list[Step] = [ToolUse("Skill", {"skill": "clean"}), Text("The build stays.")]
    session = start(tmp_path, page, live_board, script, "skill", allowed_tools=["Bash", "Skill"])

    item = held_calls(page)
    expect(item).to_have_count(1, timeout=CLI_MS)
    expect(item.locator("strong")).to_have_text(AGENT)
    expect(item.locator("code.call-summary")).to_have_text("rm -rf build")
    expect(item).to_contain_text("rule “Recursive delete”")
    assert session.running
    assert build.exists()
    note = "Keep the build: the release is cut from it"
    item.locator("input[name=note]").fill(note)
    item.get_by_role("button", name="Deny", exact=True).click()
    expect(held_calls(page)).to_have_count(0)
    run = session.result()

    assert (build / "app.js").read_text() == "// built\n"  # never ran
    assert run.result.get("result") == "The build stays."
    # The skill's text reaches the model with the line replaced by the board's answer.
    read = json.dumps([r.body.get("messages") for r in session.api.main_loop])
    refused = f"[not run: blocked by hook: Denied by {USERNAME} on the board: {note}"
    assert refused in read, read[-3000:]
    expect_ended(page)
    [shell] = [c for c in roster_api(live_board)["calls"] if c["tool"] == "Bash"]
    assert (shell["summary"], shell["outcome"]) == ("Running `rm -rf build`", "denied"), shell
    shown = session_calls(page).filter(has_text="Running `rm -rf build`")
    expect(shown).to_have_class("call call--denied")
    assert_not_reloaded(page)


# -- a call the client refuses itself ------------------------------------------------------------


def test_a_call_the_client_refuses_itself_is_not_running_after_the_session_ends(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    settings = copied_settings(page, live_board)
    settings["permissions"] = {"deny": ["Bash(rm:*)"]}  # the client's own, not the board's
    project = tmp_path / "claude" / "project"
    project.mkdir(parents=True)
    (project / "notes.txt").write_text("keep\n")
    script: list[Step] = [
        ToolUse("Bash", {"command": "rm -f notes.txt", "description": "Remove the notes"}),
        Text("The notes stay."),
    ]
    session = Session(script, tmp_path / "claude", settings, live_board.agent_token, "refused")
    run = session.result()

    assert (project / "notes.txt").exists()
    [result] = session.api.tool_results()
    assert result.is_error and "has been denied" in result.text, result
    # The board saw the call start (PreToolUse) but never its end: the client refused it.
    assert "PreToolUse" in [h.get("hook_event") for h in run.hook_responses()]
    expect_ended(page)
    [only] = roster_api(live_board)["calls"]
    assert (only["summary"], only["outcome"]) == ("Running `rm -f notes.txt`", "refused"), only
    expect(session_calls(page)).to_have_count(1)
    expect(session_calls(page).first).to_have_class("call call--refused")
    expect(roster_row(page).locator(".call--running")).to_have_count(0)
    assert_not_reloaded(page)

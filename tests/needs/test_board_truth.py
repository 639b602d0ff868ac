"""The board stays true with a day of work (issue 38): failures stay in view, each item's
help fits the state it is in."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from boards.clients import calls, sessions
from boards.core import selectors, services
from boards.core.rules import needs_of
from boards.core.selectors.sessions import human_duration
from boards.core.states import GONE_FACTOR
from boards.models import Agent, Event, Task, ToolCall
from boards.needs import decisions
from tests.clients.test_hooks import bash, hook
from tests.support.factories import make_token
from tests.support.htmltext import flat


def finish(agent, task_id: str, status: str = "completed") -> None:
    assert agent.call("TaskClaim", {"taskId": task_id}).status == 200
    assert agent.call("TaskUpdate", {"taskId": task_id, "status": status}).status == 200


def completed_cards(html: str) -> list[int]:
    column = flat(html).split('id="cards-completed"', 1)[1].split('id="more-completed"', 1)[0]
    return [int(n) for n in re.findall(r'<article id="task-(\d+)"', column)]


# -- failures in view ----------------------------------------------------------------------


def test_a_failure_followed_by_25_completions_is_first_in_its_column_with_retry(
    alice, board, person_client
):
    alice.create("Flaky deploy")  # 1, nothing waits on it: no grace, no reason needed
    finish(alice, "1", "failed")
    for n in range(2, 27):
        alice.create(f"Chore {n}")
        finish(alice, str(n))

    html = person_client.get("/boards/team/").content.decode()
    cards = completed_cards(html)
    assert cards[0] == 1
    assert len(cards) == selectors.COLUMN_PAGE["completed"]
    assert "/boards/team/tasks/1/retry" in html
    assert Task.objects.get(board=board, number=1).needs == ""


def test_cancelled_work_is_pinned_too_and_show_more_never_repeats_a_card(alice, board):
    numbers = []
    for n in range(1, 46):
        alice.create(f"Task {n}")
        if n % 15 == 0:
            assert alice.call("TaskUpdate", {"taskId": str(n), "status": "cancelled"}).status == 200
        else:
            finish(alice, str(n), "failed" if n == 7 else "completed")
        numbers.append(n)

    seen: list[int] = []
    views, cursor = selectors.column_page(board, "completed")
    seen += [v.number for v in views]
    assert seen[:4] == [45, 30, 15, 7]  # dead ends first, the latest finished first
    while cursor:
        views, cursor = selectors.column_page(board, "completed", cursor)
        seen += [v.number for v in views]
    assert sorted(seen) == numbers
    assert len(seen) == len(set(seen))
    keys = [v.sort_key for v in selectors.column_page(board, "completed")[0]]
    # The page's order is the pushed cards' order (Completed sorts newest first: descending).
    assert keys == sorted(keys, reverse=True)


# -- help that fits the state --------------------------------------------------------------


def inbox(client) -> list[dict]:
    response = client.get("/api/inbox")
    assert response.status_code == 200
    return response.json()["items"]


def away(board, agent: str, seconds: float) -> None:
    """``agent`` made its last call ``seconds`` ago (its calls would say otherwise)."""
    Agent.objects.filter(board=board, name=agent).update(
        last_seen=timezone.now() - timedelta(seconds=seconds)
    )


@pytest.fixture(autouse=True)
def measure_afresh():
    decisions._CYCLES.clear()
    yield
    decisions._CYCLES.clear()


def test_a_silent_owners_stalled_work_recommends_release_not_message(alice, board, person_client):
    alice.create("The long one")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert decisions.needs_sweep(now=timezone.now() + timedelta(minutes=11)) == 1
    [item] = inbox(person_client)
    assert item["recommended"]["action"] == "message"  # alice is there: she reads it

    away(board, "alice", board.silent_after_seconds + 5)
    [item] = inbox(person_client)
    assert item["reason"] == "no_progress"
    assert item["recommended"]["action"] == "release"
    assert [a["action"] for a in item["actions"]] == ["open", "message"]
    assert "its owner is silent" in item["question"]

    away(board, "alice", board.silent_after_seconds * GONE_FACTOR + 5)
    [item] = inbox(person_client)
    assert "its owner is gone" in item["question"]
    page = person_client.get("/boards/team/").content.decode()
    assert "its owner is gone" in page
    # Release, the recommended action, clears it.
    response = person_client.post("/boards/team/tasks/1/release/", {"note": ""})
    assert response.status_code in (200, 302)
    assert Task.objects.get(board=board, number=1).needs == ""


def test_ready_work_with_every_agent_gone_is_an_item_until_one_is_back(alice, board, person_client):
    alice.create("Nobody takes this")  # 1
    alice.create("Nor this")  # 2
    later = timezone.now() + timedelta(seconds=board.silent_after_seconds * GONE_FACTOR + 5)

    assert decisions.needs_sweep(now=timezone.now()) == 0  # alice is there
    assert decisions.needs_sweep(now=later) == 2
    assert list(Task.objects.filter(board=board).values_list("needs", flat=True)) == [
        "unattended",
        "unattended",
    ]
    items = inbox(person_client)
    assert [(i["reason"], i["taskId"]) for i in items] == [
        ("unattended", "1"),
        ("unattended", "2"),
    ]
    assert "every agent of the board is gone" in items[0]["question"]
    assert items[0]["recommended"]["action"] == "open"
    event = Event.objects.filter(board=board, kind="needs_attention").first()
    assert event is not None and event.data["reason"] == "unattended"
    # A write on the task keeps what the sweeper found while it stays ready.
    assert person_client.post("/boards/team/tasks/2/priority/", {"priority": "0"}).status_code in (
        200,
        302,
    )
    assert Task.objects.get(board=board, number=2).needs == "unattended"

    # An agent is back: its claim clears its task, the sweeper the rest.
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert Task.objects.get(board=board, number=1).needs == ""
    assert Task.objects.get(board=board, number=2).needs == "unattended"
    assert decisions.needs_sweep(now=timezone.now()) == 1
    assert Task.objects.get(board=board, number=2).needs == ""
    assert inbox(person_client) == []


def test_the_query_and_its_twin_agree_on_unattended_work(alice, board):
    alice.create("Ready")  # 1
    alice.create("Blocked", blockedBy=["1"])  # 2
    alice.create("Working")  # 3
    assert alice.call("TaskClaim", {"taskId": "3"}).status == 200
    candidates = set(
        Task.objects.filter(board=board)
        .may_come_to_be_unattended(board.max_attempts)
        .values_list("number", flat=True)
    )
    now = timezone.now()
    twin = {
        task.number
        for task in Task.objects.filter(board=board)
        if needs_of(
            task,
            blocked=task.blocked,
            waiting=False,
            max_attempts=board.max_attempts,
            grace=timedelta(seconds=board.failure_grace_seconds),
            now=now,
            unattended=True,
        )
        == "unattended"
    }
    assert candidates == twin == {1}


def test_a_held_call_whose_session_ended_cannot_be_approved_and_says_so(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("git push origin main"))
    sessions.session_event(board=board, agent="claude", event=hook("SessionEnd", reason="exit"))
    call = ToolCall.objects.get()
    assert call.state == "requested"

    [item] = inbox(person_client)
    assert "its session ended: nobody waits for the answer" in item["question"]
    assert [a["action"] for a in item["actions"]] == ["deny"]
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve/", {}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "cannot be approved: its session ended" in response.content.decode()
    call.refresh_from_db()
    assert call.state == "requested"
    response = person_client.post(f"/boards/team/calls/{call.pk}/deny/", {})
    assert response.status_code in (200, 302)
    assert inbox(person_client) == []


def test_a_held_call_past_its_deadline_cannot_be_approved(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf build"))
    ToolCall.objects.update(deadline=timezone.now() - timedelta(seconds=1))
    call = ToolCall.objects.get()
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve/", {}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "stopped waiting" in response.content.decode()
    assert ToolCall.objects.get().state == "requested"


def test_what_matters_includes_the_boards_own_decisions(board, person_client):
    make_token(board, "claude")
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf /tmp/x"))
    ToolCall.objects.update(deadline=timezone.now() - timedelta(seconds=30))
    assert calls.tool_calls_expire() == 1
    kinds = [e.kind for e in selectors.activity_page(board, matters=True)]
    assert "tool_call_expired" in kinds
    page = person_client.get("/boards/team/activity/?matters=1").content.decode()
    assert "Nobody answered claude" in page


def test_each_new_item_has_its_own_note_box(alice, board, person_client):
    alice.create("Migrate")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskRequestApproval", {"taskId": "1", "reason": "may I?"}).status == 200
    first = re.findall(
        r'name="note" id="(note-[^"]+)"', flat(person_client.get("/boards/team/").content)
    )
    assert len(first) == 1
    version = board.tasks.get(number=1).version
    denied = person_client.post("/boards/team/tasks/1/deny/", {"note": "no", "version": version})
    assert denied.status_code in (200, 302)
    assert board.tasks.get(number=1).needs != "approval"
    assert person_client.post("/boards/team/tasks/1/reopen/", {}).status_code in (200, 302)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskRequestApproval", {"taskId": "1", "reason": "again?"}).status == 200
    second = re.findall(
        r'name="note" id="(note-[^"]+)"', flat(person_client.get("/boards/team/").content)
    )
    assert len(second) == 1 and second != first


# -- one roster line per session -----------------------------------------------------------


def test_three_sessions_on_one_token_show_each_with_its_own_state_and_calls(board, person_client):
    for name in ("claude", "other"):
        services.agent_seen(board=board, agent=name)  # what the hook door does first
    sessions.session_event(board=board, agent="claude", event=hook("SessionStart", "s-a"))
    sessions.session_event(board=board, agent="claude", event=bash("ls -la", "s-a", "tu-a"))
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf build", "s-b", "tu-b"))
    sessions.session_event(board=board, agent="claude", event=bash("git push", "s-c", "tu-c"))
    sessions.session_event(board=board, agent="other", event=hook("SessionStart", "s-d"))

    [first, other] = selectors.roster(board)
    assert other["name"] == "other"
    assert first["name"] == "claude" and first["waiting"]  # waits on a person: first
    lines = first["sessions"]
    assert [s.session_id for s in lines][:2] in (["s-b", "s-c"], ["s-c", "s-b"])
    assert [s.state for s in lines] == ["waiting", "waiting", "working"]
    assert {s.session_id: s.calls[-1]["doing"] for s in lines}["s-b"] == "Running `rm -rf build`"

    html = person_client.get("/boards/team/").content.decode()
    roster = html.split('id="roster"', 1)[1].split("</section>", 1)[0]
    assert roster.count('class="session session--') == 4
    assert roster.index('data-agent="claude"') < roster.index('data-agent="other"')
    claude = roster.split('data-agent="claude"', 1)[1].split('data-agent="other"', 1)[0]
    assert "rm -rf build" in claude and "git push" in claude and "ls -la" in claude


def test_durations_read_in_human_units():
    assert [human_duration(ms) for ms in (None, 840, 4200, 185_000, 3_720_000)] == [
        "",
        "840 ms",
        "4.2 s",
        "3 min 5 s",
        "1 h 2 min",
    ]


# -- setups that fail loudly ---------------------------------------------------------------


@pytest.fixture
def no_refusals(board):
    cache.delete(selectors.refusals_key(board.slug))
    yield
    cache.delete(selectors.refusals_key(board.slug))


def test_refused_setups_are_listed_on_the_connect_page(board, person_client, no_refusals):
    make_token(board, "worker-1")
    team = make_token(board, "crew", team=True)
    door = "/api/boards/team/hooks/claude-code"
    body = hook("SessionStart", "0b6f2c1e-aaaa-bbbb")
    # A team token with a name another token holds; no token at all; an unknown one.
    taken = Client().post(
        door,
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {team}", "X-Agent": "worker-1", "X-Kanban-Host": "box"},
    )
    missing = Client().post(door, data=body, content_type="application/json")
    unknown = Client().post(
        "/api/boards/team/tools/TaskList",
        data={},
        content_type="application/json",
        headers={"Authorization": "Bearer nope"},
    )
    assert (taken.status_code, missing.status_code, unknown.status_code) == (403, 401, 401)

    rows = selectors.recent_refusals(board)
    assert [(r["status"], r["agent"], r["host"]) for r in rows] == [
        (401, "", ""),
        (401, "claude-0b6f2c1e", ""),  # the name the door gives the session
        (403, "worker-1", "box"),
    ]
    assert rows[2]["code"] == "identity_taken"
    page = person_client.get("/boards/team/connect/").content.decode()
    refusals = page.split('id="refusals"', 1)[1].split("</section>", 1)[0]
    assert "worker-1" in refusals and "on box" in refusals and "Unknown token" in refusals
    assert "pip install agent-kanban" not in page


def test_the_refusals_list_keeps_the_latest_only(board, no_refusals):
    for n in range(selectors.REFUSALS_KEPT + 5):
        Client().post(
            "/api/boards/team/tools/TaskList",
            data={},
            content_type="application/json",
            headers={"Authorization": "Bearer nope", "X-Agent": f"a{n}"},
        )
    rows = selectors.recent_refusals(board)
    assert len(rows) == selectors.REFUSALS_KEPT
    assert rows[0]["agent"] == f"a{selectors.REFUSALS_KEPT + 4}"
    # An unknown board keeps nothing.
    Client().post("/api/boards/nowhere/tools/TaskList", data={}, content_type="application/json")
    assert cache.get(selectors.refusals_key("nowhere")) is None

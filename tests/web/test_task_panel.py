"""The task panel tells the truth at a glance (issue #27): first its status and why, then
the one action its state asks for, then its fields; dependencies removed by a labelled
control; finishing failed or gated work confirmed; a person's retry hands the task back
to any agent, its earlier result kept in the attempts."""

from __future__ import annotations

import json
import re

from boards.core import services
from boards.models import Attempt, Event, Task
from tests.support.factories import make_task
from tests.support.htmltext import flat

CONTROL = re.compile(
    r"<(?:a|button|select|textarea|input(?![^>]*type=\"hidden\"))\b[^>]*>[^<]*<?", re.S
)


def panel(client, number: int) -> str:
    response = client.get(f"/boards/team/tasks/{number}/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    return flat(response.content)


def first_control(html: str) -> str:
    """The first thing a person can focus in the panel, as its markup and text."""
    match = CONTROL.search(html)
    assert match is not None, html[:500]
    return match.group(0)


def fail(agent, task_id: str, result: str = "") -> None:
    assert agent.call("TaskClaim", {"taskId": task_id}).status == 200
    fields = {"result": result} if result else {}
    reply = agent.call("TaskUpdate", {"taskId": task_id, "status": "failed", **fields})
    assert reply.status == 200, reply.body


def test_a_failed_task_leads_with_why_and_retry(alice, person_client):
    alice.create("Build the image")
    fail(alice, "1", "docker: out of disk")
    html = panel(person_client, 1)
    assert "It failed (attempt 1 of 3) and may be retried." in html
    assert 'data-first-action="retry"' in first_control(html)
    assert ">Retry<" in first_control(html)
    # The why comes before the first control, the fields after it.
    assert html.index("data-status-line") < html.index('data-first-action="retry"')
    assert html.index('data-first-action="retry"') < html.index('<dl class="facts">')


def test_a_claimed_gated_task_leads_with_approve_and_names_who_asked(alice, person_client):
    alice.create("Drop the legacy table", requiresApproval=True)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    html = panel(person_client, 1)
    control = first_control(html)
    assert 'data-first-action="approve"' in control and ">Approve<" in control
    assert "It waits for a person&#x27;s approval (asked by alice" in html
    assert "Needs you: it waits for a person&#x27;s approval." in html
    assert "<dt>Owner</dt><dd>— (asked by alice)" in html
    # One Approve on the panel: the old form further down is gone.
    assert html.count(">Approve<") == 1


def test_a_stuck_task_offers_going_on_without_its_dead_blocker_first(alice, board, person_client):
    services.board_settings(board=board, actor="pat", failureGraceSeconds=0)
    alice.create("Build")
    alice.create("Ship", blockedBy=["1"])
    fail(alice, "1")
    html = panel(person_client, 2)
    control = first_control(html)
    assert 'data-first-action="unblock"' in control and "Go on without #1" in control
    assert "a person can retry #1, go on without it, or cancel what waits on it" in html
    done = person_client.post(
        "/boards/team/tasks/2/unblock/", {"blocker": "1"}, headers={"HX-Request": "true"}
    )
    assert done.status_code == 200
    assert list(Task.objects.get(board=board, number=2).blocked_by.all()) == []


def test_a_dependent_of_a_gated_claim_says_it_waits_for_a_person(alice, bob, person_client):
    alice.create("Drop the legacy table", requiresApproval=True)
    alice.create("Rebuild the reports", blockedBy=["1"])
    assert bob.call("TaskClaim", {"taskId": "1"}).status == 202
    html = panel(person_client, 2)
    assert "Waiting on #1, which waits for approval by a person (asked by bob)." in html
    assert "Can move now" not in html
    assert "data-waits-for-person" in html


def test_a_blocker_is_removed_by_a_labelled_button(alice, person_client):
    alice.create("Build")
    alice.create("Ship", blockedBy=["1"])
    html = panel(person_client, 2)
    assert ">Remove #1 as a blocker</button>" in html
    assert "×</button>" not in html


def test_finishing_failed_or_gated_work_asks_to_confirm(alice, board, person_client):
    alice.create("Build")
    fail(alice, "1")
    html = panel(person_client, 1)
    completed = re.search(
        r'<form[^>]*hx-confirm="([^"]*)"[^>]*>\s*<input[^>]*>'
        r'<input type="hidden" name="status" value="completed">',
        html,
    )
    assert completed is not None
    assert "#1 failed. Mark it completed anyway?" in completed.group(1)
    assert 'value="pending"><button type="submit" data-status-button="pending">' in html

    make_task(board, "Migrate", requires_approval=True)  # 2
    gated = panel(person_client, 2)
    assert "#2 needs a person&#x27;s approval and has none. Mark it cancelled anyway?" in gated
    assert alice.call("TaskClaim", {"taskId": "2"}).status == 202
    asked = panel(person_client, 2)
    assert "#2 waits for a person&#x27;s approval. Mark it completed without deciding it?" in asked

    make_task(board, "Plain work")  # 3
    assert (
        "hx-confirm" not in panel(person_client, 3).split("<h3>Actions</h3>")[1].split("</div>")[0]
    )


def test_a_persons_retry_hands_the_task_back_unowned_with_the_result_in_its_attempts(
    alice, bob, board, person_client
):
    alice.create("Build")
    fail(alice, "1", "docker: out of disk")
    response = person_client.post("/boards/team/tasks/1/retry/")
    assert response.status_code == 302
    task = Task.objects.get(board=board, number=1)
    assert (task.status, task.owner, task.result, task.failures) == ("pending", "", "", 0)
    [attempt] = Attempt.objects.filter(task=task)
    assert (attempt.agent, attempt.outcome, attempt.result) == (
        "alice",
        "failed",
        "docker: out of disk",
    )
    event = Event.objects.filter(board=board, kind="status").latest("seq")
    assert event.data["fields"]["owner"] == {"from": "alice", "to": ""}
    assert event.data["fields"]["result"] == {"from": "docker: out of disk", "to": ""}
    html = panel(person_client, 1)
    assert "<dt>Owner</dt><dd>—" in html
    assert "“docker: out of disk”" in html  # in the attempts
    # Any agent may claim it now, not only the one that failed it.
    assert bob.call("TaskClaim", {"taskId": "1"}).status == 200


def test_an_agent_retrying_its_own_failure_keeps_it(alice, board):
    alice.create("Build")
    fail(alice, "1", "flaky")
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "pending"}).status == 200
    task = Task.objects.get(board=board, number=1)
    assert (task.owner, task.result) == ("alice", "flaky")


def test_retry_of_a_pending_task_whose_attempts_are_used_up_counts_them_afresh(
    alice, board, person_client
):
    services.board_settings(board=board, actor="pat", maxAttempts=1)
    alice.create("Build")
    fail(alice, "1")
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "pending"}).status == 200
    task = Task.objects.get(board=board, number=1)
    assert (task.status, task.failures, task.needs) == ("pending", 1, "failed")
    assert 'data-first-action="retry"' in first_control(panel(person_client, 1))
    person_client.post("/boards/team/tasks/1/retry/")
    task.refresh_from_db()
    assert (task.failures, task.needs) == (0, "")


def test_the_panel_says_when_a_person_asked_for_it_and_stays_quiet_for_the_pages_refresh(
    alice, person_client
):
    alice.create("Build the image")
    asked = {"HX-Request": "true", "HX-Target": "section#detail"}
    by_person = person_client.get("/boards/team/tasks/1/", headers={**asked, "HX-Source": "a"})
    assert json.loads(by_person["HX-Trigger"]) == {"kanban:asked": {"target": "#detail"}}
    refresh = person_client.get(
        "/boards/team/tasks/1/", headers={**asked, "HX-Source": "section#detail"}
    )
    assert "HX-Trigger" not in refresh
    elsewhere = person_client.get("/boards/team/tasks/1/", headers={"HX-Request": "true"})
    assert "HX-Trigger" not in elsewhere
    # A move from the Move menu: quiet when done (the board shows it), told when refused.
    menu = {**asked, "HX-Source": "div#move-menu"}
    moved = person_client.post(
        "/boards/team/tasks/1/status/", {"status": "completed"}, headers=menu
    )
    assert moved.status_code == 200
    assert "HX-Trigger" not in moved
    refused = person_client.post("/boards/team/tasks/1/status/", {"status": "bogus"}, headers=menu)
    assert refused.status_code == 400
    assert "kanban:asked" in refused["HX-Trigger"]

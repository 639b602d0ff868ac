"""What needs a person (SPEC §12): one definition, stored by the write that makes it or by
the sweeper when a grace ends; the board's strip, ``/inbox/``, ``GET /api/inbox`` and the
decisions that answer each item, with the note reaching the agent concerned."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from boards.core import services
from boards.models import Event, Membership, Message, Role, Task
from boards.needs import decisions, reads
from boards.needs.inbox import inbox_counts, inbox_items
from boards.web import rendering
from tests.support.factories import make_task
from tests.support.htmltext import flat


def needs(board, number: int) -> str:
    return Task.objects.get(board=board, number=number).needs


def inbox(client: Client) -> dict:
    response = client.get("/api/inbox")
    assert response.status_code == 200, response.content[:300]
    return response.json()


def fail(agent, task_id: str) -> None:
    assert agent.call("TaskClaim", {"taskId": task_id}).status == 200
    assert agent.call("TaskUpdate", {"taskId": task_id, "status": "failed"}).status == 200


def later(board, seconds: float = 0) -> timezone.datetime:
    """A moment past the board's failure grace (and ``seconds`` more)."""
    return timezone.now() + timedelta(seconds=board.failure_grace_seconds + 1 + seconds)


# -- failed: a grace for the agent, then a person ----------------------------------------


def test_a_first_failure_may_be_retried_within_the_grace_then_needs_a_person(
    alice, board, person_client
):
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2
    fail(alice, "1")

    # Within the grace: the dependent waits, not stuck, and nothing asks a person yet.
    ship = alice.call("TaskGet", {"taskId": "2"}).body["task"]
    assert (ship["blocked"], ship["stuck"]) == (True, False)
    assert needs(board, 1) == ""
    assert inbox(person_client)["count"] == 0
    card = person_client.get("/boards/team/").content.decode()
    assert "may be retried" in card

    # The grace ends with no other write: the sweeper records it.
    assert decisions.needs_sweep(now=later(board)) == 1
    assert needs(board, 1) == "failed"
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["stuck"] is True
    event = Event.objects.filter(board=board, kind="needs_attention").get()
    assert (event.task_number, event.data["reason"]) == (1, "failed")
    [item] = inbox(person_client)["items"]
    assert (item["reason"], item["taskId"], item["board"]) == ("failed", "1", "team")
    assert item["recommended"]["action"] == "retry"
    assert item["recommended"]["url"] == "/boards/team/tasks/1/retry/"
    assert [a["action"] for a in item["actions"]][:2] == ["skip", "cancel-chain"]
    # A second sweep finds nothing new: no event twice.
    assert decisions.needs_sweep(now=later(board, 5)) == 0
    assert Event.objects.filter(board=board, kind="needs_attention").count() == 1


def test_an_agent_that_retries_within_the_grace_never_reaches_a_person(alice, board):
    alice.create("Build")
    alice.create("Ship", blockedBy=["1"])
    fail(alice, "1")
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "pending"}).status == 200
    assert decisions.needs_sweep(now=later(board)) == 0
    assert needs(board, 1) == ""
    assert not Event.objects.filter(kind="needs_attention").exists()


def test_a_failure_nothing_waits_on_asks_nobody_until_its_attempts_are_used_up(alice, board):
    services.board_settings(board=board, actor="pat", maxAttempts=2)
    alice.create("Leaf")
    fail(alice, "1")
    assert decisions.needs_sweep(now=later(board)) == 0 and needs(board, 1) == ""
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "pending"}).status == 200
    fail(alice, "1")
    assert needs(board, 1) == "failed"  # at once: the agent may not retry it any more


def test_go_on_without_it_lets_an_agent_claim_the_dependent_and_tells_the_agents(
    alice, bob, board, person_client
):
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2
    fail(alice, "1")
    decisions.needs_sweep(now=later(board))
    assert bob.call("TaskClaim", {}).body.get("task") is None  # nothing ready

    done = person_client.post("/boards/team/tasks/1/skip/", {"note": "ship without it"})
    assert done.status_code in (200, 302)
    assert needs(board, 1) == ""  # nothing waits on it any more
    claimed = bob.call("TaskClaim", {}).body["task"]
    assert (claimed["id"], claimed["status"]) == ("2", "in_progress")
    told = Message.objects.get(board=board, recipient="alice")
    assert "#2 go on without it" in told.body and "ship without it" in told.body
    assert inbox(person_client)["count"] == 0


def test_go_on_without_a_task_nothing_waits_on_is_refused_and_changes_nothing(
    alice, board, person_client
):
    alice.create("Alone")
    before = board.tasks.values_list("version", flat=True).get()
    refused = person_client.post("/boards/team/tasks/1/skip/", HTTP_HX_REQUEST="true")
    assert refused.status_code == 409
    assert "Nothing waits on #1" in refused.content.decode()
    assert board.tasks.values_list("version", flat=True).get() == before


def test_cancel_the_chain_cancels_every_unfinished_task_downstream(alice, board, person_client):
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2
    alice.create("Announce", blockedBy=["2"])  # 3
    alice.create("Unrelated")  # 4
    fail(alice, "1")
    decisions.needs_sweep(now=later(board))

    # Asked from the inbox: the task's panel shows what it cancels, and posts that back.
    asked = person_client.post("/boards/team/tasks/1/cancel-chain/", {"note": "plan changed"})
    assert asked.headers["Location"] == "/boards/team/tasks/1/"
    assert board.tasks.get(number=2).status == "pending"
    panel = person_client.get("/boards/team/tasks/1/").content.decode()
    assert 'name="chain" value="2 3"' in panel
    person_client.post(
        "/boards/team/tasks/1/cancel-chain/", {"note": "plan changed", "chain": "2 3"}
    )
    statuses = dict(board.tasks.values_list("number", "status"))
    assert statuses == {1: "failed", 2: "cancelled", 3: "cancelled", 4: "pending"}
    assert inbox(person_client)["count"] == 0  # nothing is left waiting on anything


# -- stranded, approval ------------------------------------------------------------------


def test_a_denial_that_strands_dependents_needs_a_person_at_once(alice, board, person_client):
    make_task(board, "Migrate", requires_approval=True)  # 1
    alice.create("Deploy", blockedBy=["1"])  # 2
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202  # awaiting approval
    assert inbox(person_client)["items"][0]["reason"] == "approval"

    person_client.post("/boards/team/tasks/1/deny/", {"note": "not in prod"})
    [item] = inbox(person_client)["items"]
    assert (item["reason"], item["taskId"]) == ("stranded", "1")
    assert item["recommended"]["action"] == "skip"
    assert "reopen" in [a["action"] for a in item["actions"]]

    person_client.post("/boards/team/tasks/1/reopen/", {"note": "try staging first"})
    assert board.tasks.get(number=1).status == "pending"
    assert inbox(person_client)["count"] == 0


def test_a_note_typed_before_approve_reaches_the_agent(alice, board, person_client):
    make_task(board, "Run the production migration", requires_approval=True)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    html = person_client.get("/boards/team/").content.decode()
    strip = html[html.index('id="needs"') : html.index("</section>", html.index('id="needs"'))]
    # One form: the note box goes with Approve as with Deny.
    assert strip.count("<form") == 1 and 'name="note"' in strip
    version = board.tasks.get(number=1).version
    person_client.post(
        "/boards/team/tasks/1/approve/", {"note": "go ahead, watch the locks", "version": version}
    )
    unread = alice.call("InboxRead", {}).body
    assert any("go ahead, watch the locks" in m["body"] for m in unread["messages"])


def test_an_approval_asked_again_shows_what_changed_since_the_approved_version(
    alice, board, person_client
):
    alice.create("Migrate", description="Add the column")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    asked = alice.call("TaskRequestApproval", {"taskId": "1", "reason": "about to migrate"})
    assert asked.status == 200
    version = board.tasks.get(number=1).version
    person_client.post("/boards/team/tasks/1/approve/", {"version": version})
    changed = {"taskId": "1", "description": "Add the column and drop the old one"}
    assert alice.call("TaskUpdate", changed).status == 200
    again = {"taskId": "1", "reason": "the plan grew: may I drop it too?"}
    assert alice.call("TaskRequestApproval", again).status == 200

    # The strip loads what is decided when the item is opened.
    strip = person_client.get("/boards/team/").content.decode()
    assert 'hx-get="/boards/team/tasks/1/decided/"' in strip
    with CaptureQueriesContext(connection) as queries:
        response = person_client.get("/boards/team/tasks/1/decided/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Changed since version {version + 1} was approved" in html
    assert "<del>Add the column</del>" in html
    assert "<ins>Add the column and drop the old one</ins>" in html
    assert html.count("<del>") == 1  # the request itself is not a change
    # alice's last actions, newest first, in sentences.
    recent = html[html.index("alice's last actions") :]
    assert recent.index("awaits approval") < recent.index("updated by alice")
    assert len(queries) <= 8  # session, user, board, role, task, and the three reads
    # A task that is not there is a 404.
    assert person_client.get("/boards/team/tasks/99/decided/").status_code == 404


def test_desktop_notifications_come_from_the_inbox_by_each_boards_choices(
    alice, board, person, person_client
):
    make_task(board, "Deploy", requires_approval=True)
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    items = inbox_items(person)
    pushed = rendering.inbox_parts(items, person, count_only=True)
    assert 'id="inbox-count"' in pushed and 'id="inbox-list"' not in pushed
    assert 'data-need="team:task-1:approval"' in pushed  # the defaults notify of approvals
    assert 'data-url="/boards/team/tasks/1/"' in pushed
    # The person chose only completions on this board: the item still counts, but tells
    # nobody.
    person_client.post("/boards/team/notify/", {"kinds": ["completed"]})
    pushed = flat(rendering.inbox_parts(inbox_items(person), person, count_only=True))
    assert "data-need=" not in pushed
    assert '<span id="inbox-count" class="count" hx-swap-oob="true">1</span>' in pushed
    # "Approval requested" alone brings approvals back, not other reasons.
    person_client.post("/boards/team/notify/", {"kinds": ["approval_requested"]})
    assert 'data-need="team:task-1:approval"' in rendering.inbox_parts(
        inbox_items(person), person, count_only=True
    )


# -- not started -------------------------------------------------------------------------


def test_work_assigned_and_not_started_within_the_grace_needs_a_person(
    alice, bob, board, person_client
):
    alice.create("Review")
    person_client.post("/boards/team/tasks/1/reassign/", {"owner": "bob"})
    assert decisions.needs_sweep() == 0 and needs(board, 1) == ""
    assert decisions.needs_sweep(now=later(board)) == 1
    [item] = inbox(person_client)["items"]
    assert (item["reason"], item["agent"]) == ("not_started", "bob")
    assert item["recommended"]["method"] == "GET"  # choosing the new owner is on the panel

    # bob starts it: no longer "not started".
    assert bob.call("TaskClaim", {}).body["task"]["id"] == "1"
    assert needs(board, 1) == "" and inbox(person_client)["count"] == 0


def test_release_frees_in_progress_work_and_its_old_owner_loses_the_lease(
    alice, board, person_client
):
    alice.create("Stalled")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    person_client.post("/boards/team/tasks/1/release/", {"note": "another agent will do it"})
    task = board.tasks.get(number=1)
    assert (task.status, task.owner) == ("pending", "")
    refused = alice.call("TaskUpdate", {"taskId": "1", "notes": "still here"})
    assert refused.status == 409 and refused.body["error"]["code"] == "lease_lost"
    assert "another agent will do it" in Message.objects.get(recipient="alice").body


# -- the inbox: every board, by role -----------------------------------------------------


def test_the_inbox_lists_every_board_by_role_and_only_the_actions_the_role_allows(
    alice, agent_factory, board, other_board, person, django_user_model
):
    Membership.objects.create(board=other_board, user=person, role=Role.OPERATOR)
    carol = agent_factory("carol", on=other_board)
    make_task(board, "Gated here", requires_approval=True)
    make_task(other_board, "Gated there", requires_approval=True)
    carol.create("Build there")  # 2 on other
    carol.create("Ship there", blockedBy=["2"])
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 202
    assert carol.call("TaskClaim", {"taskId": "1"}).status == 202
    fail(carol, "2")
    decisions.needs_sweep(now=later(other_board))

    client = Client()
    client.force_login(person)
    items = inbox(client)["items"]
    # An operator on "other" does not decide approvals there: only the failure shows.
    assert [(i["board"], i["reason"]) for i in items] == [("team", "approval"), ("other", "failed")]
    failed = items[1]
    assert failed["recommended"]["action"] == "retry"

    viewer = django_user_model.objects.create_user("vic", password="pw-vic-12345")
    Membership.objects.create(board=board, user=viewer, role=Role.VIEWER)
    client.force_login(viewer)
    assert inbox(client) == {"count": 0, "items": []}
    assert Client().get("/api/inbox").status_code == 401

    page = Client()
    page.force_login(person)
    html = page.get("/inbox/").content.decode()
    assert 'id="board-team"' in html and 'id="board-other"' in html
    assert "Gated here" in html and "Gated there" not in html
    assert 'hx-ws:connect="/ws/inbox/"' in html
    assert 'id="inbox-count"' in html
    listing = page.get("/boards/").content.decode()
    assert "1 waiting for you" in listing


def test_the_inbox_costs_the_same_queries_whatever_the_boards_hold(alice, board, person):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            items = inbox_items(person)
        assert items
        return len(captured.captured_queries)

    make_task(board, "Gated", requires_approval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    few = queries()
    for n in range(30):
        make_task(board, f"Gated {n}", requires_approval=True)
        alice.call("TaskClaim", {"taskId": str(n + 2)})
    assert queries() == few


# -- live: one socket for all of a person's boards ---------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_inbox_socket_shows_a_request_from_another_board_as_it_is_made(
    open_socket, person, other_board
):
    await database_sync_to_async(Membership.objects.create)(
        board=other_board, user=person, role=Role.APPROVER
    )
    socket = open_socket("/ws/inbox/")
    connected, _ = await socket.connect()
    assert connected
    first = await socket.receive_from(timeout=5)
    assert 'id="inbox"' in first and "Nothing waits for you" in first

    def ask() -> None:
        make_task(other_board, "Rotate the keys", requires_approval=True)
        services.task_claim(board=other_board, agent="dana", task_id=1)

    await database_sync_to_async(ask)()
    pushed = flat(await socket.receive_from(timeout=5))
    assert "Rotate the keys" in pushed and 'id="inbox-count"' in pushed
    assert 'data-approval-task="1"' in pushed

    counter = open_socket("/ws/inbox/?count=1")
    assert (await counter.connect())[0]
    count = flat(await counter.receive_from(timeout=5))
    assert count.startswith('<span id="inbox-count"') and ">1<" in count


# -- messages: sent, then read -----------------------------------------------------------


def test_the_message_box_lists_sent_messages_unread_until_the_agent_reads_them(
    alice, board, person_client
):
    alice.create("Anything")  # alice is on the roster
    person_client.post("/boards/team/messages/", {"recipient": "alice", "body": "use staging"})

    def sent() -> str:
        html = person_client.get("/boards/team/").content.decode()
        start = html.index('id="sent-messages"')
        return html[start : html.index("</div>", start)]

    assert "use staging" in sent() and "sent--unread" in sent()
    assert alice.call("InboxRead", {"ack": True}).status == 200
    assert "sent--read" in sent() and "sent--unread" not in sent()


def test_failed_work_that_needs_a_person_is_pinned_first_in_completed_with_retry(
    alice, board, person_client
):
    alice.create("Build")  # 1
    alice.create("Ship", blockedBy=["1"])  # 2
    fail(alice, "1")
    for n in range(3):  # finished later: by time alone they would come first
        number = alice.create(f"Done {n}")["id"]
        alice.call("TaskClaim", {"taskId": number})
        alice.call("TaskUpdate", {"taskId": number, "status": "completed"})
    decisions.needs_sweep(now=later(board))

    html = person_client.get("/boards/team/").content.decode()
    column = html[html.index('id="cards-completed"') :]
    first = column.index('data-task-id="')
    assert column[first : first + 16] == 'data-task-id="1"'
    card = column[first : column.index("</article>", first)]
    assert "/tasks/1/retry/" in card and "Retry #1" in card
    assert re.search(r'id="holds-completed"[^>]*> · 3 done, 1 failed<', html)


def test_one_boards_flood_hides_nothing_of_another_boards_and_the_count_is_exact(
    alice, agent_factory, board, other_board, person, monkeypatch
):
    """Each board's items are limited on their own (the review: 205 gated claims on one
    board hid another board's approval, and the count was wrong)."""
    monkeypatch.setattr(reads, "ITEMS_SHOWN", 3)
    Membership.objects.create(board=other_board, user=person, role=Role.ADMIN)
    carol = agent_factory("carol", on=other_board)
    for n in range(5):
        make_task(board, f"Gated {n}", requires_approval=True)
        assert alice.call("TaskClaim", {"taskId": str(n + 1)}).status == 202
    make_task(other_board, "Gated there", requires_approval=True)
    assert carol.call("TaskClaim", {"taskId": "1"}).status == 202

    client = Client()
    client.force_login(person)
    answer = inbox(client)
    boards = [i["board"] for i in answer["items"]]
    assert boards.count("team") == 3 and boards.count("other") == 1
    assert answer["count"] == 6
    assert inbox_counts(person) == {board.pk: 5, other_board.pk: 1}

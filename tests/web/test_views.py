"""The board for people: pages, the detail panel and every action, as htmx and as plain forms (SPEC §5)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from boards.core import services
from boards.core.selectors import COLUMN_PAGE
from boards.models import AgentToken, Board, Event, Membership, Message, Role, Task, hash_token
from tests.support.factories import make_board, make_task, make_token
from tests.support.htmltext import flat

HTMX = {"HX-Request": "true"}


# --- helpers -----------------------------------------------------------------------------------


class _Columns(HTMLParser):
    """Which column each card (``data-task-id``) sits in, in page order."""

    def __init__(self) -> None:
        super().__init__()
        self.current = ""
        self.columns: dict[str, list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("data-column"):
            self.current = found["data-column"] or ""
            self.columns[self.current] = []
        elif found.get("data-task-id"):
            self.columns.setdefault(self.current, []).append(found["data-task-id"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.current = ""


def columns_of(html: str) -> dict[str, list[str]]:
    parser = _Columns()
    parser.feed(html)
    return parser.columns


def card_html(html: str, number: int) -> str:
    match = re.search(rf'<article id="task-{number}".*?</article>', html, re.DOTALL)
    assert match, f"no card #{number} on the page"
    return match.group(0)


def page(response) -> str:
    return flat(response.content)


def last_seq(board: Board) -> int:
    return Board.objects.get(pk=board.pk).last_seq


def events_after(board: Board, seq: int) -> list[tuple[str, str]]:
    return list(
        Event.objects.filter(board=board, seq__gt=seq).order_by("seq").values_list("kind", "actor")
    )


def task(board: Board, number: int) -> Task:
    return Task.objects.get(board=board, number=number)


def set_status(board: Board, number: int, status: str) -> None:
    services.task_update(board=board, actor="alice", task_id=number, status=status)


def awaiting_approval(board: Board, subject: str = "Run the migration") -> Task:
    """A task that needs approval, claimed by alice: the request waits for a person."""
    created = make_task(board, subject, requires_approval=True)
    services.task_claim(board=board, agent="alice", task_id=created.number)
    return task(board, created.number)


def board_state(board: Board) -> tuple[Any, ...]:
    fresh = Board.objects.get(pk=board.pk)
    return (
        fresh.last_seq,
        fresh.task_counter,
        list(Task.objects.filter(board=board).order_by("number").values()),
        list(AgentToken.objects.filter(board=board).order_by("pk").values("pk", "revoked_at")),
        Message.objects.filter(board=board).count(),
    )


@pytest.fixture(params=["htmx", "form"])
def mode(request) -> str:
    return request.param


def act(client: Client, mode: str, number: int, action: str, data: dict | None = None):
    return client.post(
        f"/boards/team/tasks/{number}/{action}/",
        data or {},
        headers=HTMX if mode == "htmx" else {},
    )


def assert_shows_task(response, mode: str, number: int) -> None:
    """htmx gets the refreshed detail panel; a plain form post is sent to the task's page."""
    if mode == "htmx":
        assert response.status_code == 200
        assert f'data-detail-task="{number}"' in page(response)
        assert "<html" not in page(response)
    else:
        assert response.status_code == 302
        assert response.url == f"/boards/team/tasks/{number}/"


# --- pages ----------------------------------------------------------------------------------


def test_anonymous_visitor_is_sent_to_login_from_every_page(client, board):
    make_task(board)
    for path in ("/boards/", "/boards/team/", "/boards/team/tasks/1/", "/boards/team/tokens/"):
        response = client.get(path)
        assert response.status_code == 302, path
        assert response.url == f"/login/?next={path}"


def test_root_redirects_to_the_board_list(person_client):
    response = person_client.get("/")
    assert response.status_code == 302
    assert response.url == "/boards/"


def test_board_list_shows_each_boards_done_over_total(person, person_client, board, other_board):
    for subject in ("One", "Two", "Three"):
        make_task(board, subject)
    set_status(board, 1, "completed")
    set_status(board, 2, "completed")
    quiet = make_board("quiet", "Quiet board")
    make_board("secret", "Not pat's")  # pat is no member: not listed
    make_task(other_board, "Elsewhere")
    for joined in (other_board, quiet):
        Membership.objects.create(board=joined, user=person, role=Role.VIEWER)
    response = person_client.get("/boards/")
    assert response.status_code == 200
    found = re.findall(r'href="/boards/([\w-]+)/".*?Tasks (\d+/\d+)', page(response), re.DOTALL)
    progress = dict(found)
    assert progress == {"other": "0/1", "quiet": "0/0", "team": "2/3"}


def test_board_page_puts_each_card_in_its_column(person_client, board):
    make_task(board, "Plain pending")  # 1
    make_task(board, "Started")  # 2
    set_status(board, 2, "in_progress")
    make_task(board, "Waits for #2", blocked_by=["2"])  # 3
    make_task(board, "Finished")  # 4
    set_status(board, 4, "completed")
    make_task(board, "Broke")  # 5
    set_status(board, 5, "failed")
    make_task(board, "Dropped")  # 6
    set_status(board, 6, "cancelled")
    make_task(board, "Blocker is done", blocked_by=["4"])  # 7

    response = person_client.get("/boards/team/")

    assert response.status_code == 200
    html = page(response)
    assert columns_of(html) == {
        "pending": ["1", "7"],
        "in_progress": ["2"],
        "blocked": ["3"],
        "completed": ["6", "5", "4"],  # the most recently finished first
    }
    assert "Tasks 1/7" in html
    for key, count in (("pending", 2), ("in_progress", 1), ("blocked", 1), ("completed", 3)):
        assert re.search(rf'id="count-{key}" class="count[^"]*"[^>]*>{count}<', html)
    assert "blocked by " in card_html(html, 3)
    assert ">#2</a>" in card_html(html, 3)
    assert "blocked by" not in card_html(html, 7)


def test_failed_and_cancelled_cards_are_marked_apart_from_completed(person_client, board):
    for subject in ("Finished", "Broke", "Dropped"):
        make_task(board, subject)
    set_status(board, 1, "completed")
    set_status(board, 2, "failed")
    set_status(board, 3, "cancelled")
    html = page(person_client.get("/boards/team/"))
    completed, failed, cancelled = (card_html(html, n) for n in (1, 2, 3))
    assert 'data-status="completed"' in completed
    assert "✓" in completed
    assert "tag--failed" not in completed and "tag--cancelled" not in completed
    assert 'data-status="failed"' in failed
    assert "✗" in failed
    assert '<span class="tag tag--failed">failed</span>' in failed
    assert 'data-status="cancelled"' in cancelled
    assert '<span class="tag tag--cancelled">cancelled</span>' in cancelled


def test_in_progress_card_shows_active_form_and_owner(person_client, board):
    make_task(board, "Fix auth bug", active_form="Fixing auth bug")
    services.task_claim(board=board, agent="alice", task_id=1)
    card = card_html(page(person_client.get("/boards/team/")), 1)
    assert 'class="spinner"' in card
    assert "Fixing auth bug" in card
    assert "@alice" in card


def test_board_page_lists_approval_requests_with_approve_and_deny(person_client, board):
    awaiting_approval(board, "Drop the old table")
    html = page(person_client.get("/boards/team/"))
    assert "Needs you" in html
    assert 'data-approval-task="1"' in html
    assert 'formaction="/boards/team/tasks/1/approve/"' in html
    assert 'formaction="/boards/team/tasks/1/deny/"' in html


def test_unknown_board_is_404(person_client):
    assert person_client.get("/boards/nope/").status_code == 404
    assert person_client.get("/boards/nope/tasks/1/").status_code == 404
    refused = person_client.post("/boards/nope/tasks/1/status/", {"status": "pending"})
    assert refused.status_code == 404


def test_unknown_task_is_404(person_client, board):
    make_task(board)
    assert person_client.get("/boards/team/tasks/99/").status_code == 404
    assert person_client.get("/boards/team/tasks/99/", headers=HTMX).status_code == 404


def test_task_detail_is_a_full_page_for_a_plain_get(person_client, board):
    make_task(board, "Write docs", description="All of them", prompt="Write the docs")
    response = person_client.get("/boards/team/tasks/1/")
    assert response.status_code == 200
    html = page(response)
    assert "<html" in html
    assert 'data-detail-task="1"' in html
    assert "All of them" in html
    assert "Write the docs" in html
    assert "HX-Request" in response["Vary"]


def test_task_detail_is_only_the_panel_for_htmx(person_client, board):
    make_task(board, "Write docs")
    response = person_client.get("/boards/team/tasks/1/", headers=HTMX)
    assert response.status_code == 200
    html = page(response)
    # The panel names its own address: a page script refreshes it from there.
    assert html.lstrip().startswith(
        '<div class="panel" data-detail-task="1" data-task-url="/boards/team/tasks/1/">'
    )
    assert "<html" not in html
    assert "<nav" not in html
    assert "HX-Request" in response["Vary"]


def test_a_deleted_tasks_panel_is_an_alert_for_htmx_to_show_in_the_panel(person_client, board):
    # htmx 4 swaps a 4xx answer: a panel refreshed after its task was deleted says so.
    answer = person_client.get("/boards/team/tasks/7/", headers=HTMX)
    assert answer.status_code == 404
    assert page(answer) == '<p class="error" role="alert">Task #7 not found</p>'


def test_task_detail_shows_dependencies_both_ways_children_and_history(person_client, board):
    make_task(board, "Goal")  # 1
    make_task(board, "Step", parent_id="1")  # 2
    make_task(board, "After the step", blocked_by=["2"])  # 3
    html = page(person_client.get("/boards/team/tasks/2/", headers=HTMX))
    assert re.search(r"<dt>Parent</dt><dd><a [^>]*>#1</a>", html)
    assert re.search(r"<dt>Blocks</dt><dd><a [^>]*>#3</a>", html)
    assert "<strong>alice</strong> created" in html
    goal = page(person_client.get("/boards/team/tasks/1/", headers=HTMX))
    assert re.search(r"<dt>Children</dt><dd><a [^>]*>#2</a>", goal)


# --- actions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "posted", "expected"),
    [
        ("pending", "completed", "completed"),
        ("pending", "failed", "failed"),
        ("pending", "cancelled", "cancelled"),
        ("pending", "in_progress", "in_progress"),
        ("in_progress", "pending", "pending"),
        ("completed", "pending", "pending"),
    ],
)
def test_status_action_changes_the_status_through_the_service(
    person_client, board, mode, start, posted, expected
):
    make_task(board)
    if start != "pending":
        set_status(board, 1, start)
    seq = last_seq(board)

    response = act(person_client, mode, 1, "status", {"status": posted})

    assert_shows_task(response, mode, 1)
    assert task(board, 1).status == expected
    assert events_after(board, seq) == [("status", "pat")]


def test_completing_a_blocker_from_the_board_unblocks_its_dependent(person_client, board, mode):
    make_task(board, "First")
    make_task(board, "Second", blocked_by=["1"])
    seq = last_seq(board)

    response = act(person_client, mode, 1, "status", {"status": "completed"})

    assert_shows_task(response, mode, 1)
    assert events_after(board, seq) == [("status", "pat"), ("unblocked", "pat")]
    assert columns_of(page(person_client.get("/boards/team/")))["pending"] == ["2"]


def test_reassign_action_gives_the_task_a_new_owner(person_client, board, mode):
    make_task(board)
    services.task_claim(board=board, agent="alice", task_id=1)
    services.agent_seen(board=board, agent="bob")
    seq = last_seq(board)

    response = act(person_client, mode, 1, "reassign", {"owner": "bob"})

    assert_shows_task(response, mode, 1)
    assert (task(board, 1).owner, task(board, 1).status) == ("bob", "pending")
    # In-progress work handed over waits for its new owner to start it, who is told.
    assert events_after(board, seq) == [("reassigned", "pat"), ("message", "pat")]
    assert Message.objects.get(board=board, recipient="bob").task_number == 1


def test_delete_action_deletes_the_task(person_client, board, mode):
    make_task(board, "First")
    make_task(board, "Second", blocked_by=["1"])
    seq = last_seq(board)

    response = act(person_client, mode, 1, "delete")

    if mode == "htmx":
        assert response.status_code == 200
        assert "Task deleted." in page(response)
    else:
        assert response.status_code == 302
        assert response.url == "/boards/team/"
    assert not Task.objects.filter(board=board, number=1).exists()
    assert events_after(board, seq) == [("deleted", "pat"), ("unblocked", "pat")]


def test_approve_action_lets_the_requesting_agents_claim_go_through(person_client, board, mode):
    awaiting_approval(board)
    seq = last_seq(board)

    response = act(person_client, mode, 1, "approve")

    assert_shows_task(response, mode, 1)
    approved = task(board, 1)
    assert (approved.status, approved.owner) == ("in_progress", "alice")
    assert (approved.approval_state, approved.approval_decided_by) == ("approved", "pat")
    assert events_after(board, seq) == [("approved", "pat")]


def test_deny_action_cancels_the_task_with_the_note(person_client, board, mode):
    awaiting_approval(board)
    seq = last_seq(board)

    response = act(person_client, mode, 1, "deny", {"note": "Not on production"})

    assert_shows_task(response, mode, 1)
    denied = task(board, 1)
    assert denied.status == "cancelled"
    assert denied.completed_at is not None
    assert (denied.approval_state, denied.approval_decided_by) == ("denied", "pat")
    assert denied.approval_note == "Not on production"
    # The note reaches the agent that asked, as a message.
    assert events_after(board, seq) == [("denied", "pat"), ("message", "pat")]
    assert Event.objects.get(board=board, seq=seq + 1).data["note"] == "Not on production"


def test_require_approval_action_marks_and_lifts_needs_approval(person_client, board, mode):
    make_task(board)
    seq = last_seq(board)

    response = act(person_client, mode, 1, "require-approval", {"required": "1"})

    assert_shows_task(response, mode, 1)
    assert task(board, 1).approval_required is True
    assert events_after(board, seq) == [("updated", "pat")]

    act(person_client, mode, 1, "require-approval", {"required": "0"})

    assert task(board, 1).approval_required is False


def test_message_action_queues_a_message_for_the_owner(person_client, board, mode):
    make_task(board)
    services.task_claim(board=board, agent="alice", task_id=1)
    seq = last_seq(board)

    response = act(person_client, mode, 1, "message", {"body": "Use the staging database"})

    assert_shows_task(response, mode, 1)
    message = Message.objects.get(board=board)
    assert (message.recipient, message.sender, message.task_number) == ("alice", "pat", 1)
    assert message.body == "Use the staging database"
    assert events_after(board, seq) == [("message", "pat")]


def test_message_action_can_name_another_recipient(person_client, board, mode):
    make_task(board)
    services.agent_seen(board=board, agent="bob")
    act(person_client, mode, 1, "message", {"recipient": "bob", "body": "Help alice"})
    assert Message.objects.get(board=board).recipient == "bob"


def test_board_message_form_queues_a_message(person_client, board, mode):
    services.agent_seen(board=board, agent="alice")
    response = person_client.post(
        "/boards/team/messages/",
        {"recipient": "alice", "body": "Stand by"},
        headers=HTMX if mode == "htmx" else {},
    )
    if mode == "htmx":
        assert response.status_code == 200
        assert "Message queued." in page(response)
    else:
        assert response.status_code == 302
        assert response.url == "/boards/team/"
    message = Message.objects.get(board=board)
    assert (message.recipient, message.sender, message.task_number) == ("alice", "pat", None)


def _blocked_second_task(board: Board) -> None:
    make_task(board, "First")
    make_task(board, "Second", blocked_by=["1"])


def _two_plain_tasks(board: Board) -> None:
    make_task(board, "First")
    make_task(board, "Second")


def _cancelled_second_task(board: Board) -> None:
    _two_plain_tasks(board)
    set_status(board, 2, "cancelled")


@pytest.mark.parametrize(
    ("setup", "action", "data", "status", "message"),
    [
        (
            _blocked_second_task,
            "status",
            {"status": "in_progress"},
            409,
            "Task #2 is blocked by #1",
        ),
        (_blocked_second_task, "reassign", {"owner": "bob"}, 409, "Task #2 is blocked by #1"),
        (_two_plain_tasks, "approve", {}, 409, "Task #2 is not awaiting approval"),
        (_two_plain_tasks, "deny", {"note": "no"}, 409, "Task #2 is not awaiting approval"),
        (_cancelled_second_task, "reassign", {"owner": "bob"}, 409, "Task #2 is cancelled"),
        (_two_plain_tasks, "status", {"status": "bogus"}, 400, "status: unknown status"),
        (_two_plain_tasks, "message", {"body": "hi"}, 400, "recipient: must not be empty"),
    ],
)
def test_action_refused_by_the_service_changes_nothing_and_says_why(
    person_client, board, mode, setup, action, data, status, message
):
    setup(board)
    before = board_state(board)

    response = act(person_client, mode, 2, action, data)

    if mode == "htmx":
        assert response.status_code == status
        assert message in page(response)
        assert 'role="alert"' in page(response)
    else:
        assert response.status_code == 302
        assert response.url == "/boards/team/"
        assert message in page(person_client.get(response.url))
    assert board_state(board) == before


def test_action_on_a_missing_task_is_refused(person_client, board, mode):
    make_task(board)
    before = board_state(board)
    response = act(person_client, mode, 42, "delete")
    if mode == "htmx":
        assert response.status_code == 404
        assert "Task #42 not found" in page(response)
    else:
        assert response.status_code == 302
        assert "Task #42 not found" in page(person_client.get(response.url))
    assert board_state(board) == before


def test_htmx_action_needs_the_csrf_token_the_page_gives_to_htmx(person, board):
    make_task(board)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(person)
    html = page(browser.get("/boards/team/"))
    token = re.search(r'"X-CSRFToken": "([^"]+)"', html)
    assert token

    refused = browser.post("/boards/team/tasks/1/status/", {"status": "completed"}, headers=HTMX)
    assert refused.status_code == 403
    assert task(board, 1).status == "pending"

    response = browser.post(
        "/boards/team/tasks/1/status/",
        {"status": "completed"},
        headers={**HTMX, "X-CSRFToken": token.group(1)},
    )
    assert response.status_code == 200
    assert task(board, 1).status == "completed"


def test_unknown_action_is_404_and_changes_nothing(person_client, board):
    make_task(board)
    before = board_state(board)
    assert person_client.post("/boards/team/tasks/1/explode/").status_code == 404
    assert board_state(board) == before


def test_actions_accept_only_post(person_client, board):
    make_task(board)
    assert person_client.get("/boards/team/tasks/1/delete/").status_code == 405
    assert Task.objects.filter(board=board).count() == 1


# --- reset ----------------------------------------------------------------------------------


def test_reset_with_the_wrong_confirmation_deletes_nothing(person_client, board):
    make_task(board, "First")
    make_task(board, "Second")
    before = board_state(board)

    response = person_client.post("/boards/team/reset/", {"confirm": "Team board"})

    assert response.status_code == 302
    assert response.url == "/boards/team/"
    assert board_state(board) == before
    assert "Type the board&#x27;s slug (team) to confirm the reset." in page(
        person_client.get(response.url)
    )


def test_reset_with_the_slug_deletes_every_task_and_restarts_numbering(person_client, board):
    make_task(board, "First")
    make_task(board, "Second")
    seq = last_seq(board)

    response = person_client.post("/boards/team/reset/", {"confirm": "team"})

    assert response.status_code == 302
    assert response.url == "/boards/team/"
    assert not Task.objects.filter(board=board).exists()
    assert events_after(board, seq) == [("reset", "pat")]
    assert make_task(board, "Fresh start").number == 1


# --- tokens ---------------------------------------------------------------------------------


def call_task_list(token: str):
    return Client().post(
        "/api/boards/team/tools/TaskList",
        data=b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_tokens_page_issues_a_token_shown_once_and_stores_only_its_hash(person_client, board):
    posted = person_client.post("/boards/team/tokens/", {"agent": "carol"})
    # Post/redirect/get: a reload never issues a second token, and the page is not cached.
    assert (posted.status_code, posted.url) == (302, "/boards/team/tokens/")
    response = person_client.get(posted.url)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    match = re.search(r'<pre id="new-token">([^<]+)</pre>', page(response))
    assert match
    raw = match.group(1)
    stored = AgentToken.objects.get(board=board)
    assert (stored.agent, stored.is_team, stored.created_by) == ("carol", False, "pat")
    assert stored.token_hash == hash_token(raw)
    assert stored.token_hash != raw
    assert not AgentToken.objects.filter(token_hash=raw).exists()
    again = page(person_client.get("/boards/team/tokens/"))
    assert raw not in again
    assert stored.prefix in again
    assert call_task_list(raw).status_code == 200


def test_tokens_page_issues_a_team_token(person_client, board):
    response = person_client.post("/boards/team/tokens/", {"team": "1"}, follow=True)
    assert response.status_code == 200
    assert re.search(r'<pre id="new-token">ak_', page(response))
    stored = AgentToken.objects.get(board=board)
    assert (stored.agent, stored.is_team) == ("", True)


def test_token_without_agent_name_or_team_is_refused(person_client, board):
    response = person_client.post("/boards/team/tokens/", {"agent": "  "})
    assert response.status_code == 400
    assert "agent: a token is bound to an agent name, or is a team token" in page(response)
    assert not AgentToken.objects.exists()


def test_revoked_token_is_refused_by_the_tool_api(person_client, board):
    raw = make_token(board, "carol")
    token = AgentToken.objects.get(board=board)
    assert call_task_list(raw).status_code == 200

    response = person_client.post(f"/boards/team/tokens/{token.pk}/revoke/")

    assert response.status_code == 302
    assert response.url == "/boards/team/tokens/"
    token.refresh_from_db()
    assert token.revoked_at is not None
    refused = call_task_list(raw)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "token_revoked"
    assert "revoked" in page(person_client.get("/boards/team/tokens/"))


def test_revoking_another_boards_token_is_404(person_client, board, other_board):
    make_token(other_board, "carol")
    token = AgentToken.objects.get(board=other_board)
    response = person_client.post(f"/boards/team/tokens/{token.pk}/revoke/")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


# --- anonymous writes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("tasks/1/status/", {"status": "completed"}),
        ("tasks/1/status/", {"status": "in_progress"}),
        ("tasks/1/reassign/", {"owner": "mallory"}),
        ("tasks/1/delete/", {}),
        ("tasks/1/approve/", {}),
        ("tasks/1/deny/", {"note": "no"}),
        ("tasks/1/require-approval/", {"required": "0"}),
        ("tasks/1/message/", {"recipient": "alice", "body": "hi"}),
        ("reset/", {"confirm": "team"}),
        ("tokens/", {"agent": "mallory"}),
        ("tokens/{token}/revoke/", {}),
        ("messages/", {"recipient": "alice", "body": "hi"}),
    ],
)
@pytest.mark.parametrize("headers", [{}, HTMX], ids=["form", "htmx"])
def test_anonymous_post_is_sent_to_login_and_changes_nothing(client, board, path, data, headers):
    awaiting_approval(board)
    make_token(board, "alice")
    path = "/boards/team/" + path.format(token=AgentToken.objects.get(board=board).pk)
    before = board_state(board)

    response = client.post(path, data, headers=headers)

    assert response.status_code == 302
    assert response.url == f"/login/?next={path}"
    assert board_state(board) == before


# --- cost -----------------------------------------------------------------------------------


def fill_board(board: Board, count: int) -> None:
    """``count`` tasks in one batch: chains of dependencies, parents, owners, every status."""
    ops: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        op: dict[str, Any] = {"op": "create", "ref": f"t{n}", "subject": f"Task {n}"}
        if n % 3 == 0:
            op["blocked_by"] = [f"t{n - 1}", f"t{n - 2}"]
        if n % 4 == 0:
            op["parent_id"] = f"t{n - 3}"
        if n % 10 == 8 and n % 3:
            op["requires_approval"] = True
        ops.append(op)
    for n in range(1, count + 1):
        if n % 5 == 1 and n % 3:  # an agent finishes only what waits for nothing
            ops.append({"op": "update", "task_id": f"t{n}", "status": "completed"})
        elif n % 5 == 2 and n % 3:
            ops.append(
                {"op": "update", "task_id": f"t{n}", "status": "in_progress", "owner": "bob"}
            )
        elif n % 10 == 4 and n % 3:
            ops.append({"op": "update", "task_id": f"t{n}", "status": "failed"})
    services.agent_seen(board=board, agent="bob")  # an owner is an agent the board knows
    services.task_batch(board=board, actor="alice", ops=ops)
    for n in range(8, count + 1, 10):
        if n % 3:
            services.task_claim(board=board, agent="carol", task_id=n)
    for agent in ("alice", "bob", "carol"):
        services.agent_seen(board=board, agent=agent)


# slow: a big board (500 to 5,000 tasks) or a long history, like tests/core/test_scale.py
@pytest.mark.slow
def test_board_page_costs_the_same_queries_for_10_and_500_tasks(person, person_client, board):
    big = make_board("big", "Big board")
    Membership.objects.create(board=big, user=person, role=Role.ADMIN)
    fill_board(board, 10)
    fill_board(big, 500)
    assert Task.objects.filter(board=big).count() == 500
    person_client.get("/boards/team/")  # the session, the user and the like, once

    with CaptureQueriesContext(connection) as small_queries:
        small = person_client.get("/boards/team/")
    with CaptureQueriesContext(connection) as big_queries:
        large = person_client.get("/boards/big/")

    assert small.status_code == large.status_code == 200
    assert len(columns_of(page(large))["blocked"]) > 0
    shown = {key: len(ids) for key, ids in columns_of(page(large)).items()}
    # Each column shows its first page; the counts stay exact for the rest.
    assert all(n <= COLUMN_PAGE[key] for key, n in shown.items())
    assert re.search(r'id="count-completed"[^>]*>(\d+)<', page(large)).group(1) == str(
        Task.objects.filter(board=big, status__in=["completed", "failed", "cancelled"]).count()
    )
    assert len(small_queries) == len(big_queries), "\n".join(
        q["sql"] for q in big_queries.captured_queries
    )

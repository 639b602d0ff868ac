"""The board's search box and filters: columns filtered on the server, in the URL, kept on
live pushes (issue #24, item 3)."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from boards.core import services
from boards.core.selectors import COLUMN_PAGE
from boards.models import Board, Membership, Role, Task
from tests.conftest import Opener
from tests.support.factories import make_board, make_task
from tests.support.htmltext import flat

WAIT = 5


def cards(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'data-task-id="(\d+)"', html)]


def count_text(html: str, column: str) -> str:
    match = re.search(rf'<span id="count-{column}" class="count"[^>]*>([^<]*)</span>', flat(html))
    assert match, html[:300]
    return match.group(1)


@pytest.fixture
def tasks(board):
    make_task(board, "Run the migration", description="touches the users table")
    make_task(board, "Write the docs")
    make_task(board, "Migrate old boards", priority="high")
    make_task(board, "Review code")
    services.task_claim(board=board, agent="bob", task_id=2)
    return board


def test_the_search_box_filters_every_column_and_counts_say_how_many_of_how_many(
    person_client, tasks
):
    html = person_client.get("/boards/team/?q=migr").content.decode()
    assert cards(html) == [1, 3]
    assert count_text(html, "pending") == "2 of 3"
    assert count_text(html, "in_progress") == "0 of 1"
    # The box shows what was searched, the socket is told (data-query).
    assert 'value="migr"' in html
    assert 'data-query="q=migr"' in html


def test_filters_compose_and_stay_in_the_url(person_client, tasks):
    html = flat(person_client.get("/boards/team/?q=migr&priority=high").content)
    assert cards(html) == [3]
    assert 'data-query="q=migr&amp;priority=high"' in html
    assert '<option value="high" selected>' in html
    html = person_client.get("/boards/team/?owner=bob").content.decode()
    assert cards(html) == [2]
    html = person_client.get("/boards/team/?status=in_progress").content.decode()
    assert cards(html) == [2]


def test_a_value_that_is_no_choice_is_ignored(person_client, tasks):
    reply = person_client.get("/boards/team/?priority=extreme&status=nope")
    assert reply.status_code == 200
    assert sorted(cards(reply.content.decode())) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "query", ['"', "NEAR(", "*", "-", "((", "a" * 10_000, "\x00", "%00", "' OR 1=1 --"]
)
def test_hostile_searches_on_the_board_are_200_or_a_clear_400(person_client, tasks, query):
    reply = person_client.get("/boards/team/", {"q": query})
    assert reply.status_code in (200, 400)
    if reply.status_code == 400:
        assert "Search: " in reply.content.decode()
    htmx = person_client.get("/boards/team/", {"q": query}, headers={"HX-Request": "true"})
    assert htmx.status_code in (200, 400)
    if htmx.status_code == 400:
        assert 'id="filter-error"' in htmx.content.decode()
        assert htmx.headers["HX-Push-Url"] == "false"


def test_the_search_box_answers_htmx_with_the_columns_and_their_sequence(person_client, tasks):
    reply = person_client.get("/boards/team/?q=docs", headers={"HX-Request": "true"})
    html = reply.content.decode()
    assert reply.status_code == 200
    assert cards(html) == [2]
    assert 'id="board-seq"' in html and 'id="board-filter" data-query="q=docs"' in html
    assert 'id="cards-pending" hx-swap-oob="true"' in html
    assert "<header" not in html
    assert "HX-Request" in reply.headers["Vary"]


def test_show_more_keeps_to_the_search(person_client, board):
    for n in range(2 * COLUMN_PAGE["pending"] + 10):
        make_task(board, f"Gizmo {n}" if n % 2 == 0 else f"Other {n}")
    gizmos = COLUMN_PAGE["pending"] + 5
    html = person_client.get("/boards/team/?q=gizmo").content.decode()
    assert len(cards(html)) == COLUMN_PAGE["pending"]
    assert count_text(html, "pending") == f"{gizmos} of {2 * COLUMN_PAGE['pending'] + 10}"
    more = re.search(r'hx-get="([^"]*)"[^>]*hx-target="#cards-pending"', html)
    assert more, "a Show more button"
    url = more.group(1).replace("&amp;", "&")
    assert "q=gizmo" in url
    page = person_client.get(url).content.decode()
    assert len(cards(page)) == 5
    assert all("Gizmo" in s for s in re.findall(r'card-subject">([^<]*)<', page))


def test_the_label_filter_keeps_the_tasks_with_that_label(person_client, board):
    make_task(board, "Fix the login", labels=["Bug"])
    make_task(board, "Add a login page")
    html = person_client.get("/boards/team/?label=bug&q=login").content.decode()
    assert cards(html) == [1]
    assert '<option value="bug" selected>' in html


# slow: a big board (500 to 5,000 tasks) or a long history, like tests/core/test_scale.py
@pytest.mark.slow
def test_the_board_page_costs_the_same_queries_filtered_at_100_and_5000_tasks(
    person, person_client
):
    small, big = make_board("small"), make_board("big")
    for board in (small, big):
        Membership.objects.create(board=board, user=person, role=Role.ADMIN)
    costs = {}
    for board, n in ((small, 100), (big, 5000)):
        Task.objects.bulk_create(
            Task(board=board, number=i, subject=f"Widget {i}" if i % 7 else f"Gadget {i}")
            for i in range(1, n + 1)
        )
        Board.objects.filter(pk=board.pk).update(task_counter=n)
        for name, url in (
            ("page", f"/boards/{board.slug}/"),
            ("search", f"/boards/{board.slug}/?q=gadget"),
            ("filters", f"/boards/{board.slug}/?q=wid&status=pending&priority=normal"),
            ("htmx search", f"/boards/{board.slug}/?q=gadget"),
        ):
            headers = {"HX-Request": "true"} if name.startswith("htmx") else {}
            person_client.get(url, headers=headers)  # warm (sessions, caches)
            with CaptureQueriesContext(connection) as queries:
                reply = person_client.get(url, headers=headers)
            assert reply.status_code == 200
            costs[(name, n)] = len(queries)
    for name in ("page", "search", "filters", "htmx search"):
        assert costs[(name, 100)] == costs[(name, 5000)], (name, costs)


# slow: a big board (500 to 5,000 tasks) or a long history, like tests/core/test_scale.py
@pytest.mark.slow
def test_a_list_and_a_search_cost_the_same_queries_at_100_and_5000_tasks(agent_factory):
    costs = {}
    for n in (100, 5000):
        board = make_board(f"b{n}")
        Task.objects.bulk_create(
            Task(board=board, number=i, subject=f"Widget {i}", notes="gadget" if i % 9 else "")
            for i in range(1, n + 1)
        )
        Board.objects.filter(pk=board.pk).update(task_counter=n)
        agent = agent_factory("alice", on=board)
        for name, body in (
            ("list", {"view": "open", "limit": 50}),
            ("search", {"query": "gadget", "limit": 50}),
            ("search filtered", {"query": "wid gad", "view": "ready", "owner": "", "limit": 50}),
        ):
            agent.call("TaskList", body)
            with CaptureQueriesContext(connection) as queries:
                reply = agent.call("TaskList", body)
            assert reply.status == 200, reply.body
            costs[(name, n)] = len(queries)
    for name in ("list", "search", "search filtered"):
        assert costs[(name, 100)] == costs[(name, 5000)], (name, costs)


# ---- live pushes ------------------------------------------------------------------------


async def seq_of(board: Board) -> int:
    return await database_sync_to_async(
        lambda: Board.objects.values_list("last_seq", flat=True).get(pk=board.pk)
    )()


@pytest.mark.django_db(transaction=True)
async def test_a_pushed_change_that_no_longer_matches_the_search_takes_the_card_off(
    open_socket: Opener, board
):
    await database_sync_to_async(make_task)(board, "Polish the lamp")
    await database_sync_to_async(make_task)(board, "Polish the floor")
    socket = open_socket(f"/ws/boards/team/?seq={await seq_of(board)}&q=lamp")
    connected, _ = await socket.connect()
    assert connected
    # The floor task is changed: it does not match, so it is only ever deleted.
    await database_sync_to_async(services.task_update)(
        board=board, actor="alice", task_id=2, description="now with a rug"
    )
    frame = flat(await socket.receive_from(WAIT))
    assert 'id="task-2" hx-swap-oob="delete"' in frame
    assert 'data-task-id="2"' not in frame
    assert count_text(frame, "pending") == "1 of 2"
    # The lamp task is renamed away from the search: it leaves the view.
    await database_sync_to_async(services.task_update)(
        board=board, actor="alice", task_id=1, subject="Polish the table"
    )
    frame = flat(await socket.receive_from(WAIT))
    assert 'id="task-1" hx-swap-oob="delete"' in frame
    assert 'data-task-id="1"' not in frame
    assert count_text(frame, "pending") == "0 of 2"
    # And comes back when a change makes it match again.
    await database_sync_to_async(services.task_update)(
        board=board, actor="alice", task_id=1, notes="the lamp too"
    )
    frame = flat(await socket.receive_from(WAIT))
    assert 'data-task-id="1"' in frame
    assert count_text(frame, "pending") == "1 of 2"


@pytest.mark.django_db(transaction=True)
async def test_a_socket_without_filters_gets_every_card(open_socket: Opener, board):
    await database_sync_to_async(make_task)(board, "Polish the lamp")
    socket = open_socket(f"/ws/boards/team/?seq={await seq_of(board)}")
    assert (await socket.connect())[0]
    await database_sync_to_async(make_task)(board, "Something else")
    frame = flat(await socket.receive_from(WAIT))
    assert 'data-task-id="2"' in frame
    assert count_text(frame, "pending") == "2"


@pytest.mark.django_db(transaction=True)
async def test_a_filtered_socket_catches_up_with_its_filters(open_socket: Opener, board):
    await database_sync_to_async(make_task)(board, "Polish the lamp", priority="high")
    seq = await seq_of(board)
    await database_sync_to_async(make_task)(board, "Polish the floor")
    await database_sync_to_async(make_task)(board, "Lamp shade", priority="high")
    socket = open_socket(f"/ws/boards/team/?seq={seq}&priority=high")
    assert (await socket.connect())[0]
    frame = flat(await socket.receive_from(WAIT))
    assert 'data-task-id="3"' in frame
    assert 'data-task-id="2"' not in frame
    # A socket told of no seq gets the whole board, filtered.
    other = open_socket("/ws/boards/team/?priority=high&q=lamp")
    assert (await other.connect())[0]
    frame = flat(await other.receive_from(WAIT))
    assert sorted(cards(frame)) == [1, 3]
    assert count_text(frame, "pending") == "2 of 3"

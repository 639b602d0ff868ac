"""The board's WebSocket through the real ASGI stack: origin check, login, pushes, catch-up (SPEC §5)."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from boards.core import services
from boards.models import Board, Membership, Role
from tests.conftest import HOST, ORIGIN, Opener
from tests.support.htmltext import flat

pytestmark = pytest.mark.django_db(transaction=True)


WAIT = 5  # seconds a frame may take at most; receiving returns as soon as it arrives


async def current_seq(board: Board) -> int:
    return await database_sync_to_async(
        lambda: Board.objects.values_list("last_seq", flat=True).get(pk=board.pk)
    )()


async def create_task(board: Board, subject: str, **fields) -> int:
    outcome = await database_sync_to_async(services.task_create)(
        board=board, actor="alice", subject=subject, **fields
    )
    return outcome.task_number


async def connected_at_current_seq(open_socket: Opener, board: Board) -> WebsocketCommunicator:
    """A socket that has seen everything so far, so it gets nothing on connect."""
    socket = open_socket(f"/ws/boards/{board.slug}/?seq={await current_seq(board)}")
    connected, _ = await socket.connect()
    assert connected
    return socket


def seq_in(frame: str) -> int:
    match = re.search(r'id="board-seq" data-seq="(\d+)"', frame)
    assert match, frame[:500]
    return int(match.group(1))


# --- who may connect ------------------------------------------------------------------------


async def test_anonymous_socket_is_refused(open_socket, board):
    socket = open_socket("/ws/boards/team/", headers=[ORIGIN, HOST])
    connected, code = await socket.connect()
    assert not connected
    assert code == 4401


async def test_socket_from_another_origin_is_refused(open_socket, board, session_cookie):
    socket = open_socket(
        "/ws/boards/team/", headers=[(b"origin", b"http://evil.example"), HOST, session_cookie]
    )
    connected, _ = await socket.connect()
    assert not connected


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (b"http://localhost:9999", b"localhost"),  # another port of the same host
        (b"http://localhost", b"localhost:8000"),
        (b"https://localhost", b"localhost"),  # another scheme
        (b"http://localhost.evil.example", b"localhost"),
        (b"http://evil.example", b"evil.example"),  # a host this server does not serve
    ],
)
async def test_socket_from_another_port_scheme_or_host_is_refused(
    open_socket, board, session_cookie, origin, host
):
    socket = open_socket(
        "/ws/boards/team/", headers=[(b"origin", origin), (b"host", host), session_cookie]
    )
    connected, _ = await socket.connect()
    assert not connected


async def test_socket_from_the_same_origin_with_a_port_or_a_trusted_origin_connects(
    open_socket, board, session_cookie, settings
):
    same_port = open_socket(
        "/ws/boards/team/?seq=1",
        headers=[
            (b"origin", b"http://localhost:8000"),
            (b"host", b"localhost:8000"),
            session_cookie,
        ],
    )
    assert (await same_port.connect())[0]
    settings.CSRF_TRUSTED_ORIGINS = ["https://kanban.example.com"]
    trusted = open_socket(
        "/ws/boards/team/?seq=1",
        headers=[
            (b"origin", b"https://kanban.example.com"),
            (b"host", b"localhost"),
            session_cookie,
        ],
    )
    assert (await trusted.connect())[0]


async def test_socket_without_an_origin_is_refused(open_socket, board, session_cookie):
    socket = open_socket("/ws/boards/team/", headers=[HOST, session_cookie])
    connected, _ = await socket.connect()
    assert not connected


async def test_socket_for_an_unknown_board_is_refused(open_socket, board):
    connected, code = await open_socket("/ws/boards/nope/").connect()
    assert not connected
    assert code == 4404


# --- pushes ---------------------------------------------------------------------------------


async def test_socket_without_seq_gets_the_whole_board_on_connect(open_socket, board):
    await create_task(board, "Already there")
    socket = open_socket("/ws/boards/team/")
    connected, _ = await socket.connect()
    assert connected
    frame = flat(await socket.receive_from(timeout=WAIT))
    assert 'id="cards-pending" hx-swap-oob="true"' in frame
    assert 'data-task-id="1"' in frame
    assert seq_in(frame) == 2  # after the board's creation and the task's


async def test_change_made_through_the_service_pushes_the_card(open_socket, board):
    socket = await connected_at_current_seq(open_socket, board)

    await create_task(board, "Write docs")

    frame = flat(await socket.receive_from(timeout=WAIT))
    assert 'id="task-1"' in frame
    assert 'data-task-id="1"' in frame
    assert "hx-swap-oob" in frame
    assert '<hx-upsert hx-target="#cards-pending" key="data-sort" sort>' in frame
    assert "Write docs" in frame
    assert seq_in(frame) == 2


async def test_completing_a_blocker_moves_its_dependent_from_blocked_to_pending(open_socket, board):
    await create_task(board, "First")
    await create_task(board, "Second", blocked_by=["1"])
    socket = await connected_at_current_seq(open_socket, board)

    await database_sync_to_async(services.task_update)(
        board=board, actor="alice", task_id=1, status="completed"
    )

    frame = flat(await socket.receive_from(timeout=WAIT))
    assert '<div id="task-1" hx-swap-oob="delete"></div>' in frame
    assert '<div id="task-2" hx-swap-oob="delete"></div>' in frame
    moved = frame[frame.index('<div id="task-2"') :]
    assert moved.index('<hx-upsert hx-target="#cards-pending" key="data-sort" sort>') < moved.index(
        'data-task-id="2"'
    )
    assert re.search(r'id="count-blocked" class="count"[^>]*hx-swap-oob="true">0<', frame)


async def test_a_persons_action_on_the_board_page_reaches_open_sockets(
    open_socket, board, person_client
):
    await create_task(board, "Review the plan")
    await database_sync_to_async(services.agent_seen)(board=board, agent="bob")
    socket = await connected_at_current_seq(open_socket, board)

    response = await sync_to_async(person_client.post)(
        "/boards/team/tasks/1/reassign/", {"owner": "bob"}
    )

    assert response.status_code == 302
    frame = flat(await socket.receive_from(timeout=WAIT))
    assert 'data-task-id="1"' in frame
    assert 'data-owner="bob"' in frame


async def test_a_boards_changes_never_reach_another_boards_socket(
    open_socket, person, board, other_board
):
    await database_sync_to_async(Membership.objects.create)(
        board=other_board, user=person, role=Role.VIEWER
    )
    watching_other = await connected_at_current_seq(open_socket, other_board)
    watching_team = await connected_at_current_seq(open_socket, board)

    await create_task(board, "Only for team")

    assert 'data-task-id="1"' in await watching_team.receive_from(timeout=WAIT)
    assert await watching_other.receive_nothing(timeout=0.3)


# --- catch-up -------------------------------------------------------------------------------


async def test_reconnecting_with_seq_gets_the_cards_it_missed(open_socket, board):
    first = await connected_at_current_seq(open_socket, board)
    await create_task(board, "Seen before the drop")
    seen = seq_in(await first.receive_from(timeout=WAIT))
    await first.disconnect()

    await create_task(board, "Missed one")
    await create_task(board, "Missed two")
    again = open_socket(f"/ws/boards/team/?seq={seen}")
    connected, _ = await again.connect()

    assert connected
    frame = await again.receive_from(timeout=WAIT)
    assert 'data-task-id="2"' in frame
    assert 'data-task-id="3"' in frame
    assert 'id="task-1"' not in frame
    assert seq_in(frame) == 4


async def test_reconnecting_with_the_current_seq_gets_nothing(open_socket, board):
    await create_task(board, "One")
    await create_task(board, "Two")
    socket = open_socket(f"/ws/boards/team/?seq={await current_seq(board)}")
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_nothing(timeout=0.3)


async def test_reconnecting_after_a_reset_gets_the_whole_board(open_socket, board):
    await create_task(board, "Old")
    seen = await current_seq(board)
    await database_sync_to_async(services.board_reset)(board=board, actor="pat")
    await create_task(board, "New")
    socket = open_socket(f"/ws/boards/team/?seq={seen}")
    connected, _ = await socket.connect()
    assert connected
    frame = flat(await socket.receive_from(timeout=WAIT))
    assert 'id="cards-pending" hx-swap-oob="true"' in frame
    assert "New" in frame
    assert "Old" not in frame


# --- the socket only pushes -----------------------------------------------------------------


async def test_a_client_frame_closes_only_that_socket(open_socket, board):
    talker = await connected_at_current_seq(open_socket, board)
    listener = await connected_at_current_seq(open_socket, board)

    await talker.send_to(text_data="hello")

    closed = await talker.receive_output(timeout=WAIT)
    assert closed["type"] == "websocket.close"
    assert closed["code"] == 4400
    await create_task(board, "Still live")
    assert 'data-task-id="1"' in await listener.receive_from(timeout=WAIT)


# --- the activity feed's socket -------------------------------------------------------------


def rows_in(frame: str) -> list[int]:
    """The sequence numbers of the feed rows a push puts on top of the table, in order."""
    head = '<hx-partial hx-target="#activity-rows" hx-swap="afterbegin">'
    assert frame.startswith(head), frame[:300]
    return [int(n) for n in re.findall(r'<tr data-seq="(\d+)"', frame)]


def resume_in(frame: str) -> str:
    match = re.search(r'<span id="activity-resume" data-url="([^"]*)" hx-swap-oob="true"', frame)
    assert match, frame[-300:]
    return match.group(1).replace("&amp;", "&")


async def test_the_activity_socket_pushes_each_new_event_as_rows_of_the_feed(open_socket, board):
    socket = open_socket(f"/ws/boards/team/activity/?show=all&after={await current_seq(board)}")
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_nothing(timeout=0.3)  # nothing newer than the page shows

    await create_task(board, "Write docs")

    frame = flat(await socket.receive_from(timeout=WAIT))
    assert rows_in(frame) == [2]
    assert "#1 “Write docs” created by alice" in frame
    assert 'id="activity-empty" hx-swap-oob="delete"' in frame
    assert resume_in(frame) == "/ws/boards/team/activity/?show=all&after=2"


async def test_the_activity_socket_catches_up_after_the_row_it_names_newest_first(
    open_socket, board
):
    for subject in ("One", "Two", "Three"):
        await create_task(board, subject)
    socket = open_socket("/ws/boards/team/activity/?show=all&after=2")
    connected, _ = await socket.connect()
    assert connected
    frame = flat(await socket.receive_from(timeout=WAIT))
    assert rows_in(frame) == [4, 3]
    assert resume_in(frame) == "/ws/boards/team/activity/?show=all&after=4"


async def test_the_activity_socket_pushes_only_what_its_filters_keep(open_socket, board):
    socket = open_socket(f"/ws/boards/team/activity/?actor=bob&after={await current_seq(board)}")
    connected, _ = await socket.connect()
    assert connected

    await create_task(board, "By alice")
    assert await socket.receive_nothing(timeout=0.3)
    await database_sync_to_async(services.task_create)(board=board, actor="bob", subject="By bob")

    frame = flat(await socket.receive_from(timeout=WAIT))
    assert rows_in(frame) == [3]
    assert "By bob" in frame
    assert "By alice" not in frame
    assert resume_in(frame) == "/ws/boards/team/activity/?actor=bob&after=3"


async def test_the_activity_socket_refuses_a_filter_the_page_cannot_ask_and_an_outsider(
    open_socket, board, other_board
):
    connected, code = await open_socket("/ws/boards/team/activity/?show=some").connect()
    assert (connected, code) == (False, 4400)
    _, _, cookie = await database_sync_to_async(_login)("olga", board=other_board)
    outsider = open_socket("/ws/boards/team/activity/", headers=[ORIGIN, HOST, cookie])
    assert await outsider.connect() == (False, 4404)
    connected, code = await open_socket(
        "/ws/boards/team/activity/", headers=[ORIGIN, HOST]
    ).connect()
    assert (connected, code) == (False, 4401)


async def test_removing_a_member_closes_their_activity_socket(open_socket, board):
    _, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    feed = open_socket("/ws/boards/team/activity/?show=all", headers=[ORIGIN, HOST, cookie])
    connected, _ = await feed.connect()
    assert connected

    await database_sync_to_async(services.member_remove)(board=board, username="vic", actor="pat")

    assert await closed_with(feed) == 4404


# --- a socket lasts as long as its person's access ------------------------------------------


def _login(username: str, *, board: Board | None = None, role: Role = Role.VIEWER, **extra):
    """A person (a member of ``board`` when given) and their session cookie."""
    user = get_user_model().objects.create_user(username=username, password="pw-12345", **extra)
    if board is not None:
        Membership.objects.create(board=board, user=user, role=role)
    client = Client()
    client.force_login(user)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return user, client, (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode())


async def socket_of(open_socket: Opener, board: Board, cookie) -> WebsocketCommunicator:
    socket = open_socket(f"/ws/boards/{board.slug}/?seq={await current_seq(board)}")
    socket.scope["headers"] = [ORIGIN, HOST, cookie]
    connected, _ = await socket.connect()
    assert connected
    return socket


async def socket_of_refused(open_socket: Opener, board: Board, cookie) -> tuple[bool, int]:
    socket = open_socket(f"/ws/boards/{board.slug}/", headers=[ORIGIN, HOST, cookie])
    connected, code = await socket.connect()
    return connected, code


async def closed_with(socket: WebsocketCommunicator) -> int:
    """The code of the socket's next output, which must be its close (no push before it)."""
    output = await socket.receive_output(timeout=WAIT)
    assert output["type"] == "websocket.close", output
    return output["code"]


async def still_live(board: Board, *sockets: WebsocketCommunicator) -> None:
    number = await create_task(board, "Still live")
    for socket in sockets:
        # Earlier pushes (the removal's own event, announced) may come first.
        for _ in range(5):
            if f'data-task-id="{number}"' in await socket.receive_from(timeout=WAIT):
                break
        else:
            raise AssertionError(f"#{number} never reached the socket")


async def test_removing_a_member_closes_their_sockets_on_that_board_only(
    open_socket, board, other_board
):
    vic, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    await database_sync_to_async(Membership.objects.create)(board=other_board, user=vic)
    on_team = await socket_of(open_socket, board, cookie)
    on_team_too = await socket_of(open_socket, board, cookie)  # a second tab
    on_other = await socket_of(open_socket, other_board, cookie)
    pats = await connected_at_current_seq(open_socket, board)

    await database_sync_to_async(services.member_remove)(board=board, username="vic", actor="pat")

    assert await closed_with(on_team) == 4404  # what connecting now would answer
    assert await closed_with(on_team_too) == 4404
    await still_live(board, pats)
    await still_live(other_board, on_other)
    assert await socket_of_refused(open_socket, board, cookie) == (False, 4404)


async def test_removing_a_member_on_the_members_page_closes_their_socket(
    open_socket, board, person_client
):
    _, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    vics = await socket_of(open_socket, board, cookie)
    pats = await connected_at_current_seq(open_socket, board)

    response = await sync_to_async(person_client.post)("/boards/team/members/", {"remove": "vic"})

    assert response.status_code == 302
    assert await closed_with(vics) == 4404
    await still_live(board, pats)


async def test_changing_a_members_role_keeps_their_socket(open_socket, board):
    _, _, cookie = await database_sync_to_async(_login)("vic", board=board, role=Role.OPERATOR)
    vics = await socket_of(open_socket, board, cookie)

    await database_sync_to_async(services.member_set)(
        board=board, username="vic", role="viewer", actor="pat"
    )

    await still_live(board, vics)  # every role sees the whole board


async def test_a_removal_that_rolls_back_closes_nothing(open_socket, board):
    _, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    vics = await socket_of(open_socket, board, cookie)

    def remove_then_fail() -> None:
        with transaction.atomic():
            services.member_remove(board=board, username="vic", actor="pat")
            raise RuntimeError("the surrounding write failed")

    with pytest.raises(RuntimeError):
        await database_sync_to_async(remove_then_fail)()

    assert await vics.receive_nothing(timeout=0.3)
    await still_live(board, vics)


async def test_a_superuser_taken_off_a_board_keeps_it_until_no_longer_superuser(open_socket, board):
    root, _, cookie = await database_sync_to_async(_login)(
        "root", board=board, is_superuser=True, is_staff=True
    )
    roots = await socket_of(open_socket, board, cookie)

    await database_sync_to_async(services.member_remove)(board=board, username="root", actor="pat")
    await still_live(board, roots)  # still an admin here

    root.is_superuser = False
    await database_sync_to_async(root.save)()
    assert await closed_with(roots) == 4404


async def test_deactivating_a_person_in_the_admin_closes_all_their_sockets(
    open_socket, board, other_board
):
    vic, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    await database_sync_to_async(Membership.objects.create)(board=other_board, user=vic)
    on_team = await socket_of(open_socket, board, cookie)
    on_other = await socket_of(open_socket, other_board, cookie)
    pats = await connected_at_current_seq(open_socket, board)
    _, admin, _ = await database_sync_to_async(_login)("root", is_superuser=True, is_staff=True)

    response = await sync_to_async(admin.post)(
        f"/admin/auth/user/{vic.pk}/change/",
        {
            "username": "vic",
            "is_active": "",  # unticked
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert await closed_with(on_team) == 4401  # what connecting now would answer
    assert await closed_with(on_other) == 4401
    await still_live(board, pats)


async def test_deleting_a_person_in_the_admin_closes_their_sockets(open_socket, board):
    vic, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    vics = await socket_of(open_socket, board, cookie)
    pats = await connected_at_current_seq(open_socket, board)
    _, admin, _ = await database_sync_to_async(_login)("root", is_superuser=True, is_staff=True)

    response = await sync_to_async(admin.post)(
        f"/admin/auth/user/{vic.pk}/delete/", {"post": "yes"}
    )

    assert response.status_code == 302
    assert await closed_with(vics) == 4401
    await still_live(board, pats)


async def test_a_login_of_the_same_person_leaves_their_sockets_alone(open_socket, board):
    _, _, cookie = await database_sync_to_async(_login)("vic", board=board)
    vics = await socket_of(open_socket, board, cookie)

    await sync_to_async(Client().login)(username="vic", password="pw-12345")  # saves last_login

    assert await vics.receive_nothing(timeout=0.3)
    await still_live(board, vics)


def test_a_push_without_cards_names_no_column_pages(board):
    """A push rendered for the roster alone carries no page of any column: rendered after
    a later write committed, its pages would name a card whose own push is still on its
    way, and the page would fetch the column again under a person's drag."""
    from boards.web import rendering

    services.task_create(board=board, actor="alice", subject="Review the pull request")
    header_only = rendering.board_fragments(board.pk, [])
    assert header_only["cards"] == {}
    assert not [part for part in header_only["header"] if part.startswith(("page-", "more-"))]
    assert "roster" in header_only["header"]

    with_card = rendering.board_fragments(board.pk, [1])
    assert 'data-numbers="1"' in with_card["header"]["page-pending"]

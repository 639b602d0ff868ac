"""People act on a board only as far as their role allows (SPEC §8, boards.core.permissions).

Every action of the board's pages is tried by every role and by a person who is
not a member: a non-member gets 404 (the board does not exist for them), a
member below the action's role gets 403 naming both roles, and a refused action
changes nothing. The board's socket and the admin site ask the same table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from boards.core import permissions, services
from boards.models import AgentToken, Board, Membership, Message, Role, Subscription, Task, Webhook
from kanban.asgi import application
from tests.conftest import built_once
from tests.support.factories import make_board, make_task, make_token

ROLES = [Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.ADMIN]


@dataclass
class Door:
    action: str
    method: str
    path: str
    data: dict[str, str] = field(default_factory=dict)
    ok: int = 302


DOORS = [
    Door("view", "get", "/boards/team/", ok=200),
    Door("view", "get", "/boards/team/tasks/1/", ok=200),
    Door("status", "post", "/boards/team/tasks/1/status/", {"status": "in_progress"}),
    Door("reassign", "post", "/boards/team/tasks/1/reassign/", {"owner": "bob"}),
    Door("message", "post", "/boards/team/tasks/1/message/", {"recipient": "alice", "body": "hi"}),
    Door("message", "post", "/boards/team/messages/", {"recipient": "alice", "body": "hi"}),
    Door("approve", "post", "/boards/team/tasks/2/approve/"),
    Door("deny", "post", "/boards/team/tasks/2/deny/", {"note": "not now"}),
    Door("require-approval", "post", "/boards/team/tasks/1/require-approval/", {"required": "1"}),
    Door("delete", "post", "/boards/team/tasks/1/delete/"),
    Door("reset", "post", "/boards/team/reset/", {"confirm": "team"}),
    Door("tokens", "get", "/boards/team/tokens/", ok=200),
    Door("tokens", "post", "/boards/team/tokens/", {"agent": "carol"}),
    Door("tokens", "post", "/boards/team/tokens/{token}/revoke/"),
    Door("retry", "post", "/boards/team/tasks/3/retry/"),
    Door("priority", "post", "/boards/team/tasks/1/priority/", {"priority": "urgent"}),
    Door("labels", "post", "/boards/team/tasks/1/labels/", {"labels": "db, ui"}),
    Door("unblock", "post", "/boards/team/tasks/4/unblock/", {"blocker": "3"}),
    Door("reopen", "post", "/boards/team/tasks/3/reopen/", {"note": "try again"}),
    Door("skip", "post", "/boards/team/tasks/3/skip/", {"note": "not needed"}),
    Door("cancel-chain", "post", "/boards/team/tasks/3/cancel-chain/", {"chain": "4"}),
    Door("release", "post", "/boards/team/tasks/5/release/", {"note": "let another try"}),
    Door("settings", "get", "/boards/team/settings/", ok=200),
    Door("settings", "post", "/boards/team/settings/", {"maxAttempts": "5"}),
    Door("members", "get", "/boards/team/members/", ok=200),
    Door("members", "post", "/boards/team/members/", {"username": "sam", "role": "viewer"}),
    Door("activity", "get", "/boards/team/activity/", ok=200),
    Door("notify", "post", "/boards/team/notify/", {"kinds": "failed"}),
    Door("webhooks", "get", "/boards/team/webhooks/", ok=200),
    Door(
        "webhooks",
        "post",
        "/boards/team/webhooks/",
        {"action": "add", "url": "https://example.com/hook", "kinds": "all"},
    ),
    Door("events", "get", "/api/boards/team/events", ok=200),
    Door("tokens", "get", "/boards/team/connect/", ok=200),
    Door("tokens", "post", "/boards/team/connect/", {"agent": "carol"}),
]


def _state(board: Board) -> tuple:
    """Everything a refused action must leave as it was."""
    board.refresh_from_db()
    return (
        board.last_seq,
        list(Task.objects.filter(board=board).values_list("number", "status", "owner")),
        AgentToken.objects.filter(board=board, revoked_at=None).count(),
        Membership.objects.filter(board=board).count(),
        Message.objects.filter(board=board).count(),
        list(Subscription.objects.filter(board=board).values_list("kinds", flat=True)),
        Webhook.objects.filter(board=board).count(),
    )


def _build_scene() -> int:
    board = make_board("team", "Team board")
    make_token(board, "alice")
    make_token(board, "bob")  # the agent work is reassigned to
    make_task(board, "Plain work")
    gated = make_task(board, "Drop the table", requires_approval=True)
    services.task_claim(board=board, agent="alice", task_id=gated.number)
    make_task(board, "Broken")  # 3: failed, to retry
    make_task(board, "After the broken one", blocked_by=["3"])  # 4: stuck on 3
    services.task_update(board=board, actor="alice", task_id=3, status="failed")
    make_task(board, "Held work")  # 5: in progress with alice, to release
    services.task_claim(board=board, agent="alice", task_id=5)
    get_user_model().objects.create_user("sam", password="pw-sam-1234")
    return board.pk


@pytest.fixture(scope="module")
def built_scene(django_db_setup, django_db_blocker) -> Iterator[int]:
    """The scene is built once for the module (it was most of the matrix's time); each
    test's writes are rolled back to it (``built_once``)."""
    yield from built_once(django_db_blocker, _build_scene)


@pytest.fixture
def scene(db, built_scene) -> Board:
    """The team board with its agents and tasks (1 pending, 2 in progress awaiting
    approval, 3 failed, 4 blocked by 3, 5 in progress with alice), and a person ``sam``
    who is no member; a copy of its own per test."""
    return Board.objects.get(pk=built_scene)


@pytest.fixture
def board(scene) -> Board:
    """The scene's board is the one ``person`` (conftest) administers."""
    return scene


def _client_as(django_user_model, board: Board, role: Role | None) -> Client:
    user = django_user_model.objects.create_user(f"as-{role or 'outsider'}", password="pw-x-12345")
    if role is not None:
        Membership.objects.create(board=board, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("role", [*ROLES, None], ids=[*ROLES, "outsider"])
@pytest.mark.parametrize("door", DOORS, ids=[f"{d.method}-{d.path[13:]}" for d in DOORS])
def test_each_action_is_allowed_from_its_role_up_and_refused_below(
    scene, django_user_model, door, role
):
    client = _client_as(django_user_model, scene, role)
    before = _state(scene)
    # Row ids differ between databases (PostgreSQL's sequences are not reset per test).
    path = door.path.format(token=AgentToken.objects.get(board=scene, agent="alice").pk)
    response = getattr(client, door.method)(path, door.data)

    if role is None:
        assert response.status_code == 404
        assert _state(scene) == before
    elif permissions.may(role, door.action):
        assert response.status_code == door.ok, response.content[:300]
        if door.method == "post":
            assert _state(scene) != before
    else:
        assert response.status_code == 403
        needed = permissions.ACTIONS[door.action].label.lower()
        assert f"Your role on this board is {role.label.lower()}" in response.content.decode()
        assert f"needs {needed}" in response.content.decode()
        assert _state(scene) == before


def test_the_role_table_is_what_the_spec_says():
    least = {action: role.value for action, role in permissions.ACTIONS.items()}
    assert least == {
        "view": "viewer",
        "status": "operator",
        "reassign": "operator",
        "message": "operator",
        "retry": "operator",
        "priority": "operator",
        "labels": "operator",
        "unblock": "operator",
        "reopen": "operator",
        "skip": "operator",
        "cancel-chain": "operator",
        "release": "operator",
        "approve": "approver",
        "deny": "approver",
        "require-approval": "approver",
        "delete": "admin",
        "reset": "admin",
        "tokens": "admin",
        "members": "admin",
        "agents": "admin",
        "settings": "admin",
        "activity": "viewer",
        "notify": "viewer",
        "webhooks": "admin",
        "events": "admin",
    }


def test_a_viewer_sees_no_buttons_it_could_not_use(scene, django_user_model):
    client = _client_as(django_user_model, scene, Role.VIEWER)
    board_page = client.get("/boards/team/").content.decode()
    detail = client.get("/boards/team/tasks/2/").content.decode()
    assert "/tokens/" not in board_page
    assert "/reset/" not in board_page
    for action in ("approve", "deny", "status", "reassign", "delete"):
        assert f"/tasks/2/{action}/" not in detail
    approver = _client_as(django_user_model, scene, Role.APPROVER).get("/boards/team/tasks/2/")
    assert "/tasks/2/approve/" in approver.content.decode()


def test_the_board_list_shows_only_the_persons_boards(scene, django_user_model):
    services.board_create(slug="secret", name="Secret")
    client = _client_as(django_user_model, scene, Role.VIEWER)
    listing = client.get("/boards/").content.decode()
    assert "/boards/team/" in listing
    assert "/boards/secret/" not in listing
    assert client.get("/boards/secret/").status_code == 404


def test_a_superuser_administers_every_board(scene, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(root)
    assert client.get("/boards/team/tokens/").status_code == 200
    assert client.post("/boards/team/tasks/2/approve/").status_code == 302
    assert Task.objects.get(board=scene, number=2).approval_state == "approved"


def test_members_page_gives_changes_and_removes_roles(scene, person_client):
    assert (
        person_client.post(
            "/boards/team/members/", {"username": "sam", "role": "approver"}
        ).status_code
        == 302
    )
    assert Membership.objects.get(board=scene, user__username="sam").role == "approver"
    refused = person_client.post("/boards/team/members/", {"username": "sam", "role": "king"})
    assert refused.status_code == 400
    assert "role: one of viewer, operator, approver, admin" in refused.content.decode()
    unknown = person_client.post("/boards/team/members/", {"username": "nobody", "role": "viewer"})
    assert unknown.status_code == 400
    assert person_client.post("/boards/team/members/", {"remove": "sam"}).status_code == 302
    assert not Membership.objects.filter(board=scene, user__username="sam").exists()


def _socket(client: Client, path: str = "/ws/boards/team/?seq=0") -> WebsocketCommunicator:
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    return WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode()),
        ],
    )


@pytest.mark.django_db(transaction=True)
async def test_the_board_socket_admits_members_and_not_outsiders(django_user_model):
    board = await database_sync_to_async(services.board_create)(slug="team", name="Team")
    viewer = await database_sync_to_async(_client_as)(django_user_model, board, Role.VIEWER)
    outsider = await database_sync_to_async(_client_as)(django_user_model, board, None)

    member_socket = _socket(viewer)
    connected, _ = await member_socket.connect()
    assert connected
    await member_socket.disconnect()

    stranger = _socket(outsider)
    connected, code = await stranger.connect()
    assert not connected
    assert code == 4404  # the same answer as a board that does not exist
    # The server hangs up after a refusal, as daphne does: on Redis the consumer would
    # otherwise go on waiting for its channel past the test's event loop.
    await stranger.disconnect()


def test_the_admin_site_shows_a_staff_member_only_their_boards_and_asks_their_role(
    scene, django_user_model
):
    from django.contrib.auth.models import Permission

    other = services.board_create(slug="other", name="Other")
    make_task(other, "Elsewhere")
    staff = django_user_model.objects.create_user("stella", password="pw-stella-1", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_task"))
    Membership.objects.create(board=scene, user=staff, role=Role.VIEWER)
    client = Client()
    client.force_login(staff)

    listing = client.get("/admin/boards/task/").content.decode()
    assert "Plain work" in listing
    assert "Elsewhere" not in listing

    plain = Task.objects.get(board=scene, number=1)
    client.post("/admin/boards/task/", {"action": "complete", "_selected_action": [plain.pk]})
    assert Task.objects.get(pk=plain.pk).status == "pending"  # a viewer may not move work

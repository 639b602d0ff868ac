"""Invite a teammate (issue #27): an admin makes a one-time, expiring link with a role
from the Members page or ``manage.py invite``; the person chooses a username and a
password, is logged in and is a member with that role; a used, expired or revoked link is
refused with a page that says so."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from boards.core import services
from boards.core.errors import Gone
from boards.models import Event, Invite, Membership, Role, hash_token

PASSWORD = "a-long-unusual-passphrase-42"


def invite_from_members_page(client: Client, role: str) -> str:
    """Create an invite on the Members page; the path of the link it shows once."""
    made = client.post("/boards/team/members/", {"action": "invite", "role": role})
    assert made.status_code == 302
    page = client.get("/boards/team/members/").content.decode()
    link = re.search(r'<pre id="invite-link">([^<]+)</pre>', page)
    assert link is not None, page
    # Shown once: the next visit has no link.
    assert 'id="invite-link"' not in client.get("/boards/team/members/").content.decode()
    return re.sub(r"^https?://[^/]+", "", link.group(1))


def sign_up(path: str, username: str, password: str = PASSWORD) -> tuple[Client, object]:
    client = Client()
    response = client.post(
        path, {"username": username, "password1": password, "password2": password}
    )
    return client, response


def test_an_admin_invites_a_person_who_signs_up_as_an_approver(board, person_client):
    path = invite_from_members_page(person_client, "approver")
    assert path.startswith("/invite/inv_")
    token = path.split("/")[2]
    invite = Invite.objects.get(board=board)
    assert invite.token_hash == hash_token(token) and token not in invite.prefix + "…"
    assert invite.expires_at - invite.created_at == timedelta(days=7)

    page = Client().get(path)
    assert page.status_code == 200
    assert page["Referrer-Policy"] == "same-origin"
    assert "invited you as <strong data-invite-role>approver</strong>" in page.content.decode()

    client, response = sign_up(path, "alice")
    assert response.status_code == 302 and response["Location"] == "/boards/team/"
    alice = get_user_model().objects.get(username="alice")
    assert alice.check_password(PASSWORD)
    assert Membership.objects.get(board=board, user=alice).role == Role.APPROVER
    # Logged in: the board opens.
    assert client.get("/boards/team/").status_code == 200
    kinds = list(Event.objects.filter(board=board).order_by("seq").values_list("kind", "data"))
    assert kinds[-3:] == [
        ("invite", {"action": "created", "role": "approver", "prefix": invite.prefix}),
        ("invite", {"action": "accepted", "role": "approver", "prefix": invite.prefix}),
        ("member", {"person": "alice", "role": "approver"}),
    ]


def test_a_second_use_of_a_link_is_refused_with_a_clear_page(board, person_client):
    path = invite_from_members_page(person_client, "operator")
    sign_up(path, "alice")
    again = Client().get(path)
    assert again.status_code == 410
    assert "already used" in again.content.decode()
    _, second = sign_up(path, "mallory")
    assert second.status_code == 410
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_an_expired_link_is_refused(board):
    invite, raw = services.invite_create(board=board, role="viewer", actor="pat", days=1)
    Invite.objects.filter(pk=invite.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    page = Client().get(f"/invite/{raw}/")
    assert page.status_code == 410 and "has expired" in page.content.decode()
    _, response = sign_up(f"/invite/{raw}/", "alice")
    assert response.status_code == 410
    assert not get_user_model().objects.filter(username="alice").exists()


def test_a_revoked_link_is_refused_and_leaves_the_open_invites(board, person_client):
    path = invite_from_members_page(person_client, "viewer")
    invite = Invite.objects.get(board=board)
    assert (
        f'data-invite="{invite.pk}"' in person_client.get("/boards/team/members/").content.decode()
    )
    person_client.post("/boards/team/members/", {"revoke_invite": str(invite.pk)})
    assert (
        f'data-invite="{invite.pk}"'
        not in person_client.get("/boards/team/members/").content.decode()
    )
    page = Client().get(path)
    assert page.status_code == 410 and "revoked" in page.content.decode()
    assert Event.objects.filter(board=board, kind="invite", data__action="revoked").count() == 1


def test_an_unknown_link_is_a_404(db):
    assert Client().get("/invite/inv_nothing-here/").status_code == 404
    assert Client().get("/invite/ak_not-an-invite/").status_code == 404


def test_the_sign_up_form_holds_to_the_username_rules_and_password_validators(
    board, django_user_model
):
    django_user_model.objects.create_user(username="Alice", password="x")
    _, raw = services.invite_create(board=board, role="viewer", actor="pat")
    path = f"/invite/{raw}/"
    _, taken = sign_up(path, "alice")
    assert taken.status_code == 400 and "is taken" in taken.content.decode()
    _, bad_name = sign_up(path, "no spaces allowed")
    assert bad_name.status_code == 400
    _, weak = sign_up(path, "bob", "password")
    assert weak.status_code == 400 and "too common" in weak.content.decode()
    client = Client()
    differ = client.post(
        path, {"username": "bob", "password1": PASSWORD, "password2": PASSWORD + "x"}
    )
    assert differ.status_code == 400 and "differ" in differ.content.decode()
    # None of these used the link.
    assert Invite.objects.get(board=board).used_at is None
    _, ok = sign_up(path, "bob")
    assert ok.status_code == 302


def test_accepting_checks_single_use_in_the_write(board):
    _, raw = services.invite_create(board=board, role="operator", actor="pat")
    services.invite_accept(token=raw, username="alice", password=PASSWORD)
    with pytest.raises(Gone, match="already used"):
        services.invite_accept(token=raw, username="bob", password=PASSWORD)


def test_only_admins_invite_and_the_role_is_checked(board, person_client, django_user_model):
    operator = django_user_model.objects.create_user(username="olga", password="x")
    Membership.objects.create(board=board, user=operator, role=Role.OPERATOR)
    client = Client()
    client.force_login(operator)
    refused = client.post("/boards/team/members/", {"action": "invite", "role": "admin"})
    assert refused.status_code == 403
    wrong = person_client.post("/boards/team/members/", {"action": "invite", "role": "owner"})
    assert wrong.status_code == 400 and "role: one of" in wrong.content.decode()
    assert not Invite.objects.exists()


def test_adding_an_unknown_username_points_to_an_invite(board, person_client):
    response = person_client.post(
        "/boards/team/members/", {"username": "alice", "role": "approver"}
    )
    assert response.status_code == 400
    assert "invite them with a link instead" in response.content.decode()


def test_manage_py_invite_prints_the_link(board, settings):
    settings.KANBAN_PUBLIC_URL = "https://kanban.example"
    out = StringIO()
    call_command("invite", "team", "approver", stdout=out)
    link = out.getvalue().strip()
    assert re.fullmatch(r"https://kanban\.example/invite/inv_[\w-]+/", link)
    assert Invite.objects.get(board=board).role == "approver"

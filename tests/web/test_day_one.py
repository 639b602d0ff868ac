"""Day one (issue 38): a site admin creates a board from /boards/, and people set labels
on a card."""

from __future__ import annotations

import pytest
from django.test import Client

from boards.models import Board, Event, Membership, Role


@pytest.fixture
def site_admin(db, django_user_model) -> Client:
    user = django_user_model.objects.create_superuser(username="root", password="pw-root-123")
    client = Client()
    client.force_login(user)
    return client


def test_a_site_admin_creates_a_board_from_the_list(site_admin):
    page = site_admin.get("/boards/").content.decode()
    assert 'id="board-create"' in page
    response = site_admin.post("/boards/", {"slug": "launch", "name": "Launch week"})
    assert response.status_code == 302 and response["Location"] == "/boards/launch/"
    board = Board.objects.get(slug="launch")
    assert board.name == "Launch week"
    assert Event.objects.filter(board=board, kind="board_created", actor="root").exists()
    assert site_admin.get("/boards/launch/").status_code == 200


@pytest.mark.parametrize(
    ("slug", "said"),
    [("", "slug"), ("no spaces", "letters, numbers"), ("x" * 65, "1 to 64"), ("team", "exists")],
)
def test_a_bad_board_is_a_400_that_says_why_and_creates_nothing(site_admin, board, slug, said):
    before = Board.objects.count()
    response = site_admin.post("/boards/", {"slug": slug})
    assert response.status_code == 400
    assert said in response.content.decode()
    assert Board.objects.count() == before


def test_a_member_cannot_create_a_board(person_client, person):
    assert 'id="board-create"' not in person_client.get("/boards/").content.decode()
    response = person_client.post("/boards/", {"slug": "mine"})
    assert response.status_code == 403
    assert not Board.objects.filter(slug="mine").exists()
    assert Membership.objects.filter(user=person, role=Role.ADMIN).count() == 1

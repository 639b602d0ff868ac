"""A username that passes for another (another script's letters, full width, case) is
taken, at the sign-up form and the service; one of its own signs up as typed, in NFKC."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from boards.core import services
from boards.core.errors import Conflict
from boards.models import Board, Invite


def _invite(board: Board) -> str:
    return services.invite_create(board=board, role="viewer", actor="pat")[1]


def _sign_up(token: str, username: str) -> tuple[int, str]:
    password = "a-long-unusual-passphrase-42"
    response = Client().post(
        f"/invite/{token}/",
        {"username": username, "password1": password, "password2": password},
    )
    return response.status_code, response.content.decode()


@pytest.mark.parametrize(
    "spelling",
    ["ａｄｍｉｎ", "ᴬdmin", "ADMIN", "аdmin", "αdmin", "ADMİN"],
    ids=["fullwidth", "modifier-letter", "upper", "cyrillic-a", "greek-alpha", "dotted-I"],
)
def test_a_username_that_passes_for_another_is_taken(board, django_user_model, spelling):
    django_user_model.objects.create_superuser("admin", password="pw-admin-123")
    token = _invite(board)
    status, page = _sign_up(token, spelling)
    assert status == 400
    assert "is taken, or looks like one that is" in page
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["admin"]
    # The service says the same to any other door (a race past the form, a command).
    with pytest.raises(Conflict) as taken:
        services.invite_accept(token=token, username=spelling, password="pw-x-123456789")
    assert taken.value.code == "username_taken"
    assert Invite.objects.get(board=board).used_at is None


def test_a_username_of_its_own_signs_up_as_typed_in_nfkc(board, django_user_model):
    django_user_model.objects.create_user("admin", password="pw-admin-123")
    status, _ = _sign_up(_invite(board), "ａｌｉｃｅ")
    assert status == 302
    assert get_user_model().objects.filter(username="alice").exists()


def test_the_username_key_folds_what_looks_alike():
    from boards.core.services.members import username_key

    assert {username_key(n) for n in ("admin", "ａｄｍｉｎ", "ᴬdmin", "аdmіn", "ADMİN")} == {
        "admin"
    }
    assert username_key("alice") != username_key("alice2")
    assert username_key("José") != username_key("Jose")  # accents are letters of their own

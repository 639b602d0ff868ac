"""People's admin pages (issue #28, item 4): their posts read by forms, a service's refusal
shown beside the field it names, one refusal path for the rest, and secrets shown once."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client

from boards.core import services
from boards.models import AgentToken, Board, Event, Webhook
from boards.webhooks import subscriptions
from tests.support.factories import make_task
from tests.support.htmltext import flat

HTMX = {"HX-Request": "true"}


def text(response) -> str:
    return flat(response.content)


def settings_of(board: Board) -> tuple:
    board.refresh_from_db()
    return (
        board.lease_seconds,
        board.max_attempts,
        board.max_in_progress,
        board.silent_after_seconds,
        board.budget_usd,
        Event.objects.filter(board=board, kind="settings").count(),
    )


def field_error(html: str, name: str) -> str:
    """The error shown beside the input ``name``, which points at it (aria-describedby)."""
    field = re.search(rf'<input [^>]*name="{name}"[^>]*>', html)
    assert field, name
    assert 'aria-invalid="true"' in field.group(0)
    assert f'aria-describedby="id_{name}_helptext id_{name}_error"' in field.group(0) or (
        f'aria-describedby="id_{name}_error"' in field.group(0)
    )
    error = re.search(rf'<ul class="errorlist" id="id_{name}_error"><li>([^<]+)</li>', html)
    assert error, html
    return error.group(1)


# -- the settings form ----------------------------------------------------------------------


def test_a_setting_that_is_no_number_is_refused_beside_its_field_and_saves_nothing(
    board, person_client
):
    before = settings_of(board)
    response = person_client.post(
        "/boards/team/settings/", {"maxAttempts": "three", "leaseSeconds": "60"}
    )
    assert response.status_code == 400
    html = text(response)
    assert field_error(html, "maxAttempts") == "a whole number, in the digits 0-9"
    assert "Attempts before a person looks: a whole number, in the digits 0-9" in html
    # What was typed stays in the form, to be corrected.
    assert 'name="maxAttempts" value="three"' in html
    assert settings_of(board) == before


def test_a_setting_the_service_refuses_is_shown_beside_its_field_and_saves_nothing(
    board, person_client
):
    before = settings_of(board)
    response = person_client.post(
        "/boards/team/settings/",
        {"maxAttempts": "0", "leaseSeconds": "60", "budgetUsd": "$5"},
    )
    assert response.status_code == 400
    html = text(response)
    assert field_error(html, "maxAttempts") == "a whole number from 1 to 100"
    assert "Attempts before a person looks: a whole number from 1 to 100" in html
    assert 'aria-invalid="true"' not in re.search(r'<input [^>]*name="leaseSeconds"[^>]*>', html)[0]
    # The lease and the budget in the same post were not saved either: one write, refused.
    assert settings_of(board) == before


def test_settings_a_post_leaves_out_are_kept(board, person_client):
    services.board_settings(board=board, actor="pat", budgetUsd="12.50", maxInProgress=4)
    response = person_client.post("/boards/team/settings/", {"maxAttempts": "5"})
    assert response.status_code == 302
    board.refresh_from_db()
    assert (board.max_attempts, board.budget_usd, board.max_in_progress) == (
        5,
        Decimal("12.50"),
        4,
    )


def test_the_settings_page_shows_the_boards_values(board, person_client):
    services.board_settings(board=board, actor="pat", budgetUsd="7", maxInProgress=3)
    html = text(person_client.get("/boards/team/settings/"))
    assert 'name="maxInProgress" value="3"' in html
    assert 'name="budgetUsd" value="7.00"' in html
    assert "aria-invalid" not in html


def test_step_up_approvals_are_ticked_and_unticked_on_the_settings_page(board, person_client):
    html = text(person_client.get("/boards/team/settings/"))
    box = re.search(r'<input type="checkbox" name="stepUpApprovals"[^>]*>', html)
    assert box and "checked" not in box.group(0)
    hidden = html.index('<input type="hidden" name="stepUpApprovals" value="">')
    assert hidden < box.start()  # posted first: the box, when ticked, is the value read
    page = {"maxAttempts": "3", "stepUpApprovals": ["", "on"]}  # the hidden input, the box
    assert person_client.post("/boards/team/settings/", page).status_code == 302
    board.refresh_from_db()
    assert board.step_up_approvals is True
    html = text(person_client.get("/boards/team/settings/"))
    assert re.search(r'<input type="checkbox" name="stepUpApprovals"[^>]*checked', html)
    # Unticked: only the hidden input is posted, which turns it off.
    page = {"maxAttempts": "3", "stepUpApprovals": ""}
    assert person_client.post("/boards/team/settings/", page).status_code == 302
    board.refresh_from_db()
    assert board.step_up_approvals is False
    changes = [e.data["fields"] for e in Event.objects.filter(board=board, kind="settings")]
    assert changes == [
        {"stepUpApprovals": {"from": False, "to": True}},
        {"stepUpApprovals": {"from": True, "to": False}},
    ]
    # A post that leaves it out (a script's) keeps it.
    services.board_settings(board=board, actor="pat", stepUpApprovals=True)
    assert person_client.post("/boards/team/settings/", {"maxAttempts": "4"}).status_code == 302
    board.refresh_from_db()
    assert board.step_up_approvals is True


# -- the refusal path -----------------------------------------------------------------------


def test_a_refused_message_is_an_alert_to_htmx_and_a_flashed_redirect_to_a_form(
    board, person_client
):
    data = {"recipient": "", "body": "hi"}
    alert = person_client.post("/boards/team/messages/", data, headers=HTMX)
    assert alert.status_code == 400
    assert text(alert) == '<p class="error" role="alert">recipient: must not be empty</p>'
    assert "HX-Request" in alert["Vary"]

    back = person_client.post("/boards/team/messages/", data)
    assert (back.status_code, back.url) == (302, "/boards/team/")
    assert "recipient: must not be empty" in text(person_client.get(back.url))
    assert not board.messages.exists()


def test_a_refused_reset_is_an_alert_to_htmx_and_a_flashed_redirect_to_a_form(board, person_client):
    make_task(board, "Keep me")
    alert = person_client.post("/boards/team/reset/", {"confirm": "nope"}, headers=HTMX)
    assert alert.status_code == 400
    assert 'role="alert"' in text(alert) and "<html" not in text(alert)
    back = person_client.post("/boards/team/reset/", {"confirm": "nope"})
    assert (back.status_code, back.url) == (302, "/boards/team/")
    assert board.tasks.count() == 1


def test_a_refusal_with_no_page_to_go_back_to_is_a_page_saying_why(
    board, other_board, person_client
):
    """Revoking a token of another board: 404, a whole page to a form, the alert to htmx."""
    services.token_issue(board=other_board, agent="carol", created_by="pat")
    token = AgentToken.objects.get(board=other_board)
    page = person_client.post(f"/boards/team/tokens/{token.pk}/revoke/")
    assert page.status_code == 404
    assert "<html" in text(page)
    assert '<p class="error" role="alert" data-refused>Token not found</p>' in text(page)
    alert = person_client.post(f"/boards/team/tokens/{token.pk}/revoke/", headers=HTMX)
    assert (alert.status_code, text(alert)) == (
        404,
        '<p class="error" role="alert">Token not found</p>',
    )
    token.refresh_from_db()
    assert token.revoked_at is None


def test_a_refusal_of_the_persons_role_is_a_403_page_not_a_redirect(board, django_user_model):
    from boards.models import Membership, Role

    viewer = django_user_model.objects.create_user("vic", password="pw-vic-1234")
    Membership.objects.create(board=board, user=viewer, role=Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    make_task(board)
    refused = client.post("/boards/team/tasks/1/delete/")
    assert refused.status_code == 403
    assert "delete needs admin" in text(refused)
    assert board.tasks.count() == 1


def test_the_graphs_json_refuses_in_the_apis_shape(board, person_client):
    answer = person_client.get("/boards/team/graph.json?task=٣")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["field"] == "task"


# -- webhooks and members through their forms ------------------------------------------------


def test_a_webhook_button_with_no_endpoint_number_is_refused_by_the_form(board, person_client):
    subscriptions.webhook_add(board=board, actor="pat", url="https://example.com/h")
    before = list(Webhook.objects.values_list("pk", "active", "secret"))
    response = person_client.post("/boards/team/webhooks/", {"action": "pause", "webhook": "x"})
    assert response.status_code == 400
    assert "webhook: a whole number, in the digits 0-9" in text(response)
    missing = person_client.post("/boards/team/webhooks/", {"action": "redeliver"})
    assert missing.status_code == 400
    assert "delivery: which one: its number" in text(missing)
    assert list(Webhook.objects.values_list("pk", "active", "secret")) == before


def test_a_refused_endpoint_keeps_what_was_typed_beside_the_error(board, person_client):
    response = person_client.post(
        "/boards/team/webhooks/", {"action": "add", "url": "ftp://files.example/"}
    )
    assert response.status_code == 400
    html = text(response)
    assert 'value="ftp://files.example/" aria-invalid="true"' in html
    assert '<ul class="errorlist" id="id_url_error"><li>only http:// and https://' in html
    assert not Webhook.objects.exists()


# -- secrets shown once ---------------------------------------------------------------------


def _tokens(client: Client) -> str:
    client.post("/boards/team/tokens/", {"agent": "carol"})
    return r'<pre id="new-token">(ak_[^<]+)</pre>'


def _connect(client: Client) -> str:
    client.post("/boards/team/connect/", {"team": "1"})
    return r"data-new-token>(ak_[^<]+)</pre>"


def _invite(client: Client) -> str:
    client.post("/boards/team/members/", {"action": "invite", "role": "viewer"})
    return r'<pre id="invite-link">(http://testserver/invite/inv_[^<]+)</pre>'


def _webhook(client: Client) -> str:
    client.post("/boards/team/webhooks/", {"action": "add", "url": "https://example.com/h"})
    return r"data-new-secret>([0-9a-f]{64})</pre>"


def _rotated(client: Client) -> str:
    hook, _ = subscriptions.webhook_add(board=Board.objects.get(), actor="pat", url="https://x.io/")
    client.post("/boards/team/webhooks/", {"action": "rotate", "webhook": hook.pk})
    return r"data-new-secret>([0-9a-f]{64})</pre>"


@pytest.mark.parametrize(
    ("page", "make"),
    [
        ("tokens/", _tokens),
        ("connect/", _connect),
        ("members/", _invite),
        ("webhooks/", _webhook),
        ("webhooks/", _rotated),
    ],
    ids=["token", "connect", "invite", "webhook", "rotated secret"],
)
def test_a_new_secret_is_shown_on_the_next_page_only_and_never_cached(
    board, person_client, page, make
):
    shown = make(person_client)
    first = person_client.get(f"/boards/team/{page}")
    found = re.search(shown, text(first))
    assert found, text(first)
    secret = found.group(1)
    assert "no-store" in first["Cache-Control"]
    again = person_client.get(f"/boards/team/{page}")
    assert secret not in text(again)
    assert "no-store" in again["Cache-Control"]
    assert "shown only once" not in text(again)


def test_a_secret_made_on_one_board_is_not_shown_on_another(
    board, other_board, person, person_client
):
    from boards.models import Membership, Role

    Membership.objects.create(board=other_board, user=person, role=Role.ADMIN)
    person_client.post("/boards/team/tokens/", {"agent": "carol"})
    elsewhere = text(person_client.get(f"/boards/{other_board.slug}/tokens/"))
    assert 'id="new-token"' not in elsewhere


def test_a_gate_rules_wait_is_read_in_the_digits_0_to_9_and_within_its_range(board, person_client):
    rule = {"tool": "Bash", "pattern": "rm ", "decision": "ask", "fallback": "deny"}
    before = board.gate_rules.count()
    for wait, says in (("٣٠", "digits"), ("2", "5 to 3600 seconds"), ("", "required")):
        response = person_client.post("/boards/team/gates/", {**rule, "wait_seconds": wait})
        assert response.status_code == 400, wait
        assert says in response.content.decode(), (wait, says)
    assert board.gate_rules.count() == before
    response = person_client.post("/boards/team/gates/", {**rule, "wait_seconds": "30"})
    assert response.status_code == 302
    assert board.gate_rules.order_by("-pk").first().wait_seconds == 30

"""Where a person approves a step-up item (SPEC §14): the strip's, the inbox's and the
task panel's Approve carry the item for ``static/push.js``, which asks a person who has
a passkey (the page's ``data-passkey``) for an assertion first; Deny never does."""

from __future__ import annotations

import re

from boards.core import services
from tests.push.test_stepup import held, with_passkey


def step_up_buttons(html: str) -> list[tuple[str, str]]:
    """(item, board) of each button that asks for a passkey first, and its label."""
    return re.findall(
        r'<button[^>]*data-step-up-item="([^"]+)" data-step-up-board="([^"]+)"[^>]*>([^<]*)<',
        html,
    )


def test_the_strip_and_the_inbox_mark_only_a_step_up_calls_approve(board, person_client):
    step_up = held(board, "rm -rf build")
    held(board, "git reset --hard")  # held, but not a step-up rule's
    for url in (f"/boards/{board.slug}/", "/inbox/"):
        html = person_client.get(url).content.decode()
        assert step_up_buttons(html) == [(f"call-{step_up.pk}", board.slug, "Approve")], url


def test_the_page_says_whether_the_person_has_a_passkey(board, person, person_client):
    html = person_client.get(f"/boards/{board.slug}/").content.decode()
    assert re.search(r"<body[^>]*data-passkey", html) is None
    with_passkey(person)
    html = person_client.get(f"/boards/{board.slug}/").content.decode()
    assert re.search(r"<body[^>]*data-passkey", html) is not None


def test_a_step_up_boards_gated_task_is_marked_in_the_strip_and_its_panel(
    board, alice, person_client
):
    alice.create("Migrate", requiresApproval=True)
    alice.call("TaskClaim", {"taskId": "1"})
    panel = f"/boards/{board.slug}/tasks/1/"
    assert step_up_buttons(person_client.get(panel).content.decode()) == []
    services.board_settings(board=board, actor="pat", stepUpApprovals=True)
    marked = [("task-1", board.slug, "Approve")]
    assert step_up_buttons(person_client.get(panel).content.decode()) == marked
    strip = person_client.get(f"/boards/{board.slug}/").content.decode()
    assert step_up_buttons(strip) == marked

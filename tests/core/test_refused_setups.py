"""Setups that fail loudly: the board keeps its latest refused calls (a name another token
holds, no token, an unknown one) and the Connect page lists them."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from boards.core import selectors
from tests.clients.test_hooks import hook
from tests.support.factories import make_token


@pytest.fixture
def no_refusals(board):
    cache.delete(selectors.refusals_key(board.slug))
    yield
    cache.delete(selectors.refusals_key(board.slug))


def test_refused_setups_are_listed_on_the_connect_page(board, person_client, no_refusals):
    make_token(board, "worker-1")
    team = make_token(board, "crew", team=True)
    door = "/api/boards/team/hooks/claude-code"
    body = hook("SessionStart", "0b6f2c1e-aaaa-bbbb")
    # A team token with a name another token holds; no token at all; an unknown one.
    taken = Client().post(
        door,
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {team}", "X-Agent": "worker-1", "X-Kanban-Host": "box"},
    )
    missing = Client().post(door, data=body, content_type="application/json")
    unknown = Client().post(
        "/api/boards/team/tools/TaskList",
        data={},
        content_type="application/json",
        headers={"Authorization": "Bearer nope"},
    )
    assert (taken.status_code, missing.status_code, unknown.status_code) == (403, 401, 401)

    rows = selectors.recent_refusals(board)
    assert [(r["status"], r["agent"], r["host"]) for r in rows] == [
        (401, "", ""),
        (401, "claude-0b6f2c1e", ""),  # the name the door gives the session
        (403, "worker-1", "box"),
    ]
    assert rows[2]["code"] == "identity_taken"
    page = person_client.get("/boards/team/connect/").content.decode()
    refusals = page.split('id="refusals"', 1)[1].split("</section>", 1)[0]
    assert "worker-1" in refusals and "on box" in refusals and "Unknown token" in refusals
    assert "pip install agent-kanban" not in page


def test_the_refusals_list_keeps_the_latest_only(board, no_refusals):
    for n in range(selectors.REFUSALS_KEPT + 5):
        Client().post(
            "/api/boards/team/tools/TaskList",
            data={},
            content_type="application/json",
            headers={"Authorization": "Bearer nope", "X-Agent": f"a{n}"},
        )
    rows = selectors.recent_refusals(board)
    assert len(rows) == selectors.REFUSALS_KEPT
    assert rows[0]["agent"] == f"a{selectors.REFUSALS_KEPT + 4}"
    # An unknown board keeps nothing.
    Client().post("/api/boards/nowhere/tools/TaskList", data={}, content_type="application/json")
    assert cache.get(selectors.refusals_key("nowhere")) is None

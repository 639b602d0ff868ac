"""A write behind a database lock held past the busy timeout answers 503 with Retry-After,
and changes nothing."""

from __future__ import annotations

import json
import sqlite3

import pytest
from django.db import connection
from django.test import Client

from boards.core import services
from boards.models import Task
from tests.support.factories import make_token


@pytest.fixture
def short_busy_timeout(transactional_db):
    if connection.vendor != "sqlite":
        pytest.skip("the write lock that outlasts its busy timeout is SQLite's")
    options = connection.settings_dict["OPTIONS"]
    before = options["timeout"]
    options["timeout"] = 0.2
    connection.close()
    yield
    options["timeout"] = before
    connection.close()


def test_a_write_behind_a_lock_held_past_the_busy_timeout_is_a_503_that_changes_nothing(
    short_busy_timeout, django_user_model
):
    board = services.board_create(slug="busy", name="Busy")
    token = make_token(board, "alice")
    person = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(person)
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=5)
    holder.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
    try:
        response = Client().post(
            "/api/boards/busy/tools/TaskCreate",
            data=json.dumps({"subject": "Wait for it"}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        page = client.post("/boards/busy/settings/", {"maxAttempts": "4"})
    finally:
        holder.rollback()
        holder.close()
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "store_busy"
    assert page.status_code == 503
    assert page["Retry-After"] == "2"
    assert not Task.objects.filter(board=board).exists()

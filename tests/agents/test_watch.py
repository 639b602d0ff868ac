"""TaskWatch is a long-poll on the board's event stream (SPEC §4, seed 002's WatchCompleted)."""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from boards.core import services
from tests.support.factories import make_board, make_task, make_token

pytestmark = pytest.mark.django_db(transaction=True)


async def setup_board(**task_fields):
    board = await database_sync_to_async(make_board)("watch")
    token = await database_sync_to_async(make_token)(board, "alice")
    await database_sync_to_async(make_task)(board, "Watched", **task_fields)
    return board, token


async def call(token: str, tool: str, body: dict):
    response = await AsyncClient().post(
        f"/api/boards/watch/tools/{tool}",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, json.loads(response.content)


async def test_watch_returns_as_soon_as_the_task_completes(layer_spy):
    board, token = await setup_board()
    watch = asyncio.create_task(call(token, "TaskWatch", {"taskId": "1", "timeoutSeconds": 30}))
    await layer_spy.waiting()  # the watcher listens on the board's group
    assert not watch.done()
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="completed", result="42"
    )
    # Long before its 30 s timeout: the change itself ended the wait.
    status, body = await asyncio.wait_for(watch, 5)
    assert status == 200
    assert body["timedOut"] is False
    assert body["task"]["status"] == "completed"
    assert body["task"]["result"] == "42"


async def test_watch_ignores_unrelated_changes_and_times_out(layer_spy):
    board, token = await setup_board()
    await database_sync_to_async(make_task)(board, "Other")
    watch = asyncio.create_task(call(token, "TaskWatch", {"taskId": "1", "timeoutSeconds": 1}))
    await layer_spy.waiting()  # so the changes below reach the watcher and are ignored
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="2", status="completed"
    )
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", notes="still going"
    )
    status, body = await asyncio.wait_for(watch, 5)
    assert status == 200
    assert body["timedOut"] is True
    assert body["task"]["notes"] == "still going"


async def test_watch_of_a_finished_task_returns_at_once():
    board, token = await setup_board()
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="failed"
    )
    status, body = await asyncio.wait_for(
        call(token, "TaskWatch", {"taskId": "1", "timeoutSeconds": 30}), 2
    )
    assert (status, body["timedOut"], body["task"]["status"]) == (200, False, "failed")


async def test_watch_returns_when_approval_is_decided(layer_spy):
    board, token = await setup_board(requires_approval=True)
    status, claimed = await call(token, "TaskClaim", {"taskId": "1"})
    assert status == 202 and claimed["awaitingApproval"] is True
    watch = asyncio.create_task(call(token, "TaskWatch", {"taskId": "1", "timeoutSeconds": 30}))
    await layer_spy.waiting()
    assert not watch.done()
    await database_sync_to_async(services.approval_decide)(
        board=board, person="pat", task_id="1", approve=True
    )
    status, body = await asyncio.wait_for(watch, 5)
    assert body["timedOut"] is False
    assert body["task"]["status"] == "in_progress"
    assert body["task"]["owner"] == "alice"


async def test_watch_after_a_decision_the_requester_missed_returns_at_once():
    board, token = await setup_board(requires_approval=True)
    await call(token, "TaskClaim", {"taskId": "1"})
    await database_sync_to_async(services.approval_decide)(
        board=board, person="pat", task_id="1", approve=False, note="no"
    )
    _, body = await asyncio.wait_for(call(token, "TaskWatch", {"taskId": "1"}), 2)
    assert body["task"]["status"] == "cancelled"
    assert body["task"]["approval"]["note"] == "no"


async def test_watch_of_a_deleted_task_returns_deleted(layer_spy):
    board, token = await setup_board()
    watch = asyncio.create_task(call(token, "TaskWatch", {"taskId": "1", "timeoutSeconds": 30}))
    await layer_spy.waiting()
    await database_sync_to_async(services.task_delete)(board=board, actor="bob", task_id="1")
    status, body = await asyncio.wait_for(watch, 5)
    assert status == 200
    assert body["task"] is None and body["deleted"] is True


async def test_watch_of_an_unknown_task_is_404():
    _, token = await setup_board()
    status, body = await call(token, "TaskWatch", {"taskId": "9"})
    assert status == 404
    assert body["error"]["code"] == "task_not_found"


def test_every_middleware_is_async_capable(settings):
    # One sync-only middleware makes Django run whole requests in a worker thread,
    # and then each waiting TaskWatch would hold a thread for its whole wait.
    from django.utils.module_loading import import_string

    for path in settings.MIDDLEWARE:
        assert getattr(import_string(path), "async_capable", False), path

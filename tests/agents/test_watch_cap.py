"""TaskWatch: a token's concurrent watches are capped (429), and the watches it holds go on."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from boards.core import services
from tests.support.factories import make_board, make_task, make_token


@pytest.mark.django_db(transaction=True)
async def test_concurrent_watches_per_token_are_capped(settings, layer_spy):
    settings.KANBAN_WATCHES_PER_TOKEN = 2
    board = await database_sync_to_async(make_board)("watched")
    token = await database_sync_to_async(make_token)(board, "alice")
    await database_sync_to_async(make_task)(board, "Long")

    async def watch(timeout: float) -> tuple[int, dict]:
        response = await AsyncClient().post(
            "/api/boards/watched/tools/TaskWatch",
            data=json.dumps({"taskId": "1", "timeoutSeconds": timeout}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        return response.status_code, json.loads(response.content)

    waiting = [asyncio.create_task(watch(10)) for _ in range(2)]
    await layer_spy.waiting(2)  # both watchers are listening
    status, body = await watch(1)
    assert (status, body["error"]["code"]) == (429, "too_many_watches")
    await database_sync_to_async(services.task_update)(
        board=board, actor="bob", task_id="1", status="completed"
    )
    for status, body in await asyncio.wait_for(asyncio.gather(*waiting), 10):
        assert status == 200 and body["timedOut"] is False

"""A person who logs out is no longer on the board's sockets: that session's sockets close."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from kanban.asgi import application


@pytest.mark.django_db(transaction=True)
async def test_logging_out_closes_that_sessions_sockets(person_client, board):
    session = person_client.cookies[settings.SESSION_COOKIE_NAME].value
    socket = WebsocketCommunicator(
        application,
        f"/ws/boards/{board.slug}/",
        headers=[
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", f"{settings.SESSION_COOKIE_NAME}={session}".encode()),
        ],
    )
    connected, _ = await socket.connect()
    assert connected
    await socket.receive_from(timeout=5)  # the catch-up render
    await database_sync_to_async(person_client.post)("/logout/")
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4401}

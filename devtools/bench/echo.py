"""Routes that exist only on a server started by ``manage.py bench`` (``devtools.bench.asgi``).

They give the benchmark its floor: a bare ``group_send`` to sockets that echo it, with
no database, no rendering and no service, so a push's cost can be read as a ratio.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

ECHO_GROUP = "bench_echo"


class EchoConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.channel_layer.group_add(ECHO_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(ECHO_GROUP, self.channel_name)

    async def echo_frame(self, message: dict) -> None:
        await self.send(text_data=message["text"])


@csrf_exempt
async def echo(request: HttpRequest) -> JsonResponse:
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(ECHO_GROUP, {"type": "echo.frame", "text": request.GET.get("n", "")})
    return JsonResponse({"ok": True})

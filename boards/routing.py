from django.conf import settings
from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/boards/<slug:slug>/", consumers.BoardConsumer.as_asgi()),
]

if settings.KANBAN_BENCH:
    from . import benchtools

    websocket_urlpatterns.append(path("ws/bench-echo/", benchtools.EchoConsumer.as_asgi()))

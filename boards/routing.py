from django.conf import settings
from django.urls import path

from . import benchtools, consumers

websocket_urlpatterns = [
    path("ws/boards/<slug:slug>/", consumers.BoardConsumer.as_asgi()),
    path("ws/inbox/", consumers.InboxConsumer.as_asgi()),
]

if settings.KANBAN_BENCH:
    websocket_urlpatterns.append(path("ws/bench-echo/", benchtools.EchoConsumer.as_asgi()))

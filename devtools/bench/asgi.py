"""The application of the servers ``manage.py bench`` starts (``devtools.liveserver``
serves it when asked): the product's, plus a socket that echoes a bare ``group_send``.

Run with ``DJANGO_SETTINGS_MODULE=devtools.bench.settings``, whose URLs add the echo's
HTTP view. The echo socket sits behind the same origin check and session as the board's.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "devtools.bench.settings")

# First: it sets Django up, which the Channels and boards imports below need.
from kanban.asgi import application as board_application  # isort: skip

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path

from boards.web.routing import websocket_urlpatterns
from kanban import edge

from .echo import EchoConsumer

application = ProtocolTypeRouter(
    {
        "http": board_application,
        "websocket": edge.SameOriginValidator(
            AuthMiddlewareStack(
                URLRouter([path("ws/bench-echo/", EchoConsumer.as_asgi()), *websocket_urlpatterns])
            )
        ),
    }
)

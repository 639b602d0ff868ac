"""ASGI entry point: HTTP (Django, with static files) and WebSocket (Channels).

Static files are served at the ASGI level rather than by a middleware: every
middleware in the chain must be async-capable, or Django runs the whole request
in a worker thread and each waiting TaskWatch would hold one.
"""

import faulthandler
import os
import signal

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kanban.settings")

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

# `kill -USR1 <pid>` prints every thread's stack to stderr: how an operator (or a test that
# saw a request hang) finds what a stuck server is waiting on, without stopping it.
faulthandler.register(signal.SIGUSR1, all_threads=True)

from boards import boot  # noqa: E402
from boards.agents.mcp import mcp_app  # noqa: E402
from boards.core import storage  # noqa: E402
from boards.web.routing import websocket_urlpatterns  # noqa: E402
from kanban import edge  # noqa: E402

# Oversized bodies are refused as they arrive, before daphne buffers them, and over-long
# request lines are answered 414 (kanban.edge).
edge.install()
# SQLite: one connection held open, so a request's own closing does not checkpoint the log.
storage.hold_sqlite_open()
# Every server process sweeps (lapsed leases, quiet agents, lost webhook wake-ups) and runs
# webhook workers, unless the settings turn them off (boards.boot).
boot.start()
django_http_app = ASGIStaticFilesHandler(django_asgi_app)


async def http_app(scope, receive, send):
    """``/mcp/…`` goes to the MCP server (an ASGI app of the mcp SDK, see boards.agents.mcp);
    everything else to Django."""
    path = scope["path"]
    if path == "/mcp" or path.startswith("/mcp/"):
        return await mcp_app(scope, receive, send)
    return await django_http_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": edge.LineLimit(edge.BodyLimit(http_app)),
        "websocket": edge.SameOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

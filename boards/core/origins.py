"""Which origins a page of this server has: the same-origin check of the board's sockets
(``kanban.edge.SameOriginValidator``) and of the MCP endpoint (``boards.agents.mcp``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings


def header(scope: Mapping[str, Any], name: bytes) -> str:
    """An ASGI request's header ``name`` (lower case), "" when it sent none."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def expected_origins(scope: Mapping[str, Any]) -> set[str]:
    """The origins a board page served to this request's host would have.

    A page is same-origin with its socket when scheme, host and port all match:
    ``http://host:port`` for a ``ws://`` socket, ``https://`` for ``wss://`` (or when
    the proxy named in ``SECURE_PROXY_SSL_HEADER`` says the client used HTTPS).
    ``CSRF_TRUSTED_ORIGINS`` adds origins a deployment serves its pages from.
    """
    host = header(scope, b"host").strip().lower()
    secure = scope.get("scheme") in ("wss", "https")
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        secure = secure or header(scope, name).split(",")[0].strip() == proxy[1]
    origins = {o.lower().rstrip("/") for o in getattr(settings, "CSRF_TRUSTED_ORIGINS", [])}
    if host:
        scheme = "https" if secure else "http"
        default = ":443" if secure else ":80"
        origins.add(f"{scheme}://{host.removesuffix(default)}")
    return origins

"""The server's HTTP edge: what is refused before any view, tool or socket sees a request.

Daphne hands a request to the application only once Twisted has received the
whole body, and then queues all of it in memory as ``http.request`` messages:
a 1 GiB POST costs the server about 1 GiB before any view (or ASGI middleware)
can answer 401 or 413. So the limit (``limits.body_limit``) is enforced where the
bytes arrive, in daphne's request class: a declared ``Content-Length`` over the limit,
or a chunked body that grows past it, is answered 413 at once and the connection is
closed; nothing of it is kept. ``BodyLimit`` does the same check on the ASGI side
for any other server, ``LineLimit`` answers 414 for an over-long URL, and
``SameOriginValidator`` lets a socket open only from a page of this very origin.
``StoreBusyMiddleware`` answers a people's page whose write met a locked database.

``install()`` is called by ``kanban.asgi``; it replaces the request class daphne
builds (``daphne.http_protocol.WebRequest``, looked up per connection). The limits
themselves are the core's (``boards.core.limits``), which every door also checks.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin

from boards.core.errors import (
    HeadersTooLarge,
    PayloadTooLarge,
    ServiceError,
    UriTooLong,
    error_body,
    store_busy,
)
from boards.core.limits import REQUEST_TARGET_MAX, body_limit
from boards.core.numbers import SEQ_DIGITS
from boards.core.origins import expected_origins, header


def too_large_body() -> bytes:
    refusal = PayloadTooLarge(f"Body is larger than {body_limit()} bytes")
    return json.dumps(error_body(refusal)).encode()


class _Discard:
    """Stands in for the request's body file once the body is refused: keeps nothing."""

    closed = False

    def write(self, data: bytes) -> None:
        pass

    def read(self, size: int = -1) -> bytes:
        return b""

    def seek(self, *args: Any) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


# After the 413 is written the connection stays open this long (or until this much more
# of the body was thrown away): closing with the client's bytes unread resets the
# connection, and a client still sending could lose the answer before reading it.
LINGER_SECONDS = 1.0
LINGER_BYTES = 16 * 1024 * 1024


def _limited_request_class() -> type:
    from daphne.http_protocol import WebRequest
    from twisted.internet import reactor as installed

    # Twisted types the module-level reactor as an interface whose stubs mypy misreads.
    reactor: Any = installed

    class LimitedWebRequest(WebRequest):  # type: ignore[misc, valid-type]
        """Daphne's request, refusing an oversized body as its bytes arrive."""

        _refused = False
        _received = 0

        def gotLength(self, length: int | None) -> None:
            if length is not None and length > body_limit():
                self._refuse()
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            self._received += len(data)
            if self._refused:
                if self._received > LINGER_BYTES:
                    self._hang_up()
                return
            if self._received > body_limit():  # a chunked body that kept growing
                self._received = 0
                self._refuse()
                return
            super().handleContentChunk(data)

        def process(self) -> Any:
            if self._refused:  # the whole (declared) body came in the linger time
                self._hang_up()
                return None
            return super().process()

        def _refuse(self) -> None:
            # Written to the connection directly: the request line is parsed but Twisted
            # has not yet made it a request (that happens once the body is in), and
            # finishing it now would make the rest of the body parse as a new request.
            old = getattr(self, "content", None)
            if old is not None and hasattr(old, "close"):
                old.close()
            self.content = _Discard()
            self._refused = True
            body = too_large_body()
            head = (
                b"HTTP/1.1 413 Payload Too Large\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            )
            if self.channel is not None:
                self.channel.transport.write(head + body)
                reactor.callLater(LINGER_SECONDS, self._hang_up)

        def _hang_up(self) -> None:
            if self.channel is not None and self.channel.transport is not None:
                self.channel.transport.loseConnection()

    return LimitedWebRequest


def _answer(status: bytes, refusal: ServiceError) -> bytes:
    """A whole HTTP/1.1 answer with the refusal's JSON, for the connection to close on."""
    body = json.dumps(error_body(refusal)).encode()
    return (
        b"HTTP/1.1 " + status + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    ) + body


def _uri_too_long() -> UriTooLong:
    return UriTooLong(
        f"The request's URL is longer than {REQUEST_TARGET_MAX} characters; send what it "
        "carries in the body instead"
    )


def _limited_channel_factory() -> Any:
    """Daphne's HTTP/1.1 connection, answering a request line or header too long to read
    (414, 431) instead of closing the connection silently."""
    from twisted.web import http

    class LimitedHTTPChannel(http.HTTPChannel):  # type: ignore[misc]
        def lineLengthExceeded(self, line: bytes) -> None:
            # Before the request line is complete the channel is still on its first line.
            if getattr(self, "_HTTPChannel__first_line", 0):
                answer = _answer(b"414 URI Too Long", _uri_too_long())
            else:
                refusal = HeadersTooLarge("A request header is longer than 16 KiB")
                answer = _answer(b"431 Request Header Fields Too Large", refusal)
            transport: Any = self.transport  # Twisted's stubs type it loosely
            transport.write(answer)
            transport.loseConnection()

    def build(factory: Any) -> Any:
        # Twisted's own factory of this name picks HTTP/1.1 or HTTP/2 per connection.
        return http._GenericHTTPChannelProtocol(LimitedHTTPChannel())

    build.limited = True  # type: ignore[attr-defined]
    return build


def install() -> None:
    """Make daphne (in this process) refuse oversized bodies as they arrive, and answer a
    request line too long to read."""
    try:
        from daphne import http_protocol
    except ImportError:  # another ASGI server: BodyLimit and LineLimit still answer
        return
    if getattr(http_protocol.WebRequest, "_refused", None) is None:
        http_protocol.WebRequest = _limited_request_class()
    if not getattr(http_protocol.HTTPFactory.protocol, "limited", False):
        http_protocol.HTTPFactory.protocol = _limited_channel_factory()


class LineLimit:
    """ASGI middleware: 414 for a request whose path and query string are longer than
    ``REQUEST_TARGET_MAX`` (any server; daphne also answers before it gets here)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            target = len(scope.get("raw_path") or scope.get("path", "").encode())
            target += len(scope.get("query_string") or b"") + 1
            if target > REQUEST_TARGET_MAX:
                body = json.dumps(error_body(_uri_too_long())).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 414,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: 413 for a declared ``Content-Length`` over the limit, unread."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            declared = dict(scope.get("headers") or []).get(b"content-length", b"")
            # bytes.isdigit() is ASCII only; a run of digits longer than any limit is over it
            # (and int() refuses runs over 4,300 digits).
            if declared.isdigit() and (len(declared) > SEQ_DIGITS or int(declared) > body_limit()):
                body = too_large_body()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 413,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class SameOriginValidator:
    """WebSocket: accept a handshake only from a page of this very origin.

    Channels' ``AllowedHostsOriginValidator`` compares the origin's host alone, so a
    page on another port of an allowed host (``http://127.0.0.1:9999``) could open a
    logged-in person's board socket with their cookie. Here the whole origin must
    match (and the host must be allowed); a handshake without an Origin is refused.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            origin = header(scope, b"origin").strip().lower().rstrip("/")
            domain, _port = split_domain_port(header(scope, b"host").strip().lower())
            allowed = validate_host(domain, settings.ALLOWED_HOSTS)
            if not (allowed and origin and origin in expected_origins(scope)):
                # Refuse the handshake (HTTP 403), as Channels' validators do.
                await receive()
                await send({"type": "websocket.close", "code": 4403})
                return
        await self.app(scope, receive, send)


class StoreBusyMiddleware(MiddlewareMixin):
    """A people's page whose write met a database locked past its busy timeout answers
    503 with Retry-After (nothing was changed), not 500. (``MiddlewareMixin`` keeps it
    async-capable: a sync-only middleware would run the async views, and their waits,
    through a thread.)"""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        busy = store_busy(exception)
        if busy is None:
            return None
        html = render_to_string("boards/notice.html#alert", {"message": busy.message})
        response = HttpResponse(html, status=busy.status)
        response["Retry-After"] = str(busy.retry_after)
        return response

"""An over-long request line or header is answered (414, 431) with the API's JSON error,
by the ASGI edge and by a live daphne, which goes on answering."""

from __future__ import annotations

import json
import socket
import urllib.parse
from collections.abc import Iterator

import pytest
from channels.testing import HttpCommunicator

from boards.core.limits import REQUEST_TARGET_MAX
from devtools.liveserver import Cluster
from kanban.asgi import application


async def test_the_asgi_edge_answers_a_long_url_414():
    query = b"q=" + b"a" * 70_000
    communicator = HttpCommunicator(
        application, "GET", "/boards/?" + query.decode(), headers=[(b"host", b"localhost")]
    )
    response = await communicator.get_response(timeout=10)
    assert response["status"] == 414
    assert json.loads(response["body"])["error"]["code"] == "uri_too_long"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = Cluster(tmp_path_factory.mktemp("trust-small"), backend="sqlite")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def _raw(base: str, request: bytes) -> bytes:
    port = urllib.parse.urlsplit(base).port
    with socket.create_connection(("127.0.0.1", port or 0), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except OSError:
            pass
    return answer


@pytest.mark.slow  # a live daphne
@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /healthz?q=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, None),
        (
            b"GET /healthz?q=" + b"a" * (REQUEST_TARGET_MAX + 10) + b" HTTP/1.1\r\n"
            b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
            414,
            "uri_too_long",
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n",
            431,
            "headers_too_large",
        ),
    ],
    ids=["70000-characters", "just-over-the-limit", "a-long-header"],
)
def test_daphne_answers_an_over_long_request_line(live, request_bytes, status, code):
    answer = _raw(live, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split()[1] == str(status).encode(), answer[:200]
    assert json.loads(body)["error"]["code"] == (code or "uri_too_long")
    # The server goes on answering.
    plain = _raw(live, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert plain.split()[1] == b"200"

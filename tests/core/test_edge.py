"""The server's edge (kanban.edge): an oversized body is refused before it is read.

Against a real daphne: a client that declares (or streams) far more than the
limit gets 413 with the API's JSON error after a few KiB, and the server's
memory does not grow with what the client meant to send.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from channels.testing import HttpCommunicator

from boards.core.limits import body_limit
from devtools.liveserver import Cluster, call
from kanban.asgi import application

GIB = 1024**3

# One server for the module's live tests (``server``): with -n, they run on one worker.
pytestmark = pytest.mark.xdist_group("test_edge")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """One daphne for the module: each test measures its own memory growth from its start."""
    cluster = Cluster(tmp_path_factory.mktemp("edge"), backend="sqlite")
    try:
        base = cluster.start()
        cluster.board("edge")
        yield cluster, base
    finally:
        cluster.stop()


def _send_then_read(base: str, head: bytes, body_chunks: Iterator[bytes]) -> bytes:
    """Send the request while reading the answer, as curl or a browser does."""
    port = urllib.parse.urlsplit(base).port
    with socket.create_connection(("127.0.0.1", port or 0), timeout=10) as sock:

        def send() -> None:
            try:
                sock.sendall(head)
                for chunk in body_chunks:
                    sock.sendall(chunk)
            except OSError:
                pass  # the server hung up mid-body, as it should

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except OSError:
            pass
        sender.join(10)
        return answer


def _status_and_json(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.slow  # a live daphne
def test_a_declared_gigabyte_is_refused_at_once_and_costs_no_memory(server):
    cluster, base = server
    before = cluster.servers[0].rss_kib()
    head = (
        b"POST /api/boards/edge/tools/TaskCreate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: " + str(GIB).encode() + b"\r\n\r\n"
    )
    # 32 MiB of the promised gigabyte: the server answers and hangs up long before.
    answer = _send_then_read(base, head, (b"x" * 65536 for _ in range(512)))
    status, body = _status_and_json(answer)
    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert cluster.servers[0].rss_kib() - before < 16 * 1024  # KiB: nothing of the body was kept
    with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
        assert response.status == 200


@pytest.mark.slow  # a live daphne
def test_a_chunked_body_that_grows_past_the_limit_is_cut_off(server):
    cluster, base = server
    before = cluster.servers[0].rss_kib()
    head = (
        b"POST /api/boards/edge/tools/TaskCreate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 65536
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    answer = _send_then_read(base, head, (framed for _ in range(512)))
    status, body = _status_and_json(answer)
    assert status == 413
    assert body["error"]["code"] == "payload_too_large"
    assert cluster.servers[0].rss_kib() - before < 16 * 1024


@pytest.mark.slow  # a live daphne
def test_a_body_under_the_limit_still_arrives_whole(server):
    cluster, base = server
    token = cluster.token("edge", "alice")
    description = "d" * 100_000  # bigger than Twisted's in-memory buffer, under the limit
    status, body = call(
        base, "edge", token, "TaskCreate", {"subject": "Big one", "description": description}
    )
    assert status == 200, body
    status, body = call(base, "edge", token, "TaskGet", {"taskId": body["task"]["id"]})
    assert len(body["task"]["description"]) == 100_000


async def test_the_asgi_application_refuses_a_declared_oversized_body_unread():
    """Under another ASGI server than daphne, the same 413 comes from BodyLimit."""
    communicator = HttpCommunicator(
        application,
        "POST",
        "/api/boards/any/tools/TaskList",
        headers=[(b"content-length", str(body_limit() + 1).encode()), (b"host", b"localhost")],
    )
    response = await communicator.get_response()
    assert response["status"] == 413
    assert json.loads(response["body"])["error"]["code"] == "payload_too_large"

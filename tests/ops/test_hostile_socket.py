"""Hostile conditions (SPEC §6): garbage on the board's WebSocket of a real daphne
process closes that socket only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import time
import urllib.parse
import urllib.request

import pytest
import websockets

from devtools.liveserver import call
from tests.support.hostile import FRESH, frames_until, login, ws_url

pytestmark = pytest.mark.slow


def _frame(opcode: int, payload: bytes, *, masked: bool = True, fin: bool = True) -> bytes:
    """One raw WebSocket frame as a client sends it (RFC 6455 §5.2)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    mask_bit = 0x80 if masked else 0
    if len(payload) < 126:
        head += bytes([mask_bit | len(payload)])
    elif len(payload) < 1 << 16:
        head += bytes([mask_bit | 126]) + len(payload).to_bytes(2, "big")
    else:
        head += bytes([mask_bit | 127]) + len(payload).to_bytes(8, "big")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def _server_close_codes(data: bytes) -> list[int]:
    """Close codes in the (unmasked) frames a server sent."""
    codes, i = [], 0
    while i + 2 <= len(data):
        opcode, length = data[i] & 0x0F, data[i + 1] & 0x7F
        i += 2
        if length == 126:
            length, i = int.from_bytes(data[i : i + 2], "big"), i + 2
        elif length == 127:
            length, i = int.from_bytes(data[i : i + 8], "big"), i + 8
        payload, i = data[i : i + length], i + length
        if opcode == 0x8:
            codes.append(int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005)
    return codes


def _raw_garbage(base: str, path: str, headers: dict[str, str], garbage: bytes) -> list[int]:
    """Open a WebSocket by hand, send ``garbage`` raw, return the server's close codes once it
    has hung up (an AssertionError if it keeps the connection open for 5 s)."""
    port = urllib.parse.urlsplit(base).port
    assert port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        with contextlib.suppress(OSError):  # the server may hang up before reading it all
            sock.sendall(garbage)
        received = rest
        deadline = time.monotonic() + 5
        while True:
            assert time.monotonic() < deadline, "the server kept a garbage-talking socket open"
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    return _server_close_codes(received)


# What the board socket gets, and the close codes it may answer with. The consumer closes
# any message with 4400 (the board socket only pushes); the protocol layer (autobahn) closes
# frames it cannot parse with 1002 / 1007 / 1009.
GARBAGE_MESSAGES: list[tuple[str, str | bytes, set[int]]] = [
    ("text junk", '{"type": "board.update", "seq": -1} \u202e\U0001f4a5 {{{', {4400}),
    ("binary bytes", bytes(range(256)) * 64, {4400}),
    ("a ~1 MB text message", "x" * 1_000_000, {4400}),
    ("a 2 MiB message, over daphne's 1 MiB limit", os.urandom(2 * 1024 * 1024), {1009, 1006}),
]
GARBAGE_FRAMES: list[tuple[str, bytes]] = [
    ("invalid UTF-8 in a text frame", _frame(0x1, b"\xff\xfe\xc3\x28")),
    ("a reserved opcode", _frame(0x3, b"hello")),
    ("an unmasked client frame", _frame(0x1, b"hello", masked=False)),
    ("a 200-byte ping (control frames carry at most 125)", _frame(0x9, b"p" * 200)),
    ("a continuation frame with nothing to continue", _frame(0x0, b"tail")),
    ("a header announcing 2^63-1 bytes", b"\x82\xff" + (2**63 - 1).to_bytes(8, "big") + b"\0" * 4),
    ("0xff bytes", b"\xff" * 64),
]


async def test_garbage_on_one_board_socket_closes_that_socket_only(cluster_factory):
    cluster = cluster_factory("sqlite")
    base = cluster.start()
    cluster.board("ws")
    token = cluster.token("ws", "alice")
    headers = await login(cluster, base)
    path = "/ws/boards/ws/?seq=0"

    async with websockets.connect(
        ws_url(base, "ws", 0), additional_headers=headers, max_size=None
    ) as witness:
        codes: dict[str, int | None] = {}
        for name, garbage, expected in GARBAGE_MESSAGES:
            async with websockets.connect(
                ws_url(base, "ws", FRESH), additional_headers=headers, max_size=None
            ) as victim:
                try:
                    await victim.send(garbage)
                    await asyncio.wait_for(victim.recv(), 5)
                    pytest.fail(f"{name}: the server answered instead of closing")
                except websockets.ConnectionClosed:
                    pass
                codes[name] = victim.close_code
                assert victim.close_code in expected, (name, victim.close_code)
            pong = await witness.ping()
            await asyncio.wait_for(pong, 2)  # the other socket on the board is still there

        for name, garbage in GARBAGE_FRAMES:
            closes = await asyncio.to_thread(_raw_garbage, base, path, headers, garbage)
            # The server hung up; when it said why, it was a protocol error, never "normal".
            assert all(code >= 1002 for code in closes), (name, closes)
            pong = await witness.ping()
            await asyncio.wait_for(pong, 2)

        # Garbage that is not even HTTP, on the same port: refused, and the line hung up.
        port = urllib.parse.urlsplit(base).port
        with socket.create_connection(("127.0.0.1", port or 0), timeout=5) as sock:
            sock.sendall(b"\x00\x01 \xff\xfe GARBAGE/9.9\r\n\x7f: \x80\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 400"), answer[:100]

        # The survivor still gets the board's pushes...
        status, _ = await asyncio.to_thread(
            call, base, "ws", token, "TaskCreate", {"subject": "After the garbage"}
        )
        assert status == 200
        frames = await frames_until(witness, {"1"}, 5)
        assert "After the garbage" in "".join(frames)

    # ...a new socket can still join, and the server still answers HTTP.
    async with websockets.connect(ws_url(base, "ws", 0), additional_headers=headers) as again:
        frames = await frames_until(again, {"1"}, 5)  # catch-up from 0 sends the card
    with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
        assert response.status == 200
    assert call(base, "ws", token, "TaskGet", {"taskId": "1"})[0] == 200

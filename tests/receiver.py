"""A real HTTP endpoint on loopback for webhook tests: records each request, answers
as scripted (a status per request, then 200), or hangs while told to."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def verifies(self, secret: str) -> bool:
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.headers.get("X-Kanban-Signature", ""))


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=list)  # answered in turn, then 200
    hang: threading.Event = field(default_factory=threading.Event)  # set: requests hang
    redirect_to: str = ""
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.arrived:
                    receiver.received.append(Received(dict(self.headers), body, time.monotonic()))
                    receiver.arrived.notify_all()
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                while receiver.hang.is_set():
                    time.sleep(0.05)
                if receiver.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", receiver.redirect_to)
                else:
                    self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 10) -> list[Received]:
        """Wait until ``count`` requests arrived; all of them so far."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)

    def close(self) -> None:
        self.hang.clear()
        self.server.shutdown()
        self.server.server_close()

"""A stand-in for the board's hook endpoint on loopback: records each hook call a client
(or ``kanban-hook``) POSTs and answers as told, for tests of the client side of hooks."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH = "/api/boards/ops/hooks/claude-code"


@dataclass(frozen=True)
class HookCall:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return str(self.json.get("hook_event_name", ""))


def deny(reason: str) -> dict[str, Any]:
    """Claude Code's PreToolUse answer that blocks the call; the model reads ``reason``."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def allow(reason: str = "") -> dict[str, Any]:
    """Claude Code's PreToolUse answer that lets the call run."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": reason,
        }
    }


@dataclass
class HookServer:
    """Answers a call with ``answers[its hook_event_name]`` (JSON), else ``{}``, with
    ``status``; ``body`` (bytes), when set, is sent instead. Holds calls while ``hold`` is
    set. Like the board, it proves its answer (``X-Kanban-Proof``, keyed with the call's
    bearer token) unless ``proof`` says what to send instead ("" for none)."""

    answers: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    body: bytes | None = None
    hold: threading.Event = field(default_factory=threading.Event)
    proof: str | None = None
    calls: list[HookCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self
        self._arrived = threading.Condition()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                call = HookCall(
                    self.path,
                    dict(self.headers),
                    self.rfile.read(int(self.headers.get("Content-Length", "0"))),
                )
                with server._arrived:
                    server.calls.append(call)
                    server._arrived.notify_all()
                while server.hold.is_set():
                    time.sleep(0.02)
                body = server.body
                if body is None:
                    try:
                        event = call.event
                    except (ValueError, AttributeError):
                        event = ""
                    body = json.dumps(server.answers.get(event, {})).encode()
                try:
                    self.send_response(server.status)
                    if server.status in (301, 302, 303, 307, 308):
                        self.send_header("Location", "/elsewhere")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    token = call.headers.get("Authorization", "").removeprefix("Bearer ")
                    proof = server.proof
                    if proof is None and token:
                        proof = hmac.new(token.encode(), body, hashlib.sha256).hexdigest()
                    if proof:
                        self.send_header("X-Kanban-Proof", proof)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a held call: what the test is about

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{PATH}"

    def events(self) -> list[str]:
        """The ``hook_event_name`` of every call so far, in order of arrival."""
        return [call.event for call in self.calls]

    def wait_for(self, count: int, timeout: float = 10) -> list[HookCall]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.calls) >= count, timeout)
            return list(self.calls)

    def close(self) -> None:
        self.hold.clear()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> HookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

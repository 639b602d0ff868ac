"""A scripted stand-in for the Anthropic Messages API on loopback, for the real Claude Code CLI.

Point the CLI at it with ``ANTHROPIC_BASE_URL=standin.url`` (``tests/support/claude_cli.py`` does).
``POST /v1/messages`` answers as the real API does: with ``"stream": true`` a server-sent
event stream (``message_start``, ``content_block_start`` / ``content_block_delta`` (a
``text_delta``, or ``input_json_delta`` chunks for a ``tool_use``) / ``content_block_stop``,
``message_delta`` with the ``stop_reason``, ``message_stop``), otherwise one JSON message.

A request that carries ``tools`` is a turn of the agent's main loop: it is answered with the
next scripted step, a :class:`ToolUse` (``stop_reason: tool_use``) or a :class:`Text`
(``end_turn``); once the script is used up every turn ends with :data:`EXHAUSTED`. Other
requests (the session title, and the like) get a short text. ``count_tokens`` answers a
count; any other path a 404 in the API's error shape.

A :class:`Pause` in a script holds the next turn's answer until the test lets it go (the
CLI waits on the API meanwhile), so a test can act between two of the model's steps: when
the pause is reached, everything the CLI did for the step before it (the tool call and
its hooks) is over. A subagent's turns come to the same stand-in, beside its parent's (a
background subagent's interleave with them): ``threads`` maps a text found in a turn's
first user message (the subagent's prompt) to that subagent's own script.

Every request is recorded (:attr:`AnthropicStandin.requests`), so a test can assert what the
model "read": :meth:`AnthropicStandin.tool_results` gives the ``tool_result`` blocks the
CLI sent back, with their text.

    with AnthropicStandin([ToolUse("Bash", {"command": "echo hi"}), Text("Done.")]) as api:
        ...run the CLI with ANTHROPIC_BASE_URL=api.url...
        assert api.tool_results()[0].text == "hi"
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-standin"
EXHAUSTED = "(The stand-in's script is used up.)"
SIDE_TEXT = "Stand-in session"  # the answer to every request without tools (titles, …)


@dataclass(frozen=True)
class ToolUse:
    """The model calls one tool: the CLI runs it (hooks and permissions allowing)."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Text:
    """The model answers in text and ends its turn."""

    text: str


@dataclass(frozen=True)
class Pause:
    """The next turn is answered only once the test sets ``go`` (at most ``seconds``
    later); ``reached`` is set when the CLI asks for it."""

    go: threading.Event = field(default_factory=threading.Event, compare=False)
    reached: threading.Event = field(default_factory=threading.Event, compare=False)
    seconds: float = 60

    def wait_reached(self, seconds: float = 60) -> None:
        assert self.reached.wait(seconds), f"the CLI did not reach the pause in {seconds} s"


Step = ToolUse | Text | Pause


@dataclass(frozen=True)
class Request:
    """One request the CLI sent: its path, headers and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)  # when it arrived (the bench's gaps)

    @property
    def is_main_loop(self) -> bool:
        return self.path.startswith("/v1/messages") and bool(self.body.get("tools"))


@dataclass(frozen=True)
class ToolResult:
    """A ``tool_result`` block the CLI sent back: what the model read after a tool call."""

    tool_use_id: str
    is_error: bool
    text: str


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


@dataclass
class AnthropicStandin:
    script: list[Step]
    requests: list[Request] = field(default_factory=list)
    # A subagent's own script, by a text of its prompt (its turns' first user message).
    threads: dict[str, list[Step]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._steps = iter(self.script)
        self._threads = {marker: iter(steps) for marker, steps in self.threads.items()}
        self._ids = itertools.count(1)
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                request = Request(self.path.split("?")[0], dict(self.headers), body)
                with standin._lock:
                    standin.requests.append(request)
                if request.path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": len(raw) // 4})
                elif request.path == "/v1/messages":
                    step = standin._next_step(body) if request.is_main_loop else Text(SIDE_TEXT)
                    message_id = f"msg_standin_{next(standin._ids):04d}"
                    if body.get("stream"):
                        self._stream(message_id, step)
                    else:
                        self._json(200, standin._message(message_id, step))
                else:
                    self._not_found()

            def do_GET(self) -> None:
                with standin._lock:
                    standin.requests.append(Request(self.path, dict(self.headers), {}))
                self._not_found()

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _not_found(self) -> None:
                error = {"type": "not_found_error", "message": f"{self.path} is not scripted"}
                self._json(404, {"type": "error", "error": error})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", "req_standin")
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message_id: str, step: ToolUse | Text) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("request-id", "req_standin")
                self.send_header("Connection", "close")
                self.end_headers()
                for event, data in standin._events(message_id, step):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The base URL, as ``ANTHROPIC_BASE_URL``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def main_loop(self) -> list[Request]:
        """The requests that carried tools: the agent's turns, in order."""
        with self._lock:
            return [request for request in self.requests if request.is_main_loop]

    def tool_results(self) -> list[ToolResult]:
        """Every ``tool_result`` in the last main-loop request (it carries the whole
        conversation), in order."""
        turns = self.main_loop
        if not turns:
            return []
        results = []
        for message in turns[-1].body.get("messages", []):
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.append(
                        ToolResult(
                            tool_use_id=block.get("tool_use_id", ""),
                            is_error=bool(block.get("is_error")),
                            text=_text_of(block.get("content")),
                        )
                    )
        return results

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> AnthropicStandin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_step(self, body: dict[str, Any]) -> ToolUse | Text:
        messages = body.get("messages") or [{}]
        first = json.dumps(messages[0].get("content"))
        with self._lock:
            steps = next(
                (steps for marker, steps in self._threads.items() if marker in first),
                self._steps,
            )
        while True:
            with self._lock:
                step = next(steps, Text(EXHAUSTED))
            if not isinstance(step, Pause):
                return step
            step.reached.set()
            step.go.wait(step.seconds)  # outside the lock: other threads' turns go on

    def _message(self, message_id: str, step: ToolUse | Text) -> dict[str, Any]:
        if isinstance(step, ToolUse):
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_standin_{message_id[-4:]}",
                "name": step.name,
                "input": step.input,
            }
            stop_reason = "tool_use"
        else:
            block = {"type": "text", "text": step.text}
            stop_reason = "end_turn"
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }

    def _events(
        self, message_id: str, step: ToolUse | Text
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        message = self._message(message_id, step)
        block = message["content"][0]
        usage = {"input_tokens": 10, "output_tokens": 1}
        start = {**message, "content": [], "stop_reason": None, "usage": usage}
        yield "message_start", {"type": "message_start", "message": start}
        if block["type"] == "tool_use":
            empty = {**block, "input": {}}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": empty},
            )
            yield "ping", {"type": "ping"}
            partial = json.dumps(block["input"])
            for at in range(0, len(partial), 16):  # in chunks, as the API sends them
                delta = {"type": "input_json_delta", "partial_json": partial[at : at + 16]}
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                )
        else:
            empty = {"type": "text", "text": ""}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": empty},
            )
            yield "ping", {"type": "ping"}
            delta = {"type": "text_delta", "text": block["text"]}
            yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        yield (
            "message_delta",
            {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 10}},
        )
        yield "message_stop", {"type": "message_stop"}

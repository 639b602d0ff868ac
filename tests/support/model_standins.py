"""Scripted stand-ins for the Gemini API, the OpenAI Responses API and OpenAI Chat
Completions on loopback, for the real Gemini CLI, Codex, and Copilot CLI, Qwen Code and
opencode (as ``tests/support/anthropic_standin.py`` is for Claude Code).

A request that offers tools is a turn of the agent's main loop: it is answered with the
next scripted step, a :class:`Call` (a function call) or a :class:`Say` (text, the turn
ends); once the script is used up every turn ends with :data:`EXHAUSTED`. Other requests
get a short text. Every request is recorded, so a test can read what the model was sent
back for each call (:meth:`Standin.results`: the tool's output, or the hook's refusal).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EXHAUSTED = "(The stand-in's script is used up.)"


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Say:
    text: str


Step = Call | Say


@dataclass
class Standin:
    """``dialect``: "gemini" (``…:streamGenerateContent`` / ``:generateContent``),
    "responses" (``POST /v1/responses``, server-sent events) or "chat"
    (``POST /v1/chat/completions``, streamed or not)."""

    script: list[Step]
    dialect: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.monotonic() of each request

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                with standin._lock:
                    standin.requests.append((self.path, body))
                    standin.times.append(time.monotonic())
                if standin.dialect == "gemini":
                    standin._gemini(self, body)
                elif standin.dialect == "chat":
                    standin._chat(self, body)
                else:
                    standin._responses(self, body)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, "application/json", json.dumps({"data": [], "models": []}))
                    return
                self._send(404, "application/json", json.dumps({"error": {"message": "no"}}))

            def _send(self, status: int, kind: str, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Standin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self) -> Step:
        with self._lock:
            return self.script.pop(0) if self.script else Say(EXHAUSTED)

    # -- Gemini ------------------------------------------------------------------------------

    def _gemini(self, handler: Any, body: dict[str, Any]) -> None:
        path = handler.path
        if ":countTokens" in path:
            handler._send(200, "application/json", json.dumps({"totalTokens": 10}))
            return
        step = self._next() if body.get("tools") else Say("Stand-in")
        if isinstance(step, Call):
            part: dict[str, Any] = {"functionCall": {"name": step.name, "args": step.args}}
        else:
            part = {"text": step.text}
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": "gemini-2.5-pro",
        }
        if ":streamGenerateContent" in path:
            handler._send(200, "text/event-stream", f"data: {json.dumps(chunk)}\r\n\r\n")
        else:
            handler._send(200, "application/json", json.dumps(chunk))

    # -- OpenAI Responses --------------------------------------------------------------------

    def _responses(self, handler: Any, body: dict[str, Any]) -> None:
        if not handler.path.rstrip("/").endswith("/responses"):
            handler._send(404, "application/json", json.dumps({"error": {"message": "no"}}))
            return
        step = self._next() if body.get("tools") else Say("Stand-in")
        n = next(self._ids)
        if isinstance(step, Call):
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": step.name,
                "arguments": json.dumps(step.args),
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        response = {
            "id": f"resp_{n}",
            "object": "response",
            "status": "completed",
            "output": [item],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        events = [
            ("response.created", {"response": {**response, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"output_index": 0, "item": item}),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": response}),
        ]
        text = "".join(
            f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
            for name, data in events
        )
        handler._send(200, "text/event-stream", text)

    # -- OpenAI Chat Completions -----------------------------------------------------------

    def _chat(self, handler: Any, body: dict[str, Any]) -> None:
        if not handler.path.rstrip("/").endswith("/chat/completions"):
            handler._send(404, "application/json", json.dumps({"error": {"message": "no"}}))
            return
        step = self._next() if body.get("tools") else Say("Stand-in")
        n = next(self._ids)
        if isinstance(step, Call):
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": step.name, "arguments": json.dumps(step.args)},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": step.text}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        head = {"id": f"chatcmpl-{n}", "created": 1764115200, "model": body.get("model", "")}
        if not body.get("stream"):
            done = {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            handler._send(200, "application/json", json.dumps(done))
            return
        chunks = [
            {"index": 0, "delta": message, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": finish},
        ]
        text = "".join(
            "data: "
            + json.dumps(
                {
                    **head,
                    "object": "chat.completion.chunk",
                    "choices": [choice],
                    **({"usage": usage} if choice["finish_reason"] else {}),
                }
            )
            + "\n\n"
            for choice in chunks
        )
        handler._send(200, "text/event-stream", text + "data: [DONE]\n\n")

    # -- what the model read ---------------------------------------------------------------------

    def results(self) -> list[str]:
        """What the model was sent back for each of its calls, in order (the output, or
        the refusal), as text."""
        seen: list[str] = []
        for _path, body in self.requests:
            found: list[str] = []
            for content in body.get("contents") or []:
                for part in content.get("parts") or []:
                    if "functionResponse" in part:
                        found.append(json.dumps(part["functionResponse"].get("response")))
            for item in body.get("input") or []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    output = item.get("output")
                    found.append(output if isinstance(output, str) else json.dumps(output))
            for message in body.get("messages") or []:
                if isinstance(message, dict) and message.get("role") == "tool":
                    content = message.get("content")
                    if isinstance(content, list):
                        content = "".join(
                            part.get("text", "") for part in content if isinstance(part, dict)
                        )
                    found.append(content if isinstance(content, str) else json.dumps(content))
            if len(found) > len(seen):
                seen = found
        return seen

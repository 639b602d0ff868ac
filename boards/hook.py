"""kanban-hook: forward a coding agent's hook call to the board, and fail closed.

Claude Code (and Gemini CLI) run a ``command`` hook with the hook input JSON on stdin
and read its answer from stdout. This command POSTs that JSON to the board's hook URL
and prints the board's JSON answer::

    {"type": "command", "command": "kanban-hook --url https://board.example/api/boards/ops/hooks/claude-code"}

(or ``python -m boards.hook``; the URL may come from ``KANBAN_HOOK_URL``). The token is
read from ``KANBAN_TOKEN`` and sent as a bearer token; ``KANBAN_AGENT``, when set, names
the agent of a team token (``X-Agent``).

Why a command and not Claude Code's ``http`` hook: an http hook that cannot reach its
URL gives no verdict, and the client's own permissions decide (a tool the client allows
runs). A gated call must not run while the board is away, so for a tool call
(``PreToolUse``; Gemini CLI's ``BeforeTool``) this command exits 2 at once, with a
one-line reason on stderr that names the board: both clients block the call then and
show that line to the model. Every other event never blocks: on any failure it exits 0
and prints nothing.

The connect timeout is short (the board is away: say so now); the read timeout is long,
because the board holds a gated call open until a person decides. The client's own hook
``timeout`` must be longer than ``--timeout``: a command the client kills for taking too
long gives no verdict either, and the call runs.

Standard library only: it runs from any directory with the project installed, and
importing it loads neither Django nor the board.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import sys
from typing import Any, NoReturn
from urllib.parse import urlsplit

# The events whose failure must block: the client asks before it runs a tool.
GATED_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
BLOCK = 2  # the exit status both clients read as "blocked; stderr is the reason"

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 600.0  # a person may hold a gated call for minutes
USER_AGENT = "kanban-hook/1"


class Unreachable(Exception):
    """The board gave no usable answer; the message says why, in a few words."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kanban-hook",
        description="Forward a Claude Code or Gemini CLI hook call (JSON on stdin) to an "
        "Agent Kanban board and print its answer. A tool call is blocked (exit 2) while "
        "the board cannot be reached.",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("KANBAN_HOOK_URL", ""),
        help="the board's hook URL (default: $KANBAN_HOOK_URL)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=READ_TIMEOUT,
        help=f"seconds to wait for the board's answer (default {READ_TIMEOUT:g}); keep it "
        "below the hook's own timeout in the client's settings",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=CONNECT_TIMEOUT,
        help=f"seconds to wait for a connection (default {CONNECT_TIMEOUT:g})",
    )
    args = parser.parse_args(argv)

    body = sys.stdin.buffer.read()
    try:
        event = json.loads(body)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        # Without the event's name there is no telling a tool call from the rest.
        _block("kanban-hook: the hook input on stdin is not a JSON object")
    gated = event.get("hook_event_name") in GATED_EVENTS

    try:
        if not args.url:
            raise Unreachable("no hook URL: pass --url or set KANBAN_HOOK_URL")
        answer = forward(
            args.url,
            body,
            token=os.environ.get("KANBAN_TOKEN", ""),
            agent=os.environ.get("KANBAN_AGENT", ""),
            connect_timeout=args.connect_timeout,
            read_timeout=args.timeout,
        )
    except Unreachable as error:
        if gated:
            _block(
                f"The Agent Kanban board at {args.url or '(no URL)'} could not be reached "
                f"({error}), so this tool call is blocked until it can be."
            )
        return 0
    if answer:
        sys.stdout.write(json.dumps(answer) + "\n")
    return 0


def forward(
    url: str,
    body: bytes,
    *,
    token: str = "",
    agent: str = "",
    connect_timeout: float = CONNECT_TIMEOUT,
    read_timeout: float = READ_TIMEOUT,
) -> dict[str, Any]:
    """POST ``body`` to ``url``; the board's JSON object answer (``{}`` when it says nothing).

    Raises :class:`Unreachable` when there is no connection within ``connect_timeout``,
    no answer within ``read_timeout``, or the answer is not a 2xx JSON object.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unreachable("the URL is not an http(s) URL")
    try:
        port = parts.port
    except ValueError as error:
        raise Unreachable("the URL's port is not a number") from error
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname, port, timeout=connect_timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(parts.hostname, port, timeout=connect_timeout)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": USER_AGENT,
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if agent:
        headers["X-Agent"] = agent
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        try:
            connection.connect()
        except socket.gaierror as error:
            raise Unreachable(f"its name {parts.hostname} does not resolve") from error
        except TimeoutError as error:
            raise Unreachable(f"no connection within {connect_timeout:g} s") from error
        except ssl.SSLError as error:
            raise Unreachable(f"TLS failed: {error.reason or error}") from error
        except OSError as error:
            raise Unreachable(_os_reason(error)) from error
        if connection.sock is not None:  # connected: now wait as long as a person may
            connection.sock.settimeout(read_timeout)
        try:
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except TimeoutError as error:
            raise Unreachable(f"no answer within {read_timeout:g} s") from error
        except (OSError, http.client.HTTPException) as error:
            raise Unreachable(f"the connection failed: {_os_reason(error)}") from error
    finally:
        connection.close()
    if not 200 <= response.status < 300:
        raise Unreachable(f"it answered HTTP {response.status}{_error_message(data)}")
    if not data.strip():
        return {}
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise Unreachable("its answer is not a JSON object")
    return answer


def _os_reason(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


def _error_message(data: bytes) -> str:
    """``: <message>`` from the board's error shape ``{"error": {"code", "message"}}``."""
    try:
        message = json.loads(data)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return f": {' '.join(str(message).split())[:200]}" if message else ""


def _block(reason: str) -> NoReturn:
    sys.stderr.write(" ".join(reason.split()) + "\n")
    sys.stderr.flush()
    raise SystemExit(BLOCK)


if __name__ == "__main__":
    raise SystemExit(main())

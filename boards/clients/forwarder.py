"""kanban-hook: forward a coding client's hook call to its board, and never fail open.

Every client of SPEC §13 runs a command hook with the hook input JSON on stdin and reads
the answer from stdout (or the exit status). This command POSTs that JSON to the board's
door ``/api/boards/<slug>/hooks/<client>`` and prints the board's answer as it is::

    {"type": "command", "command": "kanban-hook --client claude-code --timeout 630"}

Where and with which token: only the boards in
``$XDG_CONFIG_HOME/agent-kanban/boards.json`` (``agent-kanban connect`` writes it, mode
0600; ``{"version": 1, "boards": [{"url", "token", "agent"}]}``). The token goes only
where the person put it: a repository's settings, ``.env`` or ``--url`` can say
anything, so ``KANBAN_HOOK_URL`` and ``--url`` only pick one of those boards (matched by
origin, path and slug; the first when neither is given), and a ``KANBAN_TOKEN`` other
than that board's own is refused as no verdict, never sent. ``KANBAN_AGENT`` names the
agent of a team token.

Fail closed (SPEC §11): a tool call (``PreToolUse``; Gemini's ``BeforeTool``; Claude's
``PreSkillShellCommand``) runs only on the board's own verdict. The board signs its answer
(``X-Kanban-Proof``: HMAC-SHA256 of the body keyed with the token); anything else — no
board configured, no connection, a timeout, a redirect, an error status, a body that is
cut short, too large, not JSON or not signed, a crash of this command — blocks the call
through the channel its client honours (exit 2 + one line on stderr; Copilot: a deny on
stdout, since its exit 2 drops the reason), naming the board. Every other event never
blocks: on any failure it exits 0 and prints nothing.

One deadline (``--timeout``, 600 s by default, for a person deciding a held call) covers
name lookup, connection, sending and every read; the client's own hook ``timeout`` must
be longer, since a hook it kills gives no verdict and the call runs.

At little cost (SPEC §11): the client pays for every run, so this module imports only
modules built into the interpreter (raw HTTP/1.1 on a socket; ``ssl`` only for https)
and needs neither ``site`` nor the package around it. ``agent-kanban connect`` writes
it in its fast form: a copy of this file in the config folder beside boards.json (out of
the agent's project, where a line of the agent's could replace it), that folder as the
first argument, imported as a module of its own from its cached bytecode
(``boards.clients.setup.forwarder``)::

    /usr/bin/python3 -I -S -c 'import sys;sys.path.append(sys.argv.pop(1));import
    forwarder;sys.exit(forwarder.main())' ~/.config/agent-kanban --client claude-code …

No Django, no board code.
"""

import _json
import _operator
import _signal
import _socket
import _thread
import posix
import sys
import time

try:  # the interpreter's own SHA-256: hashlib (and hmac) would load OpenSSL on every run
    from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from hashlib import sha256  # type: ignore[assignment]

GATED_EVENTS = frozenset({"PreToolUse", "BeforeTool", "PreSkillShellCommand", "TaskCompleted"})
CLIENTS = ("claude-code", "codex", "copilot", "gemini", "qwen", "opencode")
BLOCK = 2  # exit status read as "blocked; stderr is the reason" (all but Copilot)

DEADLINE = 600.0  # a person may hold a gated call for minutes
CONNECT_TIMEOUT = 5.0  # the board is away: say so now
MAX_ANSWER = 1 << 20
MAX_HEADERS = 1 << 16
MAX_CONFIG = 1 << 20
USER_AGENT = "kanban-hook/2"
USAGE = """usage: kanban-hook [--client NAME] [--url URL] [--timeout S] [--connect-timeout S]

Forward a coding client's hook call (JSON on stdin) to an Agent Kanban board and print
its answer. A tool call is blocked while the board gives no verdict of its own.

  --client NAME        claude-code (default), codex, copilot, gemini, qwen, opencode
  --url URL            which board of boards.json (a board or hook URL); never a new one
  --timeout S          total seconds for the board's answer (default 600)
  --connect-timeout S  seconds for a connection (default 5)

The board and token: only $XDG_CONFIG_HOME/agent-kanban/boards.json (written by
`agent-kanban connect`). KANBAN_HOOK_URL, like --url, picks one of its boards; a
KANBAN_TOKEN other than that board's blocks the call. KANBAN_AGENT names a team
token's agent.
"""


class NoVerdict(Exception):
    """The board gave no verdict of its own; ``why`` says what happened, in a few words."""

    def __init__(self, why: str, *, unreachable: bool = False, unasked: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.unreachable = unreachable
        self.unasked = unasked


class Board:
    """A board the token may go to: where (scheme, host, port, path prefix, slug) and who."""

    __slots__ = ("agent", "host", "port", "prefix", "scheme", "slug", "token")

    def __init__(self, url: str, token: str = "", agent: str = "") -> None:
        self.scheme, self.host, self.port, self.prefix, self.slug, _ = parse_url(url)
        self.token = token
        self.agent = agent

    def same(self, other: "Board") -> bool:
        return (self.scheme, self.host, self.port, self.prefix, self.slug) == (
            other.scheme,
            other.host,
            other.port,
            other.prefix,
            other.slug,
        )

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def door(self, client: str) -> str:
        return f"{self.scheme}://{self.authority}{self.door_path(client)}"

    def door_path(self, client: str) -> str:
        return f"{self.prefix}/api/boards/{self.slug}/hooks/{client}"


def main(argv: list[str] | None = None) -> int:
    """Run one hook call; the exit status for the client (see the module docstring)."""
    run = _Run()
    try:
        return run.go(sys.argv[1:] if argv is None else argv)
    except NoVerdict as error:
        _disarm()
        return run.refuse(error)
    except _Deadline:
        return run.refuse(NoVerdict(f"no answer within {run.timeout:g} s"))
    except BaseException as error:  # a crash must block a tool call too
        _disarm()
        return run.refuse(NoVerdict(f"kanban-hook failed: {type(error).__name__}"))
    finally:
        _disarm()


class _Run:
    """One hook call: what is known so far decides how a failure is reported."""

    def __init__(self) -> None:
        self.client = "claude-code"
        self.gated = True  # until the event is known: a failure then must block
        self.where = ""  # the board (or the URL, or the config file) a reason names
        self.timeout = DEADLINE

    def go(self, argv: list[str]) -> int:
        options, problem = _options(argv)
        if options.get("help"):
            sys.stdout.write(USAGE)
            return 0
        client = options.get("client", "")
        if client in CLIENTS:
            self.client = client
        self.timeout = timeout = options.get("timeout", DEADLINE)
        deadline = time.monotonic() + timeout
        _arm(timeout)

        raw = sys.stdin.buffer.read()
        event, unreadable = _event(raw)
        name = event.get("hook_event_name") if event is not None else None
        if event is not None:
            self.gated = not isinstance(name, str) or name in GATED_EVENTS
        else:
            names = _event_names(raw)
            self.gated = not names or any(n in GATED_EVENTS for n in names)

        if problem:
            raise NoVerdict(problem, unasked=True)
        board, url_client = _board(options.get("url", ""), self)
        if not client:
            client = url_client or "claude-code"
            if client not in CLIENTS:
                raise NoVerdict(f"the URL names an unknown client {client!r}", unasked=True)
            self.client = client
        self.where = board.door(client)
        if unreadable:
            raise NoVerdict(unreadable, unasked=True)
        if not board.token:
            raise NoVerdict(
                "no token for this board in boards.json: run `agent-kanban connect`",
                unasked=True,
            )
        status, headers, body = _post(board, client, raw, deadline, options)
        answer = _verdict(board, status, headers, body)
        _disarm()
        if answer:
            sys.stdout.buffer.write(body if body.endswith(b"\n") else body + b"\n")
            sys.stdout.flush()
        return 0

    def refuse(self, error: NoVerdict) -> int:
        """Block a gated call in the client's channel; any other event passes silently."""
        if not self.gated:
            return 0
        try:
            reason = _reason(error, self.where)
        except BaseException:  # even out of memory, the call is blocked
            reason = "kanban-hook failed, so this tool call is blocked."
        try:
            if self.client == "copilot":
                quoted = _json.encode_basestring_ascii(reason)
                sys.stdout.write(
                    f'{{"permissionDecision": "deny", "permissionDecisionReason": {quoted}}}\n'
                )
                sys.stdout.flush()
                return 0
            sys.stderr.write(reason + "\n")
            sys.stderr.flush()
        except BaseException:  # noqa: S110 — a closed pipe must not unblock it
            pass
        return BLOCK


def _reason(error: NoVerdict, where: str) -> str:
    why = " ".join(error.why.split())
    if not where:
        return (
            f"kanban-hook has no Agent Kanban board to ask ({why}), so this tool call is blocked."
        )
    if error.unasked:
        return (
            f"kanban-hook cannot ask the Agent Kanban board at {where} ({why}), "
            "so this tool call is blocked."
        )
    if error.unreachable:
        return (
            f"The Agent Kanban board at {where} could not be reached ({why}), "
            "so this tool call is blocked until it can be."
        )
    return (
        f"The Agent Kanban board at {where} gave no verdict ({why}), so this tool call is blocked."
    )


# -- the command line, the input, the configuration ---------------------------------------------


def _options(argv: list[str]) -> tuple[dict, str]:
    """The options given, and what is wrong with them ("" when nothing is)."""
    options: dict = {}
    names = {"--url": "url", "--client": "client", "--timeout": "timeout"}
    names["--connect-timeout"] = "connect_timeout"
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            return {"help": True}, ""
        flag, eq, value = arg.partition("=")
        if flag not in names:
            return options, f"unknown option {arg[:40]!r} (see kanban-hook --help)"
        if not eq:
            if i >= len(argv):
                return options, f"{flag} needs a value"
            value = argv[i]
            i += 1
        key = names[flag]
        if key in ("timeout", "connect_timeout"):
            try:
                seconds = float(value)
            except ValueError:
                seconds = -1.0
            if not 0 < seconds < 1e6:
                return options, f"{flag} {value[:20]!r} is not a number of seconds"
            options[key] = seconds
        elif key == "client" and value not in CLIENTS:
            return options, f"unknown client {value[:40]!r}: one of {', '.join(CLIENTS)}"
        else:
            options[key] = value
    return options, ""


def _event(raw: bytes) -> tuple[dict | None, str]:
    """The hook input as an object, or None and why it cannot be read."""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None, "the hook input on stdin is not UTF-8"
    try:
        event = loads(text)
    except RecursionError:
        return None, "the hook input on stdin is nested too deep to read"
    except ValueError:
        return None, "the hook input on stdin is not JSON"
    if not isinstance(event, dict):
        return None, "the hook input on stdin is not a JSON object"
    return event, ""


def _event_names(raw: bytes) -> list[str]:
    """Every ``"hook_event_name": "…"`` in input that cannot be parsed whole (too deep,
    not UTF-8): when all of them name an event that never blocks, a failure passes."""
    text = raw.decode(errors="replace")
    key = '"hook_event_name"'
    names = []
    at = text.find(key)
    while at >= 0:
        rest = text[at + len(key) :].lstrip()
        if rest.startswith(":"):
            rest = rest[1:].lstrip()
            if rest.startswith('"'):
                try:
                    names.append(_json.scanstring(rest, 1, True)[0])
                except ValueError:
                    names.append("")
        at = text.find(key, at + 1)
    return names


def _board(url: str, run: _Run) -> tuple[Board, str]:
    """The configured board to ask, and the client ``url`` names ("" when none).

    Only a board listed in boards.json gets a token: a repository's settings or ``.env``
    can set any environment and any ``--url``, so ``KANBAN_HOOK_URL`` and ``--url`` only
    pick one of the listed boards (the first when neither is given), and a
    ``KANBAN_TOKEN`` other than the listed board's is refused, never sent."""
    env = posix.environ
    chosen = env.get(b"KANBAN_HOOK_URL", b"").decode(errors="replace")
    boards = _configured_boards(run)
    url_client = ""
    for name, wanted_url in (("KANBAN_HOOK_URL", chosen), ("--url", url)):
        if not wanted_url:
            continue
        run.where = wanted_url
        try:
            wanted = Board(wanted_url)
            if name == "--url":  # the door's client, as a hook URL on the command line names it
                url_client = parse_url(wanted_url)[5]
        except NoVerdict as error:
            raise NoVerdict(f"{name}: {error.why}", unasked=True) from None
        boards = [board for board in boards if board.same(wanted)]
        if not boards:
            raise NoVerdict(
                f"{name} is not a configured board, so the token is not sent there "
                f"({config_path()} does not list it"
                + (", or not the one KANBAN_HOOK_URL names" if name == "--url" and chosen else "")
                + "): run `agent-kanban connect --url` for it",
                unasked=True,
            )
    board = boards[0]
    given = env.get(b"KANBAN_TOKEN", b"")  # an empty one replaces nothing
    if given and given.decode(errors="replace") != board.token:
        run.where = board.door(run.client)
        raise NoVerdict(
            f"KANBAN_TOKEN is set and is not the token {config_path()} holds for this "
            "board; the environment cannot replace it: unset KANBAN_TOKEN, or run "
            "`agent-kanban connect` with it",
            unasked=True,
        )
    agent = env.get(b"KANBAN_AGENT")
    if agent is not None:  # a team token's agent name: a label, not where the token goes
        board.agent = agent.decode(errors="replace")
    return board, url_client


def config_path() -> str:
    """``$XDG_CONFIG_HOME/agent-kanban/boards.json`` (default ``~/.config/…``)."""
    env = posix.environ
    base = env.get(b"XDG_CONFIG_HOME", b"").decode(errors="replace")
    if not base.startswith("/"):  # the XDG spec: a relative value is ignored
        base = env.get(b"HOME", b"").decode(errors="replace").rstrip("/") + "/.config"
    return base.rstrip("/") + "/agent-kanban/boards.json"


def _configured_boards(run: _Run) -> list[Board]:
    path = config_path()
    run.where = ""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_CONFIG + 1)
    except FileNotFoundError:
        raise NoVerdict(
            f"none is configured: run `agent-kanban connect` ({path} does not exist)",
            unasked=True,
        ) from None
    except OSError as error:
        raise NoVerdict(f"{path} cannot be read: {_os_reason(error)}", unasked=True) from None
    try:
        config = loads(data.decode()) if len(data) <= MAX_CONFIG else None
    except (ValueError, RecursionError):
        config = None
    if not isinstance(config, dict) or config.get("version") != 1:
        raise NoVerdict(f'{path} is not {{"version": 1, "boards": [...]}}', unasked=True)
    entries = config.get("boards")
    if not isinstance(entries, list) or not entries:
        raise NoVerdict(f"{path} lists no boards", unasked=True)
    boards = []
    for number, entry in enumerate(entries, 1):
        fields = entry if isinstance(entry, dict) else {}
        url, token, agent = (fields.get(k, "") for k in ("url", "token", "agent"))
        if not (isinstance(url, str) and isinstance(token, str) and isinstance(agent, str)):
            raise NoVerdict(f"{path}: board {number} is not {{url, token, agent}}", unasked=True)
        try:
            boards.append(Board(url, token, agent))
        except NoVerdict as error:
            raise NoVerdict(f"{path}: board {number}: {error.why}", unasked=True) from None
    return boards


def parse_url(url: str) -> tuple[str, str, int, str, str, str]:
    """(scheme, host, port, path prefix, slug, client) of a board URL
    (``…/boards/<slug>/``) or a hook URL (``…/api/boards/<slug>/hooks/<client>``)."""
    shown = url[:200]
    if any(not 32 < ord(c) < 127 for c in url) or any(c in url for c in "?#@\\"):
        raise NoVerdict(f"{shown!r} is not a plain http(s) URL", unasked=True)
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise NoVerdict(f"{shown!r} is not an http(s) URL", unasked=True)
    authority, _, path = rest.partition("/")
    if authority.startswith("["):
        host, _, after = authority[1:].partition("]")
        if after and not after.startswith(":"):
            raise NoVerdict(f"{shown!r} has a malformed host", unasked=True)
        port_text = after[1:]
    else:
        host, _, port_text = authority.partition(":")
    if not host:
        raise NoVerdict(f"{shown!r} has no host", unasked=True)
    port = 443 if scheme == "https" else 80
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise NoVerdict(f"{shown!r} has a malformed port", unasked=True)
        port = int(port_text)
    parts = path.rstrip("/").split("/") if path.strip("/") else []
    if len(parts) >= 5 and parts[-5:-3] == ["api", "boards"] and parts[-2] == "hooks":
        prefix, slug, client = parts[:-5], parts[-3], parts[-1]
    elif len(parts) >= 2 and parts[-2] == "boards":
        prefix, slug, client = parts[:-2], parts[-1], ""
    else:
        raise NoVerdict(
            f"{shown!r} is neither a board URL (…/boards/<slug>/) nor a hook URL "
            "(…/api/boards/<slug>/hooks/<client>)",
            unasked=True,
        )
    if not slug.replace("-", "").replace("_", "").isalnum() or "" in prefix:
        raise NoVerdict(f"{shown!r} has a malformed board path", unasked=True)
    return scheme, host.lower(), port, "".join("/" + p for p in prefix), slug, client


# -- HTTP/1.1 on a socket, under one deadline --------------------------------------------------


def _post(
    board: Board, client: str, body: bytes, deadline: float, options: dict
) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` to the board's door; (status, headers, body) of its answer."""
    token, agent = board.token, board.agent
    if any(not 32 < ord(c) < 127 for c in token):
        raise NoVerdict("the token has characters a header cannot carry", unasked=True)
    if any(not 32 <= ord(c) < 256 or c == "\x7f" for c in agent):
        raise NoVerdict("the agent name has characters a header cannot carry", unasked=True)
    host = _host_name()
    head = (
        f"POST {board.door_path(client)} HTTP/1.1\r\n"
        f"Host: {board.authority}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json\r\n"
        f"User-Agent: {USER_AGENT}\r\n"
        f"Authorization: Bearer {token}\r\n"
        + (f"X-Agent: {agent}\r\n" if agent else "")
        + (f"X-Kanban-Host: {host}\r\n" if host else "")
        + f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    budget = _Budget(deadline, options.get("timeout", DEADLINE))
    sock = _connect(board, budget, options.get("connect_timeout", CONNECT_TIMEOUT))
    try:
        try:
            sock.settimeout(budget.left())
            sock.sendall(head.encode("latin-1") + body)
        except TimeoutError:
            raise budget.expired() from None
        except OSError as error:
            raise NoVerdict(f"sending failed: {_os_reason(error)}", unreachable=True) from None
        return _Response(sock, budget).read()
    finally:
        sock.close()


def _host_name() -> str:
    """This machine's name for the session's "on build-box" (left out if a header cannot
    carry it: the call is not blocked for want of a label)."""
    try:
        name = _socket.gethostname()
    except OSError:
        return ""
    return name if name and all(32 < ord(c) < 127 for c in name) else ""


class _Budget:
    """What is left of the one deadline, for each socket operation in turn."""

    def __init__(self, deadline: float, total: float) -> None:
        self.deadline = deadline
        self.total = total

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left

    def expired(self) -> NoVerdict:
        return NoVerdict(f"no answer within {self.total:g} s")


def _connect(board: Board, budget: _Budget, connect_timeout: float) -> "_socket.socket":
    addresses = _resolve(board.host, board.port, min(budget.left(), connect_timeout))
    failure = NoVerdict("no address to connect to", unreachable=True)
    for family, kind, proto, _, address in addresses:
        sock = _socket.socket(family, kind, proto)
        wait = min(budget.left(), connect_timeout)
        try:
            sock.settimeout(wait)
            sock.connect(address)
        except TimeoutError:
            sock.close()
            failure = NoVerdict(f"no connection within {wait:g} s", unreachable=True)
            continue
        except OSError as error:
            sock.close()
            failure = NoVerdict(_os_reason(error), unreachable=True)
            continue
        if board.scheme == "https":
            return _tls(sock, board.host, budget)
        return sock
    raise failure


def _resolve(host: str, port: int, wait: float) -> list:
    """``getaddrinfo`` within ``wait`` seconds: it has no timeout of its own, so a name
    is looked up in a thread this process leaves behind if it hangs."""
    name = host.encode()  # bytes: a str would load the idna codec (and re) on every run
    if host.replace(".", "").isdigit() or ":" in host:
        return _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM, 0, _socket.AI_NUMERICHOST)
    found: list = []
    done = _thread.allocate_lock()
    done.acquire()

    def look_up() -> None:
        try:
            found.append(_socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM))
        except BaseException as error:  # handed to the waiting thread
            found.append(error)
        finally:
            done.release()

    _thread.start_new_thread(look_up, ())
    if not done.acquire(timeout=wait):
        raise NoVerdict(f"its name {host} did not resolve within {wait:g} s", unreachable=True)
    if isinstance(found[0], _socket.gaierror):
        raise NoVerdict(f"its name {host} does not resolve", unreachable=True)
    if isinstance(found[0], BaseException):
        raise found[0]
    return found[0]


def _tls(raw: "_socket.socket", host: str, budget: _Budget) -> "_socket.socket":
    import socket  # ssl (and the socket class it wraps) only for https
    import ssl

    sock = socket.socket(raw.family, raw.type, raw.proto, fileno=raw.detach())
    try:
        sock.settimeout(budget.left())
        return ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    except TimeoutError:
        sock.close()
        raise budget.expired() from None
    except (ssl.SSLError, OSError) as error:
        sock.close()
        reason = getattr(error, "reason", None) or _os_reason(error)
        raise NoVerdict(f"TLS failed: {reason}", unreachable=True) from None


class _Response:
    """Reads one HTTP/1.1 response: status line, headers, and a body by Content-Length,
    chunks or the end of the connection — whole, within the deadline and the size cap."""

    def __init__(self, sock: "_socket.socket", budget: _Budget) -> None:
        self.sock = sock
        self.budget = budget
        self.buffer = b""
        self.eof = False

    def _fill(self) -> None:
        try:
            self.sock.settimeout(self.budget.left())
            data = self.sock.recv(65536)
        except TimeoutError:
            raise self.budget.expired() from None
        except OSError as error:
            raise NoVerdict(f"the connection failed: {_os_reason(error)}") from None
        if not data:
            self.eof = True
        self.buffer += data

    def _until(self, mark: bytes, limit: int, what: str) -> bytes:
        while (end := self.buffer.find(mark)) < 0:
            if len(self.buffer) > limit:
                raise NoVerdict(f"its {what} is too large")
            if self.eof:
                raise NoVerdict(f"it closed the connection in the middle of its {what}")
            self._fill()
        line, self.buffer = self.buffer[:end], self.buffer[end + len(mark) :]
        return line

    def _exactly(self, size: int, what: str) -> bytes:
        while len(self.buffer) < size:
            if self.eof:
                raise NoVerdict(f"its {what} was cut short ({len(self.buffer)} of {size} bytes)")
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read(self) -> tuple[int, dict[str, str], bytes]:
        status, headers = self._head()
        while 100 <= status < 200:  # an interim answer: the real one follows
            status, headers = self._head()
        if status in (204, 304):
            return status, headers, b""
        encoding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if encoding is not None:
            if encoding.lower() != "chunked":
                raise NoVerdict(f"its answer has an unknown transfer encoding {encoding[:20]!r}")
            return status, headers, self._chunks()
        if length is not None:
            if not length.isdigit():
                raise NoVerdict("its answer has a malformed Content-Length")
            if int(length) > MAX_ANSWER:
                raise NoVerdict(f"its answer is too large ({length} bytes)")
            return status, headers, self._exactly(int(length), "answer")
        while not self.eof:
            if len(self.buffer) > MAX_ANSWER:
                raise NoVerdict("its answer is too large")
            self._fill()
        return status, headers, self.buffer

    def _head(self) -> tuple[int, dict[str, str]]:
        try:
            block = self._until(b"\r\n\r\n", MAX_HEADERS, "header").decode("latin-1")
        except NoVerdict:
            if not self.buffer and self.eof:
                raise NoVerdict("it closed the connection without answering") from None
            raise
        status_line, *lines = block.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if version not in ("HTTP/1.0", "HTTP/1.1") or not code.isdigit() or len(code) != 3:
            raise NoVerdict("its answer is not HTTP")
        headers: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            name = name.strip().lower()
            if not colon or not name:
                raise NoVerdict("its answer has a malformed header")
            if name in headers and name in (
                "content-length",
                "transfer-encoding",
                "x-kanban-proof",
            ):
                raise NoVerdict(f"its answer has two {name} headers")
            headers[name] = value.strip()
        return int(code), headers

    def _chunks(self) -> bytes:
        body = b""
        while True:
            size_line = self._until(b"\r\n", 1024, "chunk header").split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise NoVerdict("its answer has malformed chunks") from None
            if size < 0 or len(body) + size > MAX_ANSWER:
                raise NoVerdict("its answer is too large" if size > 0 else "malformed chunks")
            if size == 0:
                while self._until(b"\r\n", MAX_HEADERS, "trailer"):
                    pass
                return body
            body += self._exactly(size, "answer")
            if self._exactly(2, "answer") != b"\r\n":
                raise NoVerdict("its answer has malformed chunks")


# -- the verdict ---------------------------------------------------------------------------------


def _verdict(board: Board, status: int, headers: dict[str, str], body: bytes) -> dict:
    """The board's own answer as an object, or :class:`NoVerdict` saying why not."""
    if 300 <= status < 400:
        target = headers.get("location", "")
        target = "".join(c for c in target[:120] if 32 < ord(c) < 127)
        raise NoVerdict(f"it answered HTTP {status}, a redirect to {target or '?'} not followed")
    if status == 401:
        raise NoVerdict("it refused the token: HTTP 401")
    if status == 403 and _error_code(body) == "identity_taken":
        raise NoVerdict("the agent's name is taken by another session: HTTP 403 identity_taken")
    if not 200 <= status < 300:
        code = _error_code(body)
        raise NoVerdict(f"it answered HTTP {status}{' ' + code if code else ''}")
    proof = headers.get("x-kanban-proof", "")
    if not proof:
        raise NoVerdict("the answer is not the board's: it carries no X-Kanban-Proof")
    expected = hmac_sha256(board.token.encode(), body)
    # hmac.compare_digest is this function (in constant time), without importing OpenSSL.
    if not _operator._compare_digest(expected, proof.lower()):
        raise NoVerdict("the answer is not the board's: its X-Kanban-Proof does not match")
    try:
        answer = loads(body.decode())
    except (ValueError, RecursionError):
        answer = None
    if not isinstance(answer, dict):
        raise NoVerdict("its answer is not a JSON object")
    return answer


def hmac_sha256(key: bytes, message: bytes) -> str:
    """``hmac.new(key, message, "sha256").hexdigest()`` (RFC 2104), on the builtin SHA-256."""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + message).digest()
    return sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest()


def _error_code(body: bytes) -> str:
    """The ``code`` of the board's error shape ``{"error": {"code", "message"}}``, if it
    is a plain identifier (the body is unproven: its free text is not repeated)."""
    try:
        answer = loads(body.decode())
    except Exception:  # any other body has no code
        return ""
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, str) and 0 < len(code) <= 40 and code.replace("_", "").isalnum():
        return code if code.isascii() else ""
    return ""


def _os_reason(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error) or type(error).__name__


# -- JSON without the json package, the deadline as a last resort -----------------------------


class _Decoding:
    """What ``_json.make_scanner`` reads from a decoder (json.JSONDecoder's defaults);
    the json package would import ``re`` and friends on every run."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity, as json.loads reads them


_scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]


def loads(text: str) -> object:
    """``json.loads`` for one document (ValueError when it is not one; RecursionError when
    it is nested deeper than the interpreter's limit)."""
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


class _Deadline(BaseException):
    """The deadline's alarm: raised wherever the run hangs beyond every socket timeout."""


def _alarm(signum: int, frame: object) -> None:
    raise _Deadline


def _arm(seconds: float) -> None:
    """A backstop a second after the deadline: a hung read of stdin or of the config file
    ends in a block too."""
    try:
        _signal.signal(_signal.SIGALRM, _alarm)
        _signal.setitimer(_signal.ITIMER_REAL, seconds + 1.0)
    except (ValueError, AttributeError, OSError):  # not the main thread, or no itimer
        pass


def _disarm() -> None:
    try:  # noqa: SIM105 — contextlib would be one more import on every run
        _signal.setitimer(_signal.ITIMER_REAL, 0)
    except (ValueError, AttributeError, OSError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())

"""Outbound HTTP for webhooks: which addresses this server sends to, and one POST that
ends by one deadline.

An endpoint is a URL a board admin typed, and the server sends to it from inside its
own network. So only public unicast addresses are reached: loopback, private (RFC 1918,
ULA), shared (CGNAT, where some clouds put their metadata service), link-local,
multicast, documentation and other reserved ranges, their IPv4-mapped, 6to4 and NAT64
forms, and this host's own addresses are refused, unless ``KANBAN_WEBHOOK_ALLOW_NETWORKS``
names them. A name is resolved once per attempt and the connection goes to an address
that was checked (the request keeps the name in its Host header, TLS SNI and certificate
check), so a DNS answer that changes between the check and the connection cannot
redirect it.

Each attempt has one deadline (``KANBAN_WEBHOOK_DEADLINE_SECONDS``) for all of it, each
socket operation's timeout recomputed from it: a server that drips a byte at a time
cannot hold a worker longer. What an attempt records is the class of its failure only
("connection failed", "timed out", "HTTP 404"): no errno text, no resolver text, no
address, so the deliveries table cannot map what answers where.
"""

from __future__ import annotations

import functools
import http.client
import io
import ipaddress
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The classes of failure an attempt records (people read them on the webhooks page).
REFUSED = "refused: private address"
NOT_RESOLVED = "host name not resolved"
CONNECTION_FAILED = "connection failed"
TIMED_OUT = "timed out"
TLS_FAILED = "TLS handshake failed"
CERTIFICATE_REFUSED = "TLS certificate not valid for the host"
NO_HTTP_ANSWER = "no valid HTTP answer"
INVALID_URL = "invalid URL"
NOT_SENT = "could not send"

# What an admin adding a refused endpoint is told.
NOT_PUBLIC = (
    "not a public address: this server does not send to loopback, private, shared, "
    "link-local, reserved or its own addresses (KANBAN_WEBHOOK_ALLOW_NETWORKS can allow some)"
)

_V4_REFUSED = tuple(
    ipaddress.IPv4Network(network)
    for network in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared (CGNAT); Alibaba Cloud's metadata is 100.100.100.200
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local; most clouds' metadata is 169.254.169.254
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments; Oracle Cloud's metadata is 192.0.0.192
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relays (deprecated)
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
        "168.63.129.16/32",  # Azure's platform endpoint: a public address only its VMs reach
    )
)
# IPv6 unicast on the Internet is 2000::/3; everything outside it (loopback, ULA fc00::/7
# with AWS's metadata fd00:ec2::254, link-local, multicast, NAT64 for local use…) is
# refused, except the forms that carry an IPv4 address, judged by that address.
_V6_GLOBAL = ipaddress.IPv6Network("2000::/3")
_V6_REFUSED = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "2001::/23",  # IETF protocol assignments (Teredo among them)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOOPBACK = ("127.0.0.0/8", "::1/128")
_PRINTABLE_ASCII = "".join(chr(code) for code in range(33, 127))


class Failure(Exception):
    """An attempt that failed; its text is the class of failure recorded."""


class Deadline:
    """The moment an attempt ends (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; TimeoutError when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the attempt's deadline passed")
        return left


# -- which addresses ------------------------------------------------------------------------


def allowed_networks() -> tuple[IPNetwork, ...]:
    """The networks the settings open although the rules below refuse them."""
    names = list(settings.KANBAN_WEBHOOK_ALLOW_NETWORKS)
    if settings.KANBAN_WEBHOOK_ALLOW_LOOPBACK:
        names.extend(_LOOPBACK)
    return _networks(tuple(names))


@functools.lru_cache(maxsize=8)
def _networks(names: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(name, strict=False) for name in names)


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped, 6to4 or NAT64 address leads to, if it is one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _in_refused_range(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in network for network in _V4_REFUSED)
    embedded = _embedded_v4(address)
    if embedded is not None:
        return _in_refused_range(embedded)
    return address not in _V6_GLOBAL or any(address in network for network in _V6_REFUSED)


def own_address(address: IPAddress) -> bool:
    """Whether ``address`` is one of this host's own.

    Asks the kernel which source address it would send from: to one of its own
    addresses, it sends from that address. (A UDP connect picks the route, sending
    nothing.)
    """
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((str(address), 9))
            source = probe.getsockname()[0]
    except OSError:
        return False  # no route there (or no such stack): not one of ours
    return ipaddress.ip_address(source.split("%")[0]) == address


def address_refused(address: IPAddress) -> bool:
    """Whether a webhook may not be sent to ``address``."""
    embedded = _embedded_v4(address) if isinstance(address, ipaddress.IPv6Address) else None
    forms = [address] if embedded is None else [address, embedded]
    allowed = allowed_networks()
    if any(form in network for form in forms for network in allowed):
        return False
    return _in_refused_range(address) or any(own_address(form) for form in forms)


# -- the endpoint's URL ---------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where one POST goes: the URL's parts, as the request line and Host header use them."""

    https: bool
    host: str
    port: int
    path: str


def url_syntax_problem(url: Any) -> str | None:
    """Why ``url`` cannot be an endpoint's URL, addresses aside, or None."""
    if not isinstance(url, str) or len(url) > 500:
        return "a URL of at most 500 characters"
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        return "only http:// and https:// URLs"
    if not parts.hostname:
        return "the URL has no host"
    try:
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        return "the URL's port is not a number from 0 to 65535"
    if parts.username or parts.password:
        return "no user or password in the URL (the signature authenticates the board)"
    return None


def target(url: str) -> Target:
    """The parts of a URL that ``url_syntax_problem`` accepted."""
    parts = urlsplit(url.strip())
    https = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # The request line is ASCII without spaces: percent-encode anything else, keep the rest.
    path = quote(path, safe=_PRINTABLE_ASCII)
    return Target(https, parts.hostname or "", parts.port or (443 if https else 80), path)


# -- resolving, once ------------------------------------------------------------------------


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def resolve(host: str, port: int, deadline: Deadline) -> list[IPAddress]:
    """The addresses of ``host`` (an address is its own), asked once, by the deadline."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        # Loopback by definition (RFC 6761), whatever a resolver says.
        return [ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1")]
    answer: list[Any] = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except Exception as exc:  # gaierror, or a name IDNA cannot encode
            answer.append(exc)

    # getaddrinfo takes no timeout: the lookup runs in its own thread, which the attempt
    # stops waiting for at the deadline (the resolver's own timeouts end the thread).
    thread = threading.Thread(target=lookup, name="webhook-resolve", daemon=True)
    thread.start()
    thread.join(deadline.remaining())
    if not answer:
        raise TimeoutError("resolving took past the deadline")
    if isinstance(answer[0], Exception):
        raise Failure(NOT_RESOLVED)
    addresses: list[IPAddress] = []
    for *_, sockaddr in answer[0]:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Failure(NOT_RESOLVED)
    return addresses


def endpoint_problem(url: Any) -> str | None:
    """Why ``url`` cannot be an endpoint, or None: checked when it is added (each attempt
    checks its addresses again: a name may come to point elsewhere)."""
    problem = url_syntax_problem(url)
    if problem:
        return problem
    where = target(url)
    try:
        addresses = resolve(
            where.host, where.port, Deadline(settings.KANBAN_WEBHOOK_DEADLINE_SECONDS)
        )
    except (Failure, TimeoutError):
        return None  # not resolvable now (it may be soon): each attempt resolves it again
    if any(address_refused(address) for address in addresses):
        return NOT_PUBLIC
    return None


# -- one POST, by the deadline --------------------------------------------------------------


class _DeadlineSocket:
    """A connected socket whose every send and receive ends by the attempt's deadline.

    A timeout per call alone lets a server that sends a byte just before each timeout
    hold the attempt for ever; here each call gets what is left of the deadline.
    """

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        while view:
            self._sock.settimeout(self._deadline.remaining())
            view = view[self._sock.send(view) :]

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._deadline.remaining())
        return self._sock.recv_into(buffer)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        self._sock.close()


class _DeadlineReader(io.RawIOBase):
    """The response's byte stream (``http.client`` reads the answer through it)."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


def _connect(addresses: list[IPAddress], port: int, deadline: Deadline) -> socket.socket:
    """A TCP connection to the first of ``addresses`` (all checked) that takes one."""
    failure: OSError = OSError("no address")
    for address in addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(deadline.remaining())
            sock.connect((str(address), port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to an address resolved and checked before: the Host header keeps the name."""

    def __init__(self, where: Target, addresses: list[IPAddress], deadline: Deadline) -> None:
        super().__init__(where.host, where.port)
        self.addresses = addresses
        self.deadline = deadline

    def connect(self) -> None:
        sock = _connect(self.addresses, self.port, self.deadline)
        self.sock = _DeadlineSocket(sock, self.deadline)  # type: ignore[assignment]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an address resolved and checked before: SNI and the certificate check
    use the name, as the Host header does."""

    def __init__(self, where: Target, addresses: list[IPAddress], deadline: Deadline) -> None:
        self.tls = tls_context()
        super().__init__(where.host, where.port, context=self.tls)
        self.addresses = addresses
        self.deadline = deadline

    def connect(self) -> None:
        sock = _connect(self.addresses, self.port, self.deadline)
        try:
            # The handshake as a whole gets what is left (ssl counts one timeout per call).
            sock.settimeout(self.deadline.remaining())
            wrapped = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = _DeadlineSocket(wrapped, self.deadline)  # type: ignore[assignment]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The system's trusted certificates, verifying the endpoint's name (shared: loading
    them costs more than a handshake)."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST once, by the deadline; (HTTP status or None, the class of failure or "")."""
    deadline = Deadline(settings.KANBAN_WEBHOOK_DEADLINE_SECONDS)
    try:
        if url_syntax_problem(url):
            return None, INVALID_URL
        where = target(url)
        addresses = resolve(where.host, where.port, deadline)
        if any(address_refused(address) for address in addresses):
            return None, REFUSED
        kind = _PinnedHTTPSConnection if where.https else _PinnedHTTPConnection
        connection = kind(where, addresses, deadline)
        try:
            connection.request("POST", where.path, body=body, headers=headers)
            # Only the status counts: the body is never read.
            status = connection.getresponse().status
        finally:
            connection.close()
    except Failure as failure:
        return None, str(failure)
    except TimeoutError:
        return None, TIMED_OUT
    except ssl.SSLCertVerificationError:
        return None, CERTIFICATE_REFUSED
    except ssl.SSLError:
        return None, TLS_FAILED
    except http.client.HTTPException:
        return None, NO_HTTP_ANSWER
    except OSError:
        return None, CONNECTION_FAILED
    except Exception:  # e.g. a header value http.client refuses: this row, not the worker
        logger.exception("a webhook POST failed before an answer")
        return None, NOT_SENT
    if 200 <= status < 300:
        return status, ""
    note = " (redirects are not followed)" if 300 <= status < 400 else ""
    return status, f"HTTP {status}{note}"

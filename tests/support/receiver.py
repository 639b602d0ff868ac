"""Real HTTP endpoints on loopback for webhook tests: ``Receiver`` records each request,
answers as scripted (a status per request, then 200), or hangs while told to, over HTTP
or HTTPS; ``Dripper`` answers one byte at a time, slowly, for ever."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import socket
import socketserver
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


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
    host: str = "127.0.0.1"
    port: int = 0
    tls: ssl.SSLContext | None = None  # HTTPS with this context
    server_names: list[str | None] = field(default_factory=list)  # the SNI of each handshake

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

        self.server = ThreadingHTTPServer((self.host, self.port), Handler)
        self.server.daemon_threads = True
        if self.tls is not None:
            self.tls.sni_callback = lambda _sock, name, _context: self.server_names.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout: float = 10) -> list[Received]:
        """Wait until ``count`` requests arrived; all of them so far."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
            return list(self.received)

    def close(self) -> None:
        self.hang.clear()
        self.server.shutdown()
        self.server.server_close()


class Dripper:
    """An endpoint that reads the request, then answers one byte every ``every``
    seconds, for ever: each read of its answer gets a byte well within any per-read
    timeout, so only a deadline for the whole attempt ends it."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + b"X-Slow: " + b"z" * 4096

    def __init__(self, every: float = 0.3) -> None:
        self.every = every
        self.closing = threading.Event()
        self.lock = threading.Lock()
        self.connections = 0  # accepted so far
        self.open = 0  # being answered now
        self.sent = 0  # bytes answered so far
        dripper = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with dripper.lock:
                    dripper.connections += 1
                    dripper.open += 1
                try:
                    self.request.recv(65536)
                    for byte in dripper.ANSWER:
                        if dripper.closing.wait(dripper.every):
                            return
                        self.request.sendall(bytes([byte]))
                        with dripper.lock:
                            dripper.sent += 1
                except OSError:
                    pass  # the client gave up
                finally:
                    with dripper.lock:
                        dripper.open -= 1

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for_open(self, count: int = 1, timeout: float = 10) -> bool:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            if self.open >= count:
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


def free_port_on(*hosts: str) -> int:
    """A TCP port free on each of ``hosts`` (for endpoints on several loopback addresses)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = probe.getsockname()[1]
        try:
            for host in hosts[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on all of {hosts}")


def certificate(directory: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A test CA and a certificate for ``name`` signed by it: (the server's context, a
    client context that trusts only that CA and checks the name)."""
    now = datetime.datetime.now(datetime.UTC)

    def issue(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = issue("Kanban test CA", ca_key, "Kanban test CA", ca_key, ca=True)
    leaf = issue(name, key, "Kanban test CA", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "cert.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    (directory / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    client = ssl.create_default_context(cafile=str(directory / "ca.pem"))
    return server, client

"""A Web Push service stand-in on loopback: it checks each push's VAPID JWT (RFC 8292)
against the key the board publishes and the audience it should name, decrypts the
aes128gcm body (RFC 8291) with the test subscription's own keys, and records it; it
answers as scripted (a status per request, then 201)."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Push:
    """One push the service took: its headers, the JWT's claims, the decrypted JSON."""

    headers: dict[str, str]
    claims: dict[str, Any]
    data: dict[str, Any]
    size: int
    at: float


@dataclass
class Browser:
    """What a browser keeps for one subscription: its ECDH key pair and auth secret."""

    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    def keys(self) -> dict[str, str]:
        point = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {"p256dh": b64url(point), "auth": b64url(self.auth)}


def verify_vapid(authorization: str, audience: str, public_key: str) -> dict[str, Any]:
    """The claims of a valid ``vapid t=…, k=…`` header; AssertionError otherwise."""
    scheme, _, rest = authorization.partition(" ")
    assert scheme == "vapid", authorization
    params = dict(part.strip().split("=", 1) for part in rest.split(","))
    assert params["k"] == public_key, "signed with another key than the one published"
    head, body, signature = params["t"].split(".")
    assert json.loads(unb64url(head)) == {"typ": "JWT", "alg": "ES256"}
    raw = unb64url(signature)
    assert len(raw) == 64
    signer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(params["k"]))
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        signer.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise AssertionError("the VAPID JWT's signature does not verify") from None
    claims = json.loads(unb64url(body))
    assert claims["aud"] == audience, claims
    assert time.time() < claims["exp"] <= time.time() + 24 * 3600, claims
    assert claims["sub"].startswith(("mailto:", "https:")), claims
    return claims


class PushService:
    """The stand-in: ``endpoint(browser)`` is a subscription's URL; ``pushes`` what came."""

    def __init__(self, public_key: str) -> None:
        self.public_key = public_key  # the board's, as GET /api/push/key publishes it
        self.browsers: dict[str, Browser] = {}
        self.pushes: list[Push] = []
        self.failures: list[str] = []
        self.answers: list[int] = []
        self.changed = threading.Condition()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = service.take(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def endpoint(self, browser: Browser) -> str:
        name = b64url(os.urandom(9))
        self.browsers[name] = browser
        return f"{self.origin}/push/{name}"

    def take(self, path: str, headers: dict[str, str], body: bytes) -> int:
        try:
            browser = self.browsers[path.rsplit("/", 1)[-1]]
            assert headers.get("Content-Encoding") == "aes128gcm", headers
            assert int(headers["TTL"]) > 0, headers
            assert len(body) <= 4096, len(body)
            claims = verify_vapid(headers["Authorization"], self.origin, self.public_key)
            plain = http_ece.decrypt(
                body, private_key=browser.key, auth_secret=browser.auth, version="aes128gcm"
            )
            push = Push(headers, claims, json.loads(plain), len(body), time.monotonic())
        except Exception as exc:  # the test reads these: a bad push fails it
            with self.changed:
                self.failures.append(repr(exc))
                self.changed.notify_all()
            return 400
        with self.changed:
            self.pushes.append(push)
            self.changed.notify_all()
            return self.answers.pop(0) if self.answers else 201

    def wait(self, count: int, timeout: float = 5) -> list[Push]:
        """The first ``count`` pushes, once they came (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.pushes) < count and not self.failures:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.pushes)} of {count} pushes after {timeout:g} s"
                self.changed.wait(left)
            assert not self.failures, self.failures
            return self.pushes[:count]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

"""The board's VAPID key pair (RFC 8292): made once, kept in the database, so every
server process signs with the same key and a restart keeps browsers' subscriptions."""

from __future__ import annotations

import base64
import time
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from py_vapid import Vapid02

from boards.models import VapidKey

# A VAPID token may live 24 hours at most (RFC 8292 §2); a shorter one limits a leak.
TOKEN_SECONDS = 12 * 3600


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def vapid_key() -> VapidKey:
    """The key pair, made by the first process that needs it (one fixed row: two
    processes racing both read the one that was stored)."""
    row = VapidKey.objects.filter(pk=1).first()
    if row is not None:
        return row
    fresh = Vapid02()
    fresh.generate_keys()
    point = fresh.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    row, _ = VapidKey.objects.get_or_create(
        pk=1,
        defaults={"private_pem": fresh.private_pem().decode(), "public_key": b64url(point)},
    )
    return row


def public_key() -> str:
    """The application server key browsers subscribe with (base64url, uncompressed point)."""
    return vapid_key().public_key


def authorization(endpoint: str) -> str:
    """The ``Authorization: vapid t=…, k=…`` header for a push to ``endpoint``: a JWT
    for its origin, signed with the board's key, ``sub`` from KANBAN_VAPID_SUBJECT."""
    parts = urlsplit(endpoint)
    signer = Vapid02.from_pem(vapid_key().private_pem.encode())
    claims = {
        "aud": f"{parts.scheme}://{parts.netloc}",
        "sub": settings.KANBAN_VAPID_SUBJECT,
        "exp": int(time.time()) + TOKEN_SECONDS,
    }
    return signer.sign(claims)["Authorization"]

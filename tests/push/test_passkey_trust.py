"""Passkeys managed with a passkey (SPEC §14, issue 42): a session cookie alone adds and
removes none; every ceremony requires user verification; and every push/passkey JSON
door answers a non-object body with a 4xx, never a 500.

``Authenticator`` is a software authenticator (a P-256 key, "none" attestation) that
makes the real WebAuthn messages the browser would post, so the board's py_webauthn
checks run on them unchanged.
"""

from __future__ import annotations

import hashlib
import json
import struct
from base64 import urlsafe_b64encode
from typing import Any

import cbor2
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client

from boards.models import Passkey, StepUp
from boards.push import passkeys
from tests.push.test_stepup import held

ORIGIN = "http://localhost"
PASSWORD = "pw-pat-123"  # the ``person`` fixture's

UP, UV, AT = 0x01, 0x04, 0x40


def b64(raw: bytes) -> str:
    return urlsafe_b64encode(raw).rstrip(b"=").decode()


class Authenticator:
    """One passkey on a software authenticator; ``verified=False`` makes it answer like a
    key that was only touched (user present, not verified)."""

    def __init__(self, *, verified: bool = True) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = hashlib.sha256(repr(id(self)).encode() + b"x").digest()
        self.count = 0
        self.verified = verified

    @property
    def id(self) -> str:
        return b64(self.credential_id)

    def _flags(self, extra: int = 0) -> bytes:
        return bytes([UP | (UV if self.verified else 0) | extra])

    def _client_data(self, kind: str, challenge: str) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": ORIGIN, "crossOrigin": False}
        return json.dumps(data).encode()

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """``navigator.credentials.create`` for the board's creation options."""
        numbers = self.key.public_key().public_numbers()
        cose = cbor2.dumps(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )
        attested = bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
        auth_data = (
            hashlib.sha256(options["rp"]["id"].encode()).digest()
            + self._flags(AT)
            + struct.pack(">I", self.count)
            + attested
            + cose
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(self._client_data("webauthn.create", options["challenge"])),
                "attestationObject": b64(attestation),
            },
        }

    def get(self, options: dict[str, Any]) -> dict[str, Any]:
        """``navigator.credentials.get`` for the board's request options."""
        self.count += 1
        auth_data = (
            hashlib.sha256(options["rpId"].encode()).digest()
            + self._flags()
            + struct.pack(">I", self.count)
        )
        client_data = self._client_data("webauthn.get", options["challenge"])
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": self.id,
            "rawId": self.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(client_data),
                "authenticatorData": b64(auth_data),
                "signature": b64(signature),
            },
        }


@pytest.fixture(autouse=True)
def localhost(settings):
    settings.KANBAN_PUBLIC_URL = ORIGIN


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


def options(client: Client, body: Any = None) -> dict[str, Any]:
    reply = post(client, "/me/passkeys/options", body or {})
    assert reply.status_code == 200, reply.content
    return reply.json()


def add(client: Client, key: Authenticator, *, proof: Authenticator | None = None, **extra):
    """The page's add: the options, the proof's ceremony first, then the new passkey."""
    given = options(client)
    body: dict[str, Any] = {"name": "Key", **extra}
    if proof is not None:
        body["assertion"] = proof.get(given["confirm"])
    body["credential"] = key.create(given["create"])
    return post(client, "/me/passkeys/", body)


def first_passkey(client: Client) -> Authenticator:
    key = Authenticator()
    reply = add(client, key, password=PASSWORD)
    assert reply.status_code == 201, reply.content
    return key


def remove(client: Client, passkey_id: int, **fields: Any):
    return client.post("/me/", {"passkey": passkey_id, **fields})


def refused(reply, code: str = "passkey_confirm_required") -> str:
    assert reply.status_code == 403, reply.content
    if reply["Content-Type"].startswith("application/json"):
        assert reply.json()["error"]["code"] == code
        return reply.json()["error"]["message"]
    return reply.content.decode()


# -- adding ---------------------------------------------------------------------------


def test_the_first_passkey_needs_the_password_not_just_the_cookie(person_client, person):
    given = options(person_client)
    assert (given["confirm"], given["password"]) == (None, True)
    assert given["create"]["authenticatorSelection"]["userVerification"] == "required"
    message = refused(add(person_client, Authenticator()))
    assert "password" in message
    refused(add(person_client, Authenticator(), password="not-the-password"))
    assert not Passkey.objects.exists()
    first_passkey(person_client)
    assert Passkey.objects.filter(user=person).count() == 1


def test_guessing_the_password_with_the_cookie_stops_after_five_tries(person_client):
    for _ in range(passkeys.WRONG_PASSWORDS_MAX):
        refused(add(person_client, Authenticator(), password="guess"))
    message = refused(add(person_client, Authenticator(), password=PASSWORD))
    assert "log in again" in message
    assert not Passkey.objects.exists()


def test_a_second_passkey_needs_an_assertion_from_the_first(person_client, person):
    first = first_passkey(person_client)
    assert options(person_client)["password"] is False
    # The cookie and the password are not enough once there is a passkey.
    refused(add(person_client, Authenticator(), password=PASSWORD))
    # An assertion from a passkey the person does not have: refused.
    stranger = Authenticator()
    reply = add(person_client, Authenticator(), proof=stranger)
    assert reply.status_code == 400 and "not one of your passkeys" in reply.content.decode()
    assert Passkey.objects.filter(user=person).count() == 1
    assert add(person_client, Authenticator(), proof=first).status_code == 201
    assert Passkey.objects.filter(user=person).count() == 2


def test_an_assertion_is_used_once_and_only_for_the_change_it_was_made_for(
    person_client, person, board
):
    first = first_passkey(person_client)
    given = options(person_client)
    assertion = first.get(given["confirm"])
    new = Authenticator()
    body = {"assertion": assertion, "credential": new.create(given["create"])}
    assert post(person_client, "/me/passkeys/", body).status_code == 201
    # Again, the same assertion (and the same challenge): the request was used up.
    again = Authenticator()
    body = {"assertion": assertion, "credential": again.create(given["create"])}
    assert post(person_client, "/me/passkeys/", body).status_code == 400
    assert Passkey.objects.filter(user=person).count() == 2

    # One made for a step-up (another ceremony, another challenge) adds nothing.
    call = held(board, "rm -rf build")
    step = post(person_client, f"/boards/{board.slug}/step-up/options", {"item": f"call-{call.pk}"})
    step_assertion = first.get(step.json())
    given = options(person_client)
    body = {"assertion": step_assertion, "credential": Authenticator().create(given["create"])}
    assert post(person_client, "/me/passkeys/", body).status_code == 400
    # One made for a removal adds nothing either.
    made = options(person_client, {"remove": Passkey.objects.first().pk})
    removal = first.get(made["confirm"])
    given = options(person_client)
    body = {"assertion": removal, "credential": Authenticator().create(given["create"])}
    assert post(person_client, "/me/passkeys/", body).status_code == 400
    assert Passkey.objects.filter(user=person).count() == 2


def test_an_old_request_adds_nothing(person_client, person, settings):
    first = first_passkey(person_client)
    given = options(person_client)
    session = person_client.session
    state = session[passkeys.CEREMONY]
    state["at"] -= settings.KANBAN_STEP_UP_SECONDS + 1
    session[passkeys.CEREMONY] = state
    session.save()
    body = {
        "assertion": first.get(given["confirm"]),
        "credential": Authenticator().create(given["create"]),
    }
    assert "too old" in refused(post(person_client, "/me/passkeys/", body))
    assert Passkey.objects.filter(user=person).count() == 1


def test_a_passkey_that_was_only_touched_is_refused_everywhere(person_client, person, board):
    reply = add(person_client, Authenticator(verified=False), password=PASSWORD)
    assert reply.status_code == 400 and "verif" in reply.content.decode()
    assert not Passkey.objects.exists()
    first = first_passkey(person_client)
    first.verified = False
    assert add(person_client, Authenticator(), proof=first).status_code == 400
    call = held(board, "rm -rf build")
    step = post(person_client, f"/boards/{board.slug}/step-up/options", {"item": f"call-{call.pk}"})
    assert step.json()["userVerification"] == "required"
    reply = post(
        person_client, f"/boards/{board.slug}/step-up/", {"credential": first.get(step.json())}
    )
    assert reply.status_code == 400 and "verif" in reply.content.decode()
    assert not StepUp.objects.exists()
    first.verified = True
    step = post(person_client, f"/boards/{board.slug}/step-up/options", {"item": f"call-{call.pk}"})
    reply = post(
        person_client, f"/boards/{board.slug}/step-up/", {"credential": first.get(step.json())}
    )
    assert reply.status_code == 200 and StepUp.objects.count() == 1


# -- removing -------------------------------------------------------------------------


def test_removing_a_passkey_needs_an_assertion_made_for_that_removal(person_client, person):
    first = first_passkey(person_client)
    second = Authenticator()
    assert add(person_client, second, proof=first).status_code == 201
    keep, drop = (
        Passkey.objects.get(credential_id=first.id),
        Passkey.objects.get(credential_id=second.id),
    )
    # The cookie alone; the password (not the last one); an assertion for the other one.
    assert "No passkey confirmed this" in refused(remove(person_client, drop.pk))
    refused(remove(person_client, drop.pk, password=PASSWORD))
    made = options(person_client, {"remove": keep.pk})
    assertion = json.dumps(first.get(made["confirm"]))
    assert "another passkey" in refused(remove(person_client, drop.pk, assertion=assertion))
    assert Passkey.objects.filter(user=person).count() == 2

    made = options(person_client, {"remove": drop.pk})
    assertion = json.dumps(first.get(made["confirm"]))
    assert remove(person_client, drop.pk, assertion=assertion).status_code == 302
    assert list(Passkey.objects.filter(user=person)) == [keep]


def test_a_removal_assertion_is_used_once_and_lapses(person_client, person, settings):
    first = first_passkey(person_client)
    assert add(person_client, Authenticator(), proof=first).status_code == 201
    ids = list(Passkey.objects.values_list("pk", flat=True))
    made = options(person_client, {"remove": ids[0]})
    session = person_client.session
    state = session[passkeys.CEREMONY]
    state["at"] -= settings.KANBAN_STEP_UP_SECONDS + 1
    session[passkeys.CEREMONY] = state
    session.save()
    old = json.dumps(first.get(made["confirm"]))
    assert "too old" in refused(remove(person_client, ids[0], assertion=old))
    assert "No passkey request" in refused(remove(person_client, ids[0], assertion=old))
    assert Passkey.objects.count() == 2


def test_the_last_passkey_goes_with_the_password_or_its_own_assertion(person_client, person):
    first = first_passkey(person_client)
    only = Passkey.objects.get()
    refused(remove(person_client, only.pk))
    refused(remove(person_client, only.pk, password="wrong"))
    assert Passkey.objects.exists()
    assert remove(person_client, only.pk, password=PASSWORD).status_code == 302
    assert not Passkey.objects.exists()

    first = first_passkey(person_client)
    only = Passkey.objects.get()
    made = options(person_client, {"remove": only.pk})
    assert made["password"] is True
    assertion = json.dumps(first.get(made["confirm"]))
    assert remove(person_client, only.pk, assertion=assertion).status_code == 302
    assert not Passkey.objects.exists()


def test_someone_elses_passkey_cannot_be_removed_or_confirmed(person_client, django_user_model):
    other = django_user_model.objects.create_user(username="sam", password="pw-sam-123")
    theirs = Passkey.objects.create(user=other, credential_id="c-sam", public_key=b"k")
    first_passkey(person_client)
    reply = post(person_client, "/me/passkeys/options", {"remove": theirs.pk})
    assert reply.status_code == 404
    assert remove(person_client, theirs.pk, password=PASSWORD).status_code == 404
    assert Passkey.objects.filter(user=other).exists()


def test_the_person_page_renders_the_proof_fields(person_client):
    page = person_client.get("/me/").content.decode()
    assert 'id="passkey-password"' in page  # the first passkey: the password
    first_passkey(person_client)
    page = person_client.get("/me/").content.decode()
    assert 'id="passkey-password"' not in page
    assert 'name="assertion"' in page and 'id="passkey-remove-password"' in page


def test_the_admin_site_manages_no_passkeys(admin_client):
    assert admin_client.get("/admin/boards/passkey/").status_code == 404


# -- bodies that are not what a browser sends -------------------------------------------

DEEP = "[" * 200 + "]" * 200
DEEPER = "[" * 100_000 + "]" * 100_000
BODIES = ['"credential"', "[]", "[1, 2]", "7", "null", "true", DEEP, DEEPER, "{", "\xff"]
CREDENTIALS = ['"x"', '"{}"', "[]", "1", "null", DEEP, '{"id": []}', '{"id": "x", "response": 1}']


def json_doors(slug: str) -> list[str]:
    return [
        "/me/passkeys/options",
        "/me/passkeys/",
        f"/boards/{slug}/step-up/options",
        f"/boards/{slug}/step-up/",
        "/api/push/subscriptions",
    ]


def short(value: str) -> str:
    return value if len(value) < 20 else f"{value[:3]}…({len(value)} chars)"


@pytest.mark.parametrize("body", BODIES, ids=short)
def test_a_body_that_is_no_object_is_a_4xx_on_every_json_door(person_client, board, body):
    first_passkey(person_client)
    for url in [*json_doors(board.slug), "/push/act/approve/"]:
        reply = person_client.post(url, body.encode("latin-1"), content_type="application/json")
        assert 400 <= reply.status_code < 500, (url, reply.status_code)
        assert "error" in reply.json(), url


@pytest.mark.parametrize("credential", CREDENTIALS, ids=short)
def test_a_credential_that_is_no_object_is_a_400(person_client, board, credential):
    first = first_passkey(person_client)
    call = held(board, "rm -rf build")
    for field in ("credential", "assertion"):
        given = options(person_client)
        body = {
            "credential": first.create(given["create"]),
            "assertion": first.get(given["confirm"]),
        }
        raw = json.dumps(body).replace(json.dumps(body[field]), credential)
        reply = person_client.post("/me/passkeys/", raw, content_type="application/json")
        if credential == "null" and field == "assertion":  # no assertion at all
            refused(reply)
            continue
        assert reply.status_code == 400, (field, reply.content)
        assert reply.json()["error"]["details"][0]["field"] == field
    post(person_client, f"/boards/{board.slug}/step-up/options", {"item": f"call-{call.pk}"})
    reply = person_client.post(
        f"/boards/{board.slug}/step-up/",
        f'{{"credential": {credential}}}',
        content_type="application/json",
    )
    assert reply.status_code == 400, reply.content
    reply = remove(person_client, Passkey.objects.get().pk, assertion=credential)
    assert reply.status_code in (400, 403), reply.content  # 403: no removal was under way
    if not isinstance(json.loads(credential), int):
        reply = post(person_client, "/me/passkeys/options", {"remove": json.loads(credential)})
        assert reply.status_code == 400, reply.content
    assert Passkey.objects.count() == 1

"""Passkeys (WebAuthn, through py_webauthn) for step-up approvals (SPEC §14).

A person registers passkeys on their page; to approve a step-up item they make an
assertion for that item, which is kept (``stepup.step_up_record``) and lets them approve
it — anywhere — for KANBAN_STEP_UP_SECONDS. The relying party is KANBAN_PUBLIC_URL: its
host name is the passkeys' RP ID (a host name or ``localhost``; browsers refuse bare IP
addresses), its origin the only one accepted. The ceremony's challenge lives in the
person's session, one at a time, used once.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from webauthn import (
    base64url_to_bytes,
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from boards.core import permissions
from boards.core.errors import InvalidInput, NotFound, refuse
from boards.core.services import stepup
from boards.models import Board, CallState, Passkey, Reason, StepUp, Task, ToolCall
from boards.push.keys import b64url

CEREMONY = "kanban_webauthn"
PASSKEYS_MAX = 10


def relying_party() -> tuple[str, str]:
    """(RP ID, origin) from KANBAN_PUBLIC_URL."""
    parts = urlsplit(settings.KANBAN_PUBLIC_URL)
    return parts.hostname or "localhost", f"{parts.scheme}://{parts.netloc}"


def passkeys_of(user: Any) -> list[Passkey]:
    return list(Passkey.objects.filter(user=user).order_by("-created_at", "-id"))


def _descriptors(user: Any) -> list[PublicKeyCredentialDescriptor]:
    return [
        PublicKeyCredentialDescriptor(id=base64url_to_bytes(key.credential_id))
        for key in Passkey.objects.filter(user=user)
    ]


def registration_options(*, user: Any, session: Any) -> dict[str, Any]:
    """The options ``navigator.credentials.create`` takes, for a new passkey."""
    rp_id, _ = relying_party()
    options = generate_registration_options(
        rp_id=rp_id,
        rp_name="Agent Kanban",
        user_name=user.get_username(),
        user_id=str(user.pk).encode(),
        exclude_credentials=_descriptors(user),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.PREFERRED,
        ),
    )
    session[CEREMONY] = {"purpose": "register", "challenge": b64url(options.challenge)}
    return json.loads(options_to_json(options))


def _ceremony(session: Any, purpose: str) -> dict[str, Any]:
    state = session.pop(CEREMONY, None)
    if not isinstance(state, dict) or state.get("purpose") != purpose:
        raise InvalidInput("No passkey request is under way: start again", field="credential")
    return state


def passkey_register(*, user: Any, session: Any, credential: Any, name: str = "") -> Passkey:
    """Keep the passkey the browser made for the challenge this session was given."""
    state = _ceremony(session, "register")
    rp_id, origin = relying_party()
    if not isinstance(name, str) or len(name) > 100:
        raise InvalidInput("name: at most 100 characters", field="name")
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(state["challenge"]),
            expected_rp_id=rp_id,
            expected_origin=origin,
        )
    except (InvalidRegistrationResponse, ValueError, TypeError, KeyError) as exc:
        raise InvalidInput(f"credential: {exc}", field="credential") from None
    with transaction.atomic():
        if Passkey.objects.select_for_update().filter(user=user).count() >= PASSKEYS_MAX:
            raise InvalidInput(f"At most {PASSKEYS_MAX} passkeys: remove one first", field="name")
        credential_id = b64url(verified.credential_id)
        if Passkey.objects.filter(credential_id=credential_id).exists():
            raise InvalidInput("This passkey is registered already", field="credential")
        return Passkey.objects.create(
            user=user,
            credential_id=credential_id,
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            name=name.strip() or "Passkey",
        )


def passkey_remove(*, user: Any, passkey_id: int) -> None:
    deleted, _ = Passkey.objects.filter(user=user, pk=passkey_id).delete()
    if not deleted:
        raise NotFound(f"Passkey {passkey_id} not found", code="passkey_not_found")


def item_key(board: Board, item: Any) -> str:
    """The exact state of a waiting approval named as the board names it (``call-12``,
    ``task-3``): the key a step-up is made for. 404 when nothing of that name waits."""
    if isinstance(item, str) and item.startswith("call-") and item[5:].isdigit():
        call = ToolCall.objects.filter(
            board=board, pk=int(item[5:]), state=CallState.REQUESTED
        ).first()
        if call is not None:
            return stepup.call_key(call)
    if isinstance(item, str) and item.startswith("task-") and item[5:].isdigit():
        task = Task.objects.filter(board=board, number=int(item[5:]), needs=Reason.APPROVAL).first()
        if task is not None:
            return stepup.task_key(task)
    raise NotFound("Nothing of that name waits for approval", code="item_not_found")


def step_up_options(*, user: Any, session: Any, board: Board, item: Any) -> dict[str, Any]:
    """The options ``navigator.credentials.get`` takes, to confirm approving ``item``."""
    role = permissions.role_of(user, board)
    if role is None:
        raise refuse("board_not_found", slug=board.slug)
    if not permissions.may(role, "approve"):
        raise permissions.refusal(role, "approve")
    key = item_key(board, item)
    allowed = _descriptors(user)
    if not allowed:
        raise InvalidInput("You have no passkey: register one on your page", field="item")
    rp_id, _ = relying_party()
    options = generate_authentication_options(
        rp_id=rp_id,
        allow_credentials=allowed,
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    session[CEREMONY] = {
        "purpose": "step-up",
        "challenge": b64url(options.challenge),
        "board": board.pk,
        "item": key,
    }
    return json.loads(options_to_json(options))


def step_up_verify(*, user: Any, session: Any, board: Board, credential: Any) -> StepUp:
    """Check the assertion made for the challenge this session was given, and keep it
    for its item."""
    state = _ceremony(session, "step-up")
    if state.get("board") != board.pk:
        raise InvalidInput("That passkey request was for another board", field="credential")
    raw_id = credential.get("id") if isinstance(credential, dict) else None
    key = Passkey.objects.filter(user=user, credential_id=raw_id or "").first()
    if key is None:
        raise InvalidInput("credential: not one of your passkeys", field="credential")
    rp_id, origin = relying_party()
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(state["challenge"]),
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=bytes(key.public_key),
            credential_current_sign_count=key.sign_count,
        )
    except (InvalidAuthenticationResponse, ValueError, TypeError, KeyError) as exc:
        raise InvalidInput(f"credential: {exc}", field="credential") from None
    Passkey.objects.filter(pk=key.pk).update(
        sign_count=verified.new_sign_count, last_used_at=timezone.now()
    )
    return stepup.step_up_record(user=user, board=board, item_key=state["item"])

"""Passkeys (WebAuthn, through py_webauthn) for step-up approvals (SPEC §14).

A person registers passkeys on their page; to approve a step-up item they make an
assertion for that item, which is kept (``stepup.step_up_record``) and lets them approve
it — anywhere — for KANBAN_STEP_UP_SECONDS. The relying party is KANBAN_PUBLIC_URL: its
host name is the passkeys' RP ID (a host name or ``localhost``; browsers refuse bare IP
addresses), its origin the only one accepted. The ceremony's challenge lives in the
person's session, one at a time, used once. Every ceremony requires user verification
(a PIN or a fingerprint, not just a touch): a passkey stands for its person.

A session cookie alone never changes a person's passkeys: adding one needs a fresh
assertion from one they have (their password when they have none), removing one an
assertion too (the last one: their password will do). The proof is made for that one
change (its own challenge, issued with it), within KANBAN_STEP_UP_SECONDS, used once;
``passkey_register`` and ``passkey_remove`` are the only doors that change passkeys.
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
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from boards.core import permissions
from boards.core.errors import InvalidInput, NotFound, PermissionDenied, refuse
from boards.core.services import stepup
from boards.models import Board, CallState, Passkey, Reason, StepUp, Task, ToolCall
from boards.push.keys import b64url

CEREMONY = "kanban_webauthn"
PASSKEYS_MAX = 10
# Wrong passwords one session may try here before it must log in again: whoever holds only
# the cookie cannot guess the password through this page.
WRONG_PASSWORDS = "kanban_passkey_wrong_tries"
WRONG_PASSWORDS_MAX = 5
# What a malformed credential may make the library raise besides its own errors.
_MALFORMED = (WebAuthnException, ValueError, TypeError, KeyError, AttributeError, IndexError)


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


def _confirm_options(user: Any) -> tuple[dict[str, Any], str] | None:
    """Options for an assertion from one of the person's passkeys (and its challenge), to
    confirm a change to their passkeys; None when they have none."""
    allowed = _descriptors(user)
    if not allowed:
        return None
    rp_id, _ = relying_party()
    options = generate_authentication_options(
        rp_id=rp_id,
        allow_credentials=allowed,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return json.loads(options_to_json(options)), b64url(options.challenge)


def registration_options(*, user: Any, session: Any) -> dict[str, Any]:
    """What the browser needs to add a passkey: ``create`` (the options
    ``navigator.credentials.create`` takes), and the proof the add will need — ``confirm``
    (the options of an assertion from a passkey the person has; done first) or, for a
    person with none, ``password: true``."""
    rp_id, _ = relying_party()
    options = generate_registration_options(
        rp_id=rp_id,
        rp_name="Agent Kanban",
        user_name=user.get_username(),
        user_id=str(user.pk).encode(),
        exclude_credentials=_descriptors(user),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
    )
    confirm = _confirm_options(user)
    session[CEREMONY] = {
        "purpose": "register",
        "challenge": b64url(options.challenge),
        "confirm": confirm[1] if confirm else None,
        "at": timezone.now().timestamp(),
    }
    return {
        "create": json.loads(options_to_json(options)),
        "confirm": confirm[0] if confirm else None,
        "password": confirm is None,
    }


def removal_options(*, user: Any, session: Any, passkey_id: Any) -> dict[str, Any]:
    """What the browser needs to remove one of the person's passkeys: ``confirm`` (the
    options of an assertion from any of their passkeys, made for this removal) and
    ``password`` (true when it is their last one: their password will do instead)."""
    if not isinstance(passkey_id, int) or isinstance(passkey_id, bool):
        raise InvalidInput("passkey: the id of one of your passkeys", field="passkey")
    mine = Passkey.objects.filter(user=user)
    if not mine.filter(pk=passkey_id).exists():
        raise _no_passkey(passkey_id)
    confirm = _confirm_options(user)
    assert confirm is not None  # the person has this one at least
    session[CEREMONY] = {
        "purpose": "remove",
        "passkey": passkey_id,
        "challenge": confirm[1],
        "at": timezone.now().timestamp(),
    }
    return {"confirm": confirm[0], "password": mine.count() == 1}


def _ceremony(session: Any, purpose: str) -> dict[str, Any]:
    state = session.pop(CEREMONY, None)
    if not isinstance(state, dict) or state.get("purpose") != purpose:
        raise InvalidInput("No passkey request is under way: start again", field="credential")
    return state


def _fresh(state: dict[str, Any]) -> bool:
    at = state.get("at")
    age = timezone.now().timestamp() - at if isinstance(at, int | float) else None
    return age is not None and 0 <= age <= settings.KANBAN_STEP_UP_SECONDS


def _refused(why: str) -> PermissionDenied:
    """The one refusal of a passkey change made without its proof."""
    return PermissionDenied(
        f"{why}: changing your passkeys needs a passkey you have, confirmed for this change "
        "on this page (your password when you have none, or to remove your last one)",
        code="passkey_confirm_required",
    )


def _credential(credential: Any, field: str = "credential") -> dict[str, Any]:
    """The browser's ``PublicKeyCredential.toJSON()``: a JSON object (the library would
    parse a string as JSON itself)."""
    if not isinstance(credential, dict) or not isinstance(credential.get("id"), str):
        raise InvalidInput(
            f"{field}: a JSON object, the browser's PublicKeyCredential.toJSON()", field=field
        )
    return credential


def _assertion_check(*, user: Any, credential: Any, challenge: str, field: str) -> Passkey:
    """Verify an assertion from one of ``user``'s passkeys made for ``challenge``, with
    user verification; count its use. The passkey it came from."""
    credential = _credential(credential, field)
    key = Passkey.objects.filter(user=user, credential_id=credential["id"]).first()
    if key is None:
        raise InvalidInput(f"{field}: not one of your passkeys", field=field)
    rp_id, origin = relying_party()
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(challenge),
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=bytes(key.public_key),
            credential_current_sign_count=key.sign_count,
            require_user_verification=True,
        )
    except _MALFORMED as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None
    Passkey.objects.filter(pk=key.pk).update(
        sign_count=verified.new_sign_count, last_used_at=timezone.now()
    )
    return key


def _password_check(*, user: Any, session: Any, password: str) -> None:
    misses = session.get(WRONG_PASSWORDS, 0)
    if not isinstance(misses, int) or misses >= WRONG_PASSWORDS_MAX:
        raise _refused("Too many wrong passwords: log in again first")
    if not user.check_password(password):
        session[WRONG_PASSWORDS] = misses + 1
        raise _refused("That is not your password")
    session.pop(WRONG_PASSWORDS, None)


def _given(value: Any, field: str) -> bool:
    if value is None or value == "":
        return False
    if field == "password" and not isinstance(value, str):
        raise InvalidInput("password: a string", field="password")
    return True


def passkey_register(
    *,
    user: Any,
    session: Any,
    credential: Any,
    name: Any = "",
    assertion: Any = None,
    password: Any = None,
) -> Passkey:
    """Keep the passkey the browser made for the challenge this session was given, once
    the change is proven: ``assertion`` from one of the person's passkeys, made for the
    challenge issued with it, or — for a person with none yet — their ``password``.
    403 ``passkey_confirm_required`` without it (nothing kept)."""
    if not isinstance(name, str) or len(name) > 100:
        raise InvalidInput("name: at most 100 characters", field="name")
    credential = _credential(credential)
    if _given(assertion, "assertion"):
        _credential(assertion, "assertion")
    state = _ceremony(session, "register")
    if not _fresh(state):
        raise _refused("That passkey request is too old: start again")
    if Passkey.objects.filter(user=user).exists():
        if not _given(assertion, "assertion"):
            raise _refused("No passkey confirmed this")
        if not isinstance(state.get("confirm"), str):
            raise _refused("You added a passkey meanwhile: start again")
        _assertion_check(
            user=user, credential=assertion, challenge=state["confirm"], field="assertion"
        )
    elif not _given(password, "password"):
        raise _refused("Your password is needed to add your first passkey")
    else:
        _password_check(user=user, session=session, password=password)
    rp_id, origin = relying_party()
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=base64url_to_bytes(state["challenge"]),
            expected_rp_id=rp_id,
            expected_origin=origin,
            require_user_verification=True,
        )
    except _MALFORMED as exc:
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


def passkey_remove(
    *, user: Any, session: Any, passkey_id: int, assertion: Any = None, password: Any = None
) -> None:
    """Forget one of the person's passkeys, once the change is proven: ``assertion`` from
    any of their passkeys, made for this removal (``removal_options``), or — for their
    last one — their ``password``. 403 ``passkey_confirm_required`` without it."""
    if _given(assertion, "assertion"):
        _credential(assertion, "assertion")
    mine = Passkey.objects.filter(user=user)
    if not mine.filter(pk=passkey_id).exists():
        raise _no_passkey(passkey_id)
    if _given(password, "password") and not _given(assertion, "assertion"):
        if mine.count() != 1:
            raise _refused("Your password removes only your last passkey")
        _password_check(user=user, session=session, password=password)
    elif not _given(assertion, "assertion"):
        raise _refused("No passkey confirmed this")
    else:
        state = session.get(CEREMONY)
        if not isinstance(state, dict) or state.get("purpose") != "remove":
            raise _refused("No passkey request is under way for this removal")
        session.pop(CEREMONY, None)
        if state.get("passkey") != passkey_id:
            raise _refused("That confirmation was for another passkey")
        if not _fresh(state):
            raise _refused("That confirmation is too old: start again")
        _assertion_check(
            user=user, credential=assertion, challenge=state["challenge"], field="assertion"
        )
    deleted, _ = Passkey.objects.filter(user=user, pk=passkey_id).delete()
    if not deleted:
        raise _no_passkey(passkey_id)


def _no_passkey(passkey_id: Any) -> NotFound:
    return NotFound(f"Passkey {passkey_id} not found", code="passkey_not_found")


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
        user_verification=UserVerificationRequirement.REQUIRED,
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
    _assertion_check(
        user=user, credential=credential, challenge=state["challenge"], field="credential"
    )
    return stepup.step_up_record(user=user, board=board, item_key=state["item"])

"""A person's devices: the browsers' push subscriptions they turned on (SPEC §14)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from boards.core.errors import InvalidInput, NotFound
from boards.models import PushDevice, Reason
from boards.webhooks import egress

DEVICES_MAX = 20  # a person's devices; more is a script, not a person


class _Keys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    p256dh: str = Field(min_length=80, max_length=200, pattern=r"^[A-Za-z0-9_\-]+=*$")
    auth: str = Field(min_length=16, max_length=100, pattern=r"^[A-Za-z0-9_\-]+=*$")


class Subscription(BaseModel):
    """The browser's ``PushSubscription.toJSON()``, and the name the person gives it."""

    model_config = ConfigDict(extra="ignore")
    endpoint: str = Field(min_length=1, max_length=1000)
    keys: _Keys
    name: str = Field(default="", max_length=100)


def _parsed(body: Any) -> Subscription:
    try:
        return Subscription.model_validate(body)
    except ValidationError as exc:
        details = [
            {"field": ".".join(str(p) for p in e["loc"]) or "body", "message": e["msg"]}
            for e in exc.errors(include_url=False)
        ]
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details)
        raise InvalidInput(f"Push subscription: {summary}", details=details) from None


def device_subscribe(*, user: Any, body: Any) -> PushDevice:
    """Keep a browser's push subscription for ``user`` (the same endpoint again: its
    keys and name are renewed, and it becomes this person's). The endpoint is a URL from
    outside: the webhooks' egress rules hold (no private, loopback or link-local target
    unless the settings allow it), checked now and again at each push."""
    data = _parsed(body)
    endpoint = data.endpoint.strip()
    problem = egress.url_syntax_problem(endpoint)
    # Real push services speak https; plain http only where the settings open networks
    # for webhooks (a stand-in on a test machine).
    if problem is None and not endpoint.startswith("https://") and not egress.allowed_networks():
        problem = "push services are reached over https://"
    problem = problem or egress.endpoint_problem(endpoint)
    if problem:
        raise InvalidInput(f"endpoint: {problem}", field="endpoint")
    name = data.name.strip() or "This device"
    with transaction.atomic():
        mine = PushDevice.objects.select_for_update().filter(user=user)
        if mine.count() >= DEVICES_MAX and not mine.filter(endpoint=endpoint).exists():
            raise InvalidInput(
                f"At most {DEVICES_MAX} devices per person: remove one first", field="endpoint"
            )
        device, _ = PushDevice.objects.update_or_create(
            endpoint=endpoint,
            defaults={
                "user": user,
                "p256dh": data.keys.p256dh,
                "auth": data.keys.auth,
                "name": name,
            },
        )
    return device


# What a device may be told of, in the order people read them: the reasons an item waits
# (``Reason``); "approval" is both gated tasks and held tool calls.
KINDS: dict[str, str] = {
    **{reason.value: reason.label for reason in Reason},
    Reason.APPROVAL.value: "Approvals and held tool calls",
}


def device_kinds_set(*, user: Any, device_id: int, kinds: Any) -> PushDevice:
    """Choose which kinds of waiting item (``KINDS``) the person's device is pushed; none
    keeps the device but quiet. What it was told of and no longer wants is withdrawn at
    the board's next change."""
    if not isinstance(kinds, list | tuple) or not all(isinstance(k, str) for k in kinds):
        raise InvalidInput("kinds: a list of kinds of item", field="kinds")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise InvalidInput(f"kinds: {unknown[0]!r} is not a kind of item", field="kinds")
    chosen = [kind for kind in KINDS if kind in kinds]
    if not PushDevice.objects.filter(user=user, pk=device_id).update(kinds=chosen):
        raise _no_device(device_id)
    return PushDevice.objects.get(pk=device_id)


def device_remove(*, user: Any, device_id: int) -> None:
    """Forget one of the person's devices (it is told of nothing more)."""
    deleted, _ = PushDevice.objects.filter(user=user, pk=device_id).delete()
    if not deleted:
        raise _no_device(device_id)


def _no_device(device_id: int) -> NotFound:
    """The one refusal for a device that is not the person's (or no longer kept)."""
    return NotFound(f"Device {device_id} not found", code="device_not_found")


def devices_of(user: Any) -> list[PushDevice]:
    return list(PushDevice.objects.filter(user=user).order_by("-created_at", "-id"))

"""Reaching a person away from the board (SPEC §14): the installable app's manifest and
service worker (served from the origin's root, so the worker's scope is the whole board),
the push key and a device's subscription, the person's Devices and Passkeys page, and
the one-time links a notification's actions post to."""

from __future__ import annotations

import json
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from boards.core.errors import (
    BODY,
    InvalidInput,
    Unauthorized,
    refuse,
)
from boards.models import Board
from boards.push import devices, keys, links, passkeys
from boards.web.views.common import HtmxHttpRequest, refusals


class DeviceRemoveForm(forms.Form):
    device = forms.IntegerField(min_value=1, max_value=2**31 - 1)


class DeviceKindsForm(forms.Form):
    """Which kinds of waiting item one of the person's devices is pushed."""

    kinds_of = forms.IntegerField(min_value=1, max_value=2**31 - 1)
    kinds = forms.MultipleChoiceField(choices=list(devices.KINDS.items()), required=False)


class PasskeyRemoveForm(forms.Form):
    """Remove one of the person's passkeys, with its proof: ``assertion`` (the JSON of an
    assertion the page's script had made for this removal) or, for the last one,
    ``password``."""

    passkey = forms.IntegerField(min_value=1, max_value=2**31 - 1)
    assertion = forms.CharField(required=False, max_length=20_000, strip=False)
    password = forms.CharField(required=False, max_length=1000, strip=False)


@require_GET
def manifest(request: HttpRequest) -> HttpResponse:
    """The web app manifest: the board adds to a phone's home screen."""
    body = render_to_string("push/manifest.webmanifest")
    return HttpResponse(body, content_type="application/manifest+json")


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """The service worker, at ``/sw.js``: a worker's scope is the folder it is served
    from, so only the origin's root lets it receive pushes for every page."""
    body = render_to_string("push/sw.js", {"icon": static("icon-192.png")})
    response = HttpResponse(body, content_type="text/javascript; charset=utf-8")
    # A changed worker must reach browsers at their next visit, not after a cache's life.
    response["Cache-Control"] = "no-cache"
    response["Service-Worker-Allowed"] = "/"
    return response


def _json(text: str | bytes, field: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(f"{field}: not JSON", field=field) from None
    except RecursionError:  # nesting deeper than the parser goes: no client sends that
        raise InvalidInput(f"{field}: JSON nested too deep", field=field) from None


def _body(request: HttpRequest) -> Any:
    return _json(request.body or b"null", BODY)


@require_GET
def push_key(request: HttpRequest) -> JsonResponse:
    """The application server key a browser subscribes with (public by nature)."""
    return JsonResponse({"publicKey": keys.public_key()})


def _logged_in_json(view: Any) -> Any:
    """A JSON door of the person's own (CSRF-checked like every page's request); what it
    refuses is answered through the one refusal path, as JSON."""

    @require_POST
    @refusals(as_json=True)
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        if not request.user.is_authenticated:
            raise _logged_out()
        return view(request, *args, **kwargs)

    return wrapper


@_logged_in_json
def push_subscribe(request: HttpRequest) -> JsonResponse:
    """Keep this browser's PushSubscription for the person logged in (CSRF-checked like
    every page's request); 201 ``{"id"}``."""
    device = devices.device_subscribe(user=request.user, body=_body(request))
    return JsonResponse({"id": device.pk}, status=201)


@csrf_exempt
@require_POST
@refusals(as_json=True)
def push_act(request: HttpRequest, action: str) -> JsonResponse:
    """A push's Approve or Deny: the link is the credential (one-time, bound to its
    person and the item's exact state), so no session or CSRF token is asked.

    The link is ``/push/act/<action>/#t=<secret>``: the service worker posts the secret
    from the fragment as the form field ``token``; a fragment never reaches the server,
    so no access log holds it."""
    decided = links.link_act(request.POST.get("token", ""), action=action)
    return JsonResponse({"decided": decided})


def _person_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "devices": devices.devices_of(request.user),
        "kinds": list(devices.KINDS.items()),
        "passkeys": passkeys.passkeys_of(request.user),
        "public_url": settings.KANBAN_PUBLIC_URL,
    }


@login_required
@require_http_methods(["GET", "POST"])
@refusals("push/person.html", page_context=_person_context)
def person_page(request: HtmxHttpRequest) -> HttpResponse:
    """The person's own page: the devices told of what waits for them, and passkeys. A
    refused change is the page again, saying why, under the refusal's status."""
    if request.method == "POST" and "kinds_of" in request.POST:
        kindsform = DeviceKindsForm(request.POST)
        if not kindsform.is_valid():
            raise InvalidInput("Which kinds? Reload the page and try again.", field="kinds")
        device = devices.device_kinds_set(
            user=request.user,
            device_id=kindsform.cleaned_data["kinds_of"],
            kinds=kindsform.cleaned_data["kinds"],
        )
        messages.success(request, f"Saved what {device.name} is told of.")
        return redirect("person")
    if request.method == "POST" and "passkey" in request.POST:
        keyform = PasskeyRemoveForm(request.POST)
        if not keyform.is_valid():
            raise InvalidInput("Which passkey? Reload the page and try again.", field="passkey")
        mine = keyform.cleaned_data
        passkeys.passkey_remove(
            user=request.user,
            session=request.session,
            passkey_id=mine["passkey"],
            assertion=_json(mine["assertion"], "assertion") if mine["assertion"] else None,
            password=mine["password"] or None,
        )
        messages.success(request, "Passkey removed.")
        return redirect("person")
    if request.method == "POST":
        form = DeviceRemoveForm(request.POST)
        if not form.is_valid():
            raise InvalidInput("Which device? Reload the page and try again.", field="device")
        devices.device_remove(user=request.user, device_id=form.cleaned_data["device"])
        messages.success(request, "Device removed: it gets no more pushes.")
        return redirect("person")
    return render(request, "push/person.html", _person_context(request))


def _object(request: HttpRequest) -> dict[str, Any]:
    body = _body(request)
    if not isinstance(body, dict):
        raise InvalidInput("The body is a JSON object", field=BODY)
    return body


@_logged_in_json
def passkey_options(request: HttpRequest) -> JsonResponse:
    """What a change to this person's passkeys needs: ``{}`` → adding one (``create``, and
    its proof: ``confirm`` or ``password``); ``{"remove": <id>}`` → removing that one
    (``confirm``, and ``password`` when it is the last)."""
    body = _object(request) if request.body else {}
    if "remove" in body:
        options = passkeys.removal_options(
            user=request.user, session=request.session, passkey_id=body["remove"]
        )
    else:
        options = passkeys.registration_options(user=request.user, session=request.session)
    return JsonResponse(options)


@_logged_in_json
def passkey_add(request: HttpRequest) -> JsonResponse:
    """Keep the passkey the browser made, with its proof (``assertion``: from a passkey
    the person has, made first; ``password``: for their first); 201 ``{"id"}``."""
    body = _object(request)
    key = passkeys.passkey_register(
        user=request.user,
        session=request.session,
        credential=body.get("credential"),
        name=body.get("name") or "",
        assertion=body.get("assertion"),
        password=body.get("password"),
    )
    return JsonResponse({"id": key.pk}, status=201)


def _logged_out() -> Unauthorized:
    """The one refusal of the person's JSON doors when nobody is logged in."""
    return Unauthorized("Log in first", code="unauthorized")


def _board(slug: str) -> Board:
    board = Board.objects.filter(slug=slug).first()
    if board is None:
        raise refuse("board_not_found", slug=slug[:64])
    return board


@_logged_in_json
def step_up_options(request: HttpRequest, slug: str) -> JsonResponse:
    """Options for ``navigator.credentials.get``: confirming one item with a passkey."""
    board = _board(slug)
    item = _object(request).get("item")
    options = passkeys.step_up_options(
        user=request.user, session=request.session, board=board, item=item
    )
    return JsonResponse(options)


@_logged_in_json
def step_up_verify(request: HttpRequest, slug: str) -> JsonResponse:
    """Check the assertion; the person may then approve that item for a few minutes."""
    board = _board(slug)
    made = passkeys.step_up_verify(
        user=request.user,
        session=request.session,
        board=board,
        credential=_object(request).get("credential"),
    )
    return JsonResponse({"item": made.item})

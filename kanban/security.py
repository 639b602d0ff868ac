"""What a deployment needs beyond Django's defaults: a Content-Security-Policy on every
page, and a login that slows down a password guesser (``ThrottledLoginView``).

The middleware is sync-and-async capable: one sync-only middleware would make
Django run every request in a worker thread (see kanban.asgi).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
import unicodedata
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware


def _with_policy(response: HttpResponse) -> HttpResponse:
    policy = settings.KANBAN_CONTENT_SECURITY_POLICY
    if policy and "Content-Security-Policy" not in response:
        response["Content-Security-Policy"] = policy
    return response


@sync_and_async_middleware
def content_security_policy(get_response: Callable[[HttpRequest], Any]) -> Callable:
    """Pages load scripts, styles and sockets from this origin only (no inline script)."""
    if iscoroutinefunction(get_response):

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            response: HttpResponse = await get_response(request)
            return _with_policy(response)

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponse:
        return _with_policy(get_response(request))

    return middleware


# Django's login form takes usernames up to this long and does not normalise longer ones
# (normalising is slow on long input); such a name cannot log in.
USERNAME_MAX = 150


def login_name(raw: object) -> str:
    """The username as the throttle counts it: what Django's login form makes of it
    (whitespace stripped, NFKC) and casefolded, so every spelling that can log in as one
    account ("pat ", "ｐａｔ", "Pat") shares that account's count."""
    name = str(raw or "").strip()
    if len(name) > USERNAME_MAX:
        return name
    return unicodedata.normalize("NFKC", name).casefold().strip()


def client_address(request: HttpRequest) -> str:
    """The address a request came from: ``REMOTE_ADDR``, or, behind proxies, the entry of
    ``KANBAN_TRUSTED_PROXY_HEADER`` that the outermost trusted proxy wrote.

    Each proxy appends the address it was reached from, so with ``n`` trusted hops the
    client is the ``n``-th entry from the right; anything left of it the client could have
    sent itself. A request with fewer entries did not come through the proxies: its peer
    is the client.
    """
    address = request.META.get("REMOTE_ADDR", "") or ""
    header = settings.KANBAN_TRUSTED_PROXY_HEADER
    if header:
        meta_key = "HTTP_" + header.upper().replace("-", "_")
        entries = [e.strip() for e in request.META.get(meta_key, "").split(",") if e.strip()]
        hops = settings.KANBAN_TRUSTED_PROXY_HOPS
        if hops >= 1 and len(entries) >= hops:
            address = entries[-hops]
    return address or "?"


def _address_of(address: str) -> str:
    """One count per IPv4 address and per IPv6 /64 (one host's whole share of addresses)."""
    text = address.strip()
    if text.startswith("["):  # [v6]:port
        text = text[1:].split("]")[0]
    elif text.count(":") == 1:  # v4:port, as some proxies write it
        text = text.split(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _digest(value: str) -> str:
    # Cache keys stay short and printable whatever was posted.
    return hashlib.sha256(value.encode(errors="replace")).hexdigest()[:32]


def _user_key(request: HttpRequest) -> str:
    return "kanban:login-fail:user:" + _digest(login_name(request.POST.get("username")))


def _address_key(request: HttpRequest) -> str:
    return "kanban:login-fail:ip:" + _digest(_address_of(client_address(request)))


def _now() -> float:
    return time.time()


def _count(key: str, window: int) -> int:
    cache.add(key, 0, window)
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between add and incr
        cache.set(key, 1, window)
        return 1


class ThrottledLoginView(auth_views.LoginView):
    """Django's login, throttled two ways within the window:

    - a username (as normalised by ``login_name``) is locked after
      ``KANBAN_LOGIN_FAILURES`` attempts that did not log in: 429, even for the right
      password, until the window ends; a success clears its count;
    - an address (``client_address``) is slowed, never locked: after
      ``KANBAN_LOGIN_ADDRESS_FAILURES`` failures it is allowed one attempt every
      ``KANBAN_LOGIN_ADDRESS_DELAY_SECONDS`` (429 with the seconds left otherwise). Many
      people can share one address (an office, a proxy not configured as trusted): a
      guesser there cannot lock them all out, and it guesses no faster than the delay.

    Both take their turn before the password is checked, with atomic cache operations
    (``incr``, ``add``): guesses sent at once cannot slip past a count in between.
    """

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = self._address_turn(request)
        if wait:
            unit = "second" if wait == 1 else "seconds"
            return self._refuse(
                f"Too many failed logins from your network: try again in {wait} {unit}.", wait
            )
        window = settings.KANBAN_LOGIN_WINDOW_SECONDS
        # Counted before the password is checked (a success clears it): concurrent guesses
        # each take a number, and only the first KANBAN_LOGIN_FAILURES are checked.
        if _count(_user_key(request), window) > settings.KANBAN_LOGIN_FAILURES:
            minutes = max(1, window // 60)
            return self._refuse(
                f"Too many failed logins for this username: try again in {minutes} minutes.",
                window,
            )
        return super().post(request, *args, **kwargs)

    @staticmethod
    def _address_turn(request: HttpRequest) -> int:
        """0 when the address may try now; else the seconds until it may.

        A slowed address gets one attempt per slot of the delay's length: the first
        request in a slot claims it (``cache.add``), the others wait for the next one.
        """
        delay = settings.KANBAN_LOGIN_ADDRESS_DELAY_SECONDS
        key = _address_key(request)
        if delay <= 0 or (cache.get(key) or 0) < settings.KANBAN_LOGIN_ADDRESS_FAILURES:
            return 0
        now = _now()
        slot = int(now // delay)
        if cache.add(f"{key}:slot:{slot}", 1, delay * 2):
            return 0
        return max(1, math.ceil((slot + 1) * delay - now))

    def _refuse(self, message: str, retry_after: int) -> HttpResponse:
        context = self.get_context_data(form=self.get_form(), throttled=message)
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(retry_after)
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        _count(_address_key(self.request), settings.KANBAN_LOGIN_WINDOW_SECONDS)
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        cache.delete(_user_key(self.request))
        return super().form_valid(form)

"""What a deployment needs beyond Django's defaults: a Content-Security-Policy on every
page, and a login that slows down a password guesser.

The middleware is sync-and-async capable: one sync-only middleware would make
Django run every request in a worker thread (see kanban.asgi).
"""

from __future__ import annotations

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


def _client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "") or "?"


def _failure_keys(request: HttpRequest) -> list[str]:
    username = str(request.POST.get("username", ""))[:150].lower()
    return [f"kanban:login-fail:user:{username}", f"kanban:login-fail:ip:{_client_ip(request)}"]


class ThrottledLoginView(auth_views.LoginView):
    """Django's login, refusing (429) after too many failures for one username or one
    address within the window; a success clears that username's count."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = settings.KANBAN_LOGIN_FAILURES
        if any((cache.get(key) or 0) >= limit for key in _failure_keys(request)):
            minutes = max(1, settings.KANBAN_LOGIN_WINDOW_SECONDS // 60)
            form = self.get_form()
            context = self.get_context_data(
                form=form,
                throttled=f"Too many failed logins: try again in {minutes} minutes.",
            )
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(settings.KANBAN_LOGIN_WINDOW_SECONDS)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        window = settings.KANBAN_LOGIN_WINDOW_SECONDS
        for key in _failure_keys(self.request):
            cache.add(key, 0, window)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, window)
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        cache.delete(_failure_keys(self.request)[0])
        return super().form_valid(form)

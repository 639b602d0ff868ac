"""A deployment's settings: what the README's Production section promises, checked.

Settings are read once per process, so each configuration is tried in a fresh
``manage.py`` process with its environment, the way an operator starts one.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.core.cache import cache
from django.test import Client

from devtools.liveserver import ROOT


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "ALLOWED_HOSTS")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "kanban.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# slow: a fresh manage.py process (Django set up again, ~1.5 s of CPU)
@pytest.mark.slow
def test_the_deploy_check_is_clean_with_the_production_settings():
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="kanban.example.com",
        HTTPS="1",
        TRUST_X_FORWARDED_PROTO="1",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_built_in_secret_key_is_refused_for_a_public_host():
    result = manage("check", ALLOWED_HOSTS="kanban.example.com")
    assert result.returncode != 0
    assert "set SECRET_KEY" in result.stderr


# slow: a fresh manage.py process (Django set up again, ~1.5 s of CPU)
@pytest.mark.slow
def test_the_built_in_secret_key_still_serves_this_machine():
    assert manage("check").returncode == 0


# slow: a fresh manage.py process (Django set up again, ~1.5 s of CPU)
@pytest.mark.slow
def test_https_settings_make_cookies_secure_and_send_hsts():
    code = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
        "s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER)"
    )
    result = manage(
        "shell",
        "-c",
        code,
        SECRET_KEY=secrets.token_urlsafe(50),
        HTTPS="1",
        TRUST_X_FORWARDED_PROTO="1",
    )
    assert result.stdout.splitlines()[-1].split() == [
        "True",
        "True",
        "31536000",
        "True",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
    ]


def test_every_page_carries_a_content_security_policy_without_inline_script(client):
    response = client.get("/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self';" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.fixture
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def test_logins_are_throttled_after_repeated_failures(db, django_user_model, settings, fresh_cache):
    settings.KANBAN_LOGIN_FAILURES = 3
    django_user_model.objects.create_user("pat", password="right-horse-battery")
    client = Client()
    for _ in range(3):
        wrong = client.post("/login/", {"username": "pat", "password": "guess"})
        assert wrong.status_code == 200
        assert "didn't match" in wrong.content.decode()
    throttled = client.post("/login/", {"username": "pat", "password": "right-horse-battery"})
    assert throttled.status_code == 429
    assert "Too many failed logins" in throttled.content.decode()
    assert int(throttled["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session  # even the right password waits
    # The admin's login form is the same door.
    admin = Client().post("/admin/login/", {"username": "pat", "password": "guess"})
    assert admin.status_code == 429


def test_a_successful_login_clears_the_usernames_failures(
    db, django_user_model, settings, fresh_cache
):
    settings.KANBAN_LOGIN_FAILURES = 3
    django_user_model.objects.create_user("pat", password="right-horse-battery")
    client = Client()
    for _ in range(2):
        client.post("/login/", {"username": "pat", "password": "guess"}, REMOTE_ADDR="10.0.0.1")
    ok = client.post(
        "/login/", {"username": "pat", "password": "right-horse-battery"}, REMOTE_ADDR="10.0.0.2"
    )
    assert ok.status_code == 302
    again = Client().post(
        "/login/", {"username": "pat", "password": "guess"}, REMOTE_ADDR="10.0.0.3"
    )
    assert again.status_code == 200  # counting starts over for pat


def test_weak_passwords_are_refused_by_the_validators(db):
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        validate_password("12345678")
    validate_password("right-horse-battery-staple")


def test_a_server_holds_one_idle_sqlite_connection_and_never_creates_the_file(
    db, monkeypatch, tmp_path
):
    """Held open, it keeps each request's closing from checkpointing the log (boards.core.storage)."""
    from django.db import connection

    from boards.core import storage

    monkeypatch.setattr(storage, "_held", None)
    if connection.vendor != "sqlite":
        assert storage.hold_sqlite_open() is False
        return
    missing = tmp_path / "not-migrated.sqlite3"
    monkeypatch.setitem(connection.settings_dict, "NAME", str(missing))
    assert storage.hold_sqlite_open() is False
    assert not missing.exists()

    monkeypatch.undo()
    monkeypatch.setattr(storage, "_held", None)
    connection.ensure_connection()
    assert storage.hold_sqlite_open() is True
    held = storage._held
    assert held is not None and not held.in_transaction
    assert storage.hold_sqlite_open() is True and storage._held is held  # one per process
    held.close()
    monkeypatch.setattr(storage, "_held", None)

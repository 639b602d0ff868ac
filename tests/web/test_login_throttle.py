"""The login throttle (kanban.security): one hard count per account however its name is
spelled, and addresses, as the trusted proxies report them, slowed but never locked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.cache import cache
from django.db import connections
from django.test import Client, RequestFactory

from kanban import security

PASSWORD = "right-horse-battery"
WRONG = "guess"
PROXY = "10.0.0.2"  # the reverse proxy every request comes through


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def pat(db, django_user_model):
    return django_user_model.objects.create_user("pat", password=PASSWORD)


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """The throttle's clock, moved by hand: waiting out a delay takes no time, and no
    test crosses into another slot of a slowed address unless it says so."""

    class Clock:
        now = 3_000_000.0  # the start of a slot of 5, 30 or 60 seconds

        def advance(self, seconds: float) -> None:
            self.now += seconds

    fake = Clock()
    monkeypatch.setattr(security, "_now", lambda: fake.now)
    return fake


def login(username: str, password: str = WRONG, *, address: str = PROXY, **headers: str):
    return Client().post(
        "/login/", {"username": username, "password": password}, REMOTE_ADDR=address, **headers
    )


# --- one account, one count -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("posted", "counted"),
    [
        ("pat", "pat"),
        ("pat ", "pat"),
        ("\tpat", "pat"),
        ("Pat", "pat"),
        ("ｐａｔ", "pat"),  # fullwidth letters: NFKC makes them ASCII
        ("\u3000pat\u3000", "pat"),  # ideographic spaces
        ("ﬁle", "file"),  # a ligature
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),  # casefold, not lower
    ],
)
def test_login_name_is_normalised_as_django_reads_it_and_casefolded(posted, counted):
    assert security.login_name(posted) == counted


def test_spellings_that_log_in_as_one_account_share_its_count(pat, settings):
    settings.KANBAN_LOGIN_FAILURES = 4
    # Each of these reaches pat's account: Django strips and NFKC-normalises the name.
    assert login("ｐａｔ ", PASSWORD).status_code == 302
    cache.clear()
    for variant in ["pat ", " pat", "ｐａｔ", "PAT"]:
        assert login(variant).status_code == 200
    for variant in ["pat", "pat ", "ｐａｔ"]:
        refused = login(variant, PASSWORD)
        assert refused.status_code == 429
        assert "Too many failed logins for this username" in refused.content.decode()
        assert int(refused["Retry-After"]) == settings.KANBAN_LOGIN_WINDOW_SECONDS


def test_a_username_stays_locked_whichever_address_guesses(pat, settings):
    settings.KANBAN_LOGIN_FAILURES = 3
    for n in range(3):
        assert login("pat", address=f"198.51.100.{n}").status_code == 200
    assert login("pat", PASSWORD, address="203.0.113.9").status_code == 429


def test_guesses_sent_at_once_get_no_more_checks_than_the_limit(pat, settings):
    settings.KANBAN_LOGIN_FAILURES = 3

    def guess(n: int) -> int:
        try:
            return login("pat", f"guess-{n}", address=f"198.51.100.{n}").status_code
        finally:
            connections.close_all()  # this thread's own

    with ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(guess, range(16)))
    assert statuses == [200] * 3 + [429] * 13


def test_a_success_clears_the_count_of_every_spelling(pat, settings):
    settings.KANBAN_LOGIN_FAILURES = 3
    login("PAT ")
    login("ｐａｔ")
    assert login("pat", PASSWORD).status_code == 302
    for _ in range(2):
        assert login("Pat").status_code == 200  # counting starts over


# --- addresses are slowed, never locked -----------------------------------------------------


def test_made_up_names_through_one_proxy_do_not_lock_out_the_real_user(pat, settings):
    settings.KANBAN_LOGIN_FAILURES = 10
    for n in range(25):
        assert login(f"nobody-{n}").status_code == 200
    assert login("pat", PASSWORD).status_code == 302


def test_an_address_past_its_failures_gets_one_attempt_per_delay(pat, settings, clock):
    settings.KANBAN_LOGIN_ADDRESS_FAILURES = 3
    settings.KANBAN_LOGIN_ADDRESS_DELAY_SECONDS = 30
    for n in range(3):
        assert login(f"nobody-{n}").status_code == 200
    assert login("nobody-3").status_code == 200  # this delay's one attempt

    slowed = login("pat", PASSWORD)
    assert slowed.status_code == 429
    assert slowed["Retry-After"] == "30"
    assert "Too many failed logins from your network: try again in 30 seconds" in (
        slowed.content.decode()
    )
    assert login("pat", PASSWORD, address="203.0.113.9").status_code == 302  # elsewhere: fine

    clock.advance(29.5)
    assert login("pat", PASSWORD)["Retry-After"] == "1"
    clock.advance(0.5)
    assert login("nobody-4").status_code == 200  # the next delay's attempt
    assert login("pat", PASSWORD)["Retry-After"] == "30"
    clock.advance(30)
    assert login("pat", PASSWORD).status_code == 302


def test_a_slowed_address_does_not_count_against_the_usernames_it_tries(pat, settings, clock):
    settings.KANBAN_LOGIN_FAILURES = 3
    settings.KANBAN_LOGIN_ADDRESS_FAILURES = 1
    settings.KANBAN_LOGIN_ADDRESS_DELAY_SECONDS = 60
    for _ in range(2):
        assert login("pat").status_code == 200
    for _ in range(5):
        assert login("pat").status_code == 429  # refused before the password is checked
    clock.advance(60)
    assert login("pat", PASSWORD).status_code == 302  # pat's third attempt


def test_addresses_of_one_ipv6_64_share_a_count(pat, settings):
    settings.KANBAN_LOGIN_ADDRESS_FAILURES = 2
    login("nobody-1", address="2001:db8:1:2::1")
    login("nobody-2", address="2001:db8:1:2:ffff::9")
    login("nobody-3", address="2001:db8:1:2::2")
    assert login("pat", PASSWORD, address="2001:db8:1:2::77").status_code == 429
    assert login("pat", PASSWORD, address="2001:db8:1:3::1").status_code == 302


# --- the client's address behind trusted proxies --------------------------------------------


def address_of(remote: str, forwarded: str | None = None) -> str:
    headers = {} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded}
    return security.client_address(RequestFactory().get("/", REMOTE_ADDR=remote, **headers))


def test_without_a_trusted_header_the_peer_is_the_client_whatever_it_sends():
    assert address_of(PROXY, "203.0.113.5") == PROXY


@pytest.mark.parametrize(
    ("hops", "forwarded", "client"),
    [
        (1, "203.0.113.5", "203.0.113.5"),
        (1, "6.6.6.6, 203.0.113.5", "203.0.113.5"),  # the client wrote the first entry
        (2, "6.6.6.6, 203.0.113.5, 10.0.0.1", "203.0.113.5"),
        (2, "203.0.113.5", PROXY),  # not through both proxies: its peer is the client
        (1, "", PROXY),
    ],
)
def test_the_client_is_the_entry_the_outermost_trusted_proxy_wrote(
    settings, hops, forwarded, client
):
    settings.KANBAN_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
    settings.KANBAN_TRUSTED_PROXY_HOPS = hops
    assert address_of(PROXY, forwarded) == client


def test_behind_a_trusted_proxy_each_client_is_slowed_on_its_own(pat, settings):
    settings.KANBAN_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
    settings.KANBAN_LOGIN_ADDRESS_FAILURES = 2
    guesser = {"HTTP_X_FORWARDED_FOR": "203.0.113.5"}
    for n in range(3):
        assert login(f"nobody-{n}", **guesser).status_code == 200
    assert login("nobody", **guesser).status_code == 429
    # A made-up first entry does not escape: the proxy's own entry is the last one.
    spoofed = {"HTTP_X_FORWARDED_FOR": "192.0.2.1, 203.0.113.5"}
    assert login("nobody", **spoofed).status_code == 429
    neighbour = {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    assert login("pat", PASSWORD, **neighbour).status_code == 302

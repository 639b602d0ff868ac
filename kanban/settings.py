"""Agent Kanban settings: one module, every value from the environment.

Nothing set means SQLite and Channels' in-memory layer. ``DATABASE_URL``
(``postgres://…``) and ``REDIS_URL`` switch to PostgreSQL and the Redis channel layer
for more than one server process.

Where the SQLite file goes: in a checkout (``manage.py`` beside the packages) beside
``manage.py``, as it always did; installed from the wheel, in the user's data directory
(``~/.local/share/agent-kanban``, or under ``XDG_DATA_HOME``), together with the secret
key generated for a board that serves this machine only. ``KANBAN_DATA_DIR`` names
another folder in either case.
"""

import ipaddress
import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
# Installed from the wheel, the packages sit in site-packages with nothing beside them.
FROM_CHECKOUT = (BASE_DIR / "manage.py").is_file()
# How the user runs a management command, for the hints commands print.
KANBAN_COMMAND = "python manage.py" if FROM_CHECKOUT else "agent-kanban"
# templates/ and static/ are top-level folders of the checkout; the wheel carries them
# inside the kanban package (setup.py).
ASSETS_DIR = BASE_DIR if FROM_CHECKOUT else Path(__file__).resolve().parent


def data_directory() -> Path:
    """The folder of the SQLite file and of a generated secret key (created on first use)."""
    if os.environ.get("KANBAN_DATA_DIR"):
        return Path(os.environ["KANBAN_DATA_DIR"]).expanduser().resolve()
    if FROM_CHECKOUT:
        return BASE_DIR
    from platformdirs import user_data_path

    return user_data_path("agent-kanban", appauthor=False)


KANBAN_DATA_DIR = data_directory()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def database_from_url(url: str) -> dict:
    """Turn ``sqlite:///rel.db``, ``sqlite:////abs.db`` or ``postgres://…`` into a DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        # sqlite:////abs/path.db has path "//abs/path.db"; sqlite:///rel.db has "/rel.db".
        raw = parts.path[1:] if parts.path.startswith("/") else parts.path
        path = Path(unquote(raw)) if raw else KANBAN_DATA_DIR / "db.sqlite3"
        if not path.is_absolute():
            path = KANBAN_DATA_DIR / path
        return sqlite_database(path)
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        options: dict = dict(parse_qsl(parts.query))
        if env_bool("DATABASE_POOL", True):
            # A connection pool instead of persistent connections: under ASGI requests run in
            # many threads, and opening a connection per request costs more than the query.
            options["pool"] = {
                "min_size": 2,
                "max_size": int(os.environ.get("DATABASE_POOL_SIZE", "20")),
            }
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")) or "postgres",
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # Under ASGI each request may run in another thread: Django advises against
            # persistent connections there (they pile up per thread).
            "CONN_MAX_AGE": int(os.environ.get("CONN_MAX_AGE", "0")),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
            "TEST": {"NAME": os.environ.get("TEST_DATABASE_NAME", "test_kanban")},
        }
    raise ValueError(f"DATABASE_URL scheme {parts.scheme!r} is not supported (sqlite or postgres)")


def sqlite_database(path: Path) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": {
            # Writers take the lock at BEGIN and queue behind the busy timeout instead of
            # failing with "database is locked" when they upgrade a read lock mid-transaction.
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
            ),
        },
        # Threads and forked servers in the tests need a file, never ":memory:".
        # One file per test process, so parallel runs never share a test database.
        "TEST": {
            "NAME": os.environ.get("TEST_DATABASE_NAME")
            or str(Path(tempfile.gettempdir()) / f"agent-kanban-test-{os.getpid()}.sqlite3")
        },
    }


def generated_secret_key(folder: Path) -> str:
    """The key kept in ``folder/secret_key`` (readable by its owner alone), made on first use."""
    path = folder / "secret_key"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Made by an earlier start, or by a process starting beside this one.
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key


DEV_SECRET_KEY = "insecure-dev-key-set-SECRET_KEY-in-production"  # noqa: S105 - refused below
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "testserver"}
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
if os.environ.get("SECRET_KEY"):
    SECRET_KEY = os.environ["SECRET_KEY"]
elif FROM_CHECKOUT and not os.environ.get("KANBAN_DATA_DIR"):
    SECRET_KEY = DEV_SECRET_KEY
elif set(ALLOWED_HOSTS) <= LOOPBACK_HOSTS:
    # An installed board on this machine alone starts with no configuration; one that
    # serves other machines is a deployment, which names its key (refused below).
    SECRET_KEY = generated_secret_key(KANBAN_DATA_DIR)
else:
    SECRET_KEY = DEV_SECRET_KEY
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")
if SECRET_KEY == DEV_SECRET_KEY and not set(ALLOWED_HOSTS) <= LOOPBACK_HOSTS:
    # Sessions and CSRF tokens signed with a key everyone can read are forgeable.
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "ALLOWED_HOSTS serves more than this machine: set SECRET_KEY "
        '(python -c "import secrets; print(secrets.token_urlsafe(50))")'
    )

# Deployment behind TLS (README: Production). HTTPS=1 makes cookies secure, sends HSTS
# and redirects plain HTTP; TRUST_X_FORWARDED_PROTO=1 when a proxy terminates TLS.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE_SSL_REDIRECT = HTTPS and env_bool("SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # the load balancer's probe speaks plain HTTP
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000")) if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Scripts only from this origin and never inline; sockets and fetches to it alone.
KANBAN_CONTENT_SECURITY_POLICY = os.environ.get(
    "CONTENT_SECURITY_POLICY",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'self'; form-action 'self'; object-src 'none'",
)
# The login throttle (kanban.security): failed logins allowed per username in the window,
# then 429 until it ends; per address, failures after which each attempt waits the delay.
KANBAN_LOGIN_FAILURES = int(os.environ.get("KANBAN_LOGIN_FAILURES", "10"))
KANBAN_LOGIN_WINDOW_SECONDS = int(os.environ.get("KANBAN_LOGIN_WINDOW_SECONDS", "900"))
KANBAN_LOGIN_ADDRESS_FAILURES = int(os.environ.get("KANBAN_LOGIN_ADDRESS_FAILURES", "100"))
KANBAN_LOGIN_ADDRESS_DELAY_SECONDS = int(os.environ.get("KANBAN_LOGIN_ADDRESS_DELAY_SECONDS", "5"))
# Behind reverse proxies every request comes from a proxy's address: name the header
# the proxies write the client's address into (e.g. X-Forwarded-For) and how many of
# them append to it. Unset, the peer's address (REMOTE_ADDR) is the client's.
KANBAN_TRUSTED_PROXY_HEADER = os.environ.get("KANBAN_TRUSTED_PROXY_HEADER", "").strip()
KANBAN_TRUSTED_PROXY_HOPS = int(os.environ.get("KANBAN_TRUSTED_PROXY_HOPS", "1"))
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "template_partials",
    "django_htmx",
    "channels",
    "django_tasks",
    "django_tasks_db",
    "boards",
    # Developer tools: bench, demo, makehistory (no product module imports them).
    "devtools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "kanban.security.content_security_policy",
    "kanban.edge.StoreBusyMiddleware",
]

ROOT_URLCONF = "kanban.urls"
ASGI_APPLICATION = "kanban.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [ASSETS_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "boards.web.context.inbox_count",
                "boards.web.context.has_passkey",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else sqlite_database(KANBAN_DATA_DIR / "db.sqlite3")
}

REDIS_URL = os.environ.get("REDIS_URL", "")
# The cache holds login-failure counts: shared by every server process on Redis.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        # Longer than the layer's 5 s blocking pop, or every idle socket is
                        # cut when the read times out first; quick to fail when Redis is down.
                        "socket_timeout": 15,
                        "socket_connect_timeout": 2,
                    }
                ],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1000, "expiry": 30},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = KANBAN_DATA_DIR / "staticfiles"
STATICFILES_DIRS = [ASSETS_DIR / "static"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "board-list"
LOGOUT_REDIRECT_URL = "login"

# Tool API: the largest request body accepted (413 beyond), and how long TaskWatch may wait.
KANBAN_MAX_BODY_BYTES = int(os.environ.get("KANBAN_MAX_BODY_BYTES", str(256 * 1024)))
# A hook event carries the agent's own tool input (a Write's whole file): larger than any
# tool call an agent makes to the board, and refused for its size only past this.
KANBAN_HOOK_MAX_BODY_BYTES = int(os.environ.get("KANBAN_HOOK_MAX_BODY_BYTES", str(4 * 1024 * 1024)))
KANBAN_WATCH_MAX_SECONDS = 300
# An MCP TaskWatch whose client asked for progress (a progressToken, a streamed answer) is
# sent a progress notification this often, so clients that reset their request timeout on
# progress wait out a watch longer than that timeout.
KANBAN_MCP_PROGRESS_SECONDS = float(os.environ.get("KANBAN_MCP_PROGRESS_SECONDS", "10"))
# Render and send a write's push in a background thread, so its answer does not wait
# for the HTML (browsers that miss a push catch up from the event log).
KANBAN_PUSH_IN_BACKGROUND = env_bool("KANBAN_PUSH_IN_BACKGROUND", True)
# The longest a committed write's answer waits on its broadcast (an unresponsive Redis).
KANBAN_BROADCAST_TIMEOUT_SECONDS = float(os.environ.get("KANBAN_BROADCAST_TIMEOUT_SECONDS", "0.5"))
# A claim's lease when neither the call nor the board sets one: any tool call by the owner
# renews it; when it lapses the task goes back to pending (boards.core.services.leases).
KANBAN_LEASE_SECONDS = int(os.environ.get("KANBAN_LEASE_SECONDS", "900"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # Refused tool calls (4xx) are answers, not server trouble.
    "loggers": {"django.request": {"level": "ERROR"}},
}
# Distinct agent names one team token may put on a board's roster (X-Agent); 429 beyond.
KANBAN_TEAM_AGENT_LIMIT = int(os.environ.get("KANBAN_TEAM_AGENT_LIMIT", "200"))
# TaskWatch calls one token may have waiting at once, per server process; 429 beyond.
KANBAN_WATCHES_PER_TOKEN = int(os.environ.get("KANBAN_WATCHES_PER_TOKEN", "50"))
# Client sessions (hooks, SPEC §11): tool calls kept per session, and at most one roster
# push a board per this many seconds however busy its sessions are.
KANBAN_SESSION_CALLS = int(os.environ.get("KANBAN_SESSION_CALLS", "20"))
# Open client sessions one agent may have on a board (a team token's sessions are each an
# agent of their own, named from the session: the token's cap is its agents').
KANBAN_SESSIONS_PER_AGENT = int(os.environ.get("KANBAN_SESSIONS_PER_AGENT", "50"))
KANBAN_SESSION_PUSH_SECONDS = float(os.environ.get("KANBAN_SESSION_PUSH_SECONDS", "1.0"))
# Runners (SPEC §16, boards.runs): how long a runner's poll is held waiting for a command
# (a runner unseen for two of these is offline), and how long a queued command may wait
# for its runner before it is refused as stale.
KANBAN_RUNNER_POLL_SECONDS = float(os.environ.get("KANBAN_RUNNER_POLL_SECONDS", "25"))
KANBAN_RUNNER_COMMAND_TTL_SECONDS = float(
    os.environ.get("KANBAN_RUNNER_COMMAND_TTL_SECONDS", "120")
)

# -- outbound webhooks (boards.webhooks.subscriptions, boards.webhooks.delivery) ----------------------------
# Deliveries run as tasks of Django's tasks framework (the django-tasks backport) on its
# database backend: `manage.py up` (and any daphne serving kanban.asgi) runs workers in the
# server process unless KANBAN_WORKER=0; a scale-out deployment runs
# `python manage.py db_worker --queue-name webhooks` instead.
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default", "webhooks"],
    }
}
# Background work of each server process (boards.boot, started by kanban.asgi): the sweeper
# (lapsed leases, quiet agents, lost webhook wake-ups) and the webhook workers.
KANBAN_SWEEPER = env_bool("KANBAN_SWEEPER", True)
KANBAN_WORKER = env_bool("KANBAN_WORKER", True)
KANBAN_WORKER_THREADS = int(os.environ.get("KANBAN_WORKER_THREADS", "2"))
KANBAN_WORKER_POLL_SECONDS = float(os.environ.get("KANBAN_WORKER_POLL_SECONDS", "0.5"))
# One delivery attempt (resolving, connecting, sending, reading the answer) ends this long
# after it began, however slowly the endpoint answers.
KANBAN_WEBHOOK_DEADLINE_SECONDS = float(os.environ.get("KANBAN_WEBHOOK_DEADLINE_SECONDS", "10"))
# Worker threads one board's endpoints may hold at once (each endpoint holds at most one:
# its events go in order), so a board whose endpoints hang leaves the others' to the rest.
KANBAN_WEBHOOK_SENDERS_PER_BOARD = int(os.environ.get("KANBAN_WEBHOOK_SENDERS_PER_BOARD", "1"))
# Retries wait base × 2^(attempt-1), at most an hour, until the event is this old.
KANBAN_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("KANBAN_WEBHOOK_BACKOFF_SECONDS", "10"))
KANBAN_WEBHOOK_GIVE_UP_SECONDS = int(os.environ.get("KANBAN_WEBHOOK_GIVE_UP_SECONDS", "86400"))
# Endpoints only at public addresses: loopback, private, shared (CGNAT), link-local,
# reserved and this host's own addresses are refused, unless named here: comma-separated
# networks (e.g. "10.20.0.0/16,fd12:3456::/48") for receivers inside the company network.
KANBAN_WEBHOOK_ALLOW_NETWORKS = [
    str(ipaddress.ip_network(network, strict=False))  # a typo stops the server here
    for network in env_list("KANBAN_WEBHOOK_ALLOW_NETWORKS", "")
]
# Shorthand for 127.0.0.0/8 and ::1 in the list above (development, tests).
KANBAN_WEBHOOK_ALLOW_LOOPBACK = env_bool("KANBAN_WEBHOOK_ALLOW_LOOPBACK", False)
# The address people open the board at: links in webhook payloads and Slack messages.
KANBAN_PUBLIC_URL = os.environ.get("KANBAN_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Web Push (SPEC §14): the VAPID `sub` claim push services may write to (mailto: or https:),
# and how long a push's Approve and Deny links work (its TTL is never shorter).
KANBAN_VAPID_SUBJECT = os.environ.get("KANBAN_VAPID_SUBJECT", "mailto:agent-kanban@localhost")
KANBAN_PUSH_LINK_SECONDS = int(os.environ.get("KANBAN_PUSH_LINK_SECONDS", "900"))
# Passkeys (SPEC §14) are bound to KANBAN_PUBLIC_URL's host name; approving a step-up item
# needs an assertion made for it within this long.
KANBAN_STEP_UP_SECONDS = int(os.environ.get("KANBAN_STEP_UP_SECONDS", "300"))

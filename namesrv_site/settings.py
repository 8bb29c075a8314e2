"""Settings of the NameServer project, read from the environment.

Every knob has a typed helper and a safe default, so ``manage.py`` works on a
fresh checkout: DEBUG is off unless ``NAMESRV_DEBUG=true``, and a secret that is
not configured is random per process (``manage.py check --deploy`` reports it,
see ``namesrv_app.checks``). ``NAMESRV_PROFILE=production`` turns on the HTTPS
settings and refuses to start without the hosts and the secret key. The
NameServer's own knobs live in one namespaced dict, ``NAMESRV``;
``namesrv_app.checks`` validates it (``manage.py check``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from whitenoise.compress import Compressor

from namesrv_site.redis_url import RedisUrlError, checked_redis_url

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def env_str(name: str, default: str) -> str:
    """The environment variable ``name``, or ``default`` when it is unset."""
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    """The environment variable ``name`` as an int; a malformed value fails loudly."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise ValueError(f"environment variable {name} must be an integer, got {raw!r}") from exc


def env_bool(name: str, default: bool) -> bool:
    """The environment variable ``name`` as a bool (1/true/yes/on, 0/false/no/off)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f"environment variable {name} must be a boolean, got {raw!r}")


def env_list(name: str, default: str) -> list[str]:
    """The environment variable ``name`` as a comma-separated list (blanks dropped)."""
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_networks(name: str) -> list[str]:
    """The environment variable ``name`` as a comma-separated list of IP addresses or
    CIDR networks; a malformed entry stops the process naming it."""
    items = env_list(name, "")
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or a CIDR network"
            ) from None
    return items


def env_secret(name: str, file_name: str) -> str | None:
    """A secret from the file named by ``file_name`` (read, stripped), else from ``name``.

    The file wins when both are set: a launcher passes its per-run file whatever
    the shell exported. None when neither is set; a file that is missing,
    unreadable or empty stops the process with an error naming the variable.
    """
    path = os.environ.get(file_name, "").strip()
    if path:
        try:
            value = Path(path).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ImproperlyConfigured(
                f"{file_name}={path}: cannot read the file: {reason}"
            ) from exc
        if not value:
            raise ImproperlyConfigured(f"{file_name}={path}: the file is empty")
        return value
    value = os.environ.get(name, "").strip()
    return value or None


EPHEMERAL_SECRET_BYTES = 50
PROFILES = ("local", "production")
# "local": plain HTTP on loopback (make run). "production": HTTPS only, and the
# hosts and the secret key must be configured (docs/SECURITY.md).
PROFILE = env_str("NAMESRV_PROFILE", "local").strip().lower()
if PROFILE not in PROFILES:
    raise ImproperlyConfigured(
        f"NAMESRV_PROFILE must be one of {', '.join(PROFILES)}, got {PROFILE!r}"
    )
PRODUCTION = PROFILE == "production"

DEBUG = env_bool("NAMESRV_DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("NAMESRV_PROFILE=production refuses NAMESRV_DEBUG=true")

_CONFIGURED_SECRET_KEY = env_secret("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE")
if PRODUCTION and _CONFIGURED_SECRET_KEY is None:
    raise ImproperlyConfigured(
        "NAMESRV_PROFILE=production needs DJANGO_SECRET_KEY_FILE (or DJANGO_SECRET_KEY)"
    )
# Without a configured key every process makes its own: sessions and CSRF tokens
# then die with the process and differ between workers, which is fine for
# migrate/check/createsuperuser and is what `check --deploy` reports (namesrv.E020).
SECRET_KEY = _CONFIGURED_SECRET_KEY or secrets.token_urlsafe(EPHEMERAL_SECRET_BYTES)

if PRODUCTION and not os.environ.get("DJANGO_ALLOWED_HOSTS", "").strip():
    raise ImproperlyConfigured("NAMESRV_PROFILE=production needs DJANGO_ALLOWED_HOSTS")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
# Origins (scheme://host[:port]) allowed to POST with the session, e.g. behind a
# TLS-terminating proxy whose public name differs from the Host Django sees.
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "namesrv_app",
    "broker_app",
    # Login throttling (see "login throttling" below).
    "axes",
]

MIDDLEWARE = [
    # First, so it times everything below it (plain route reads are answered beside
    # Django, namesrv_app.api.route_reads, and never reach it).
    "namesrv_app.web.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Right below the security headers it answers with: the static files (whitenoise).
    "namesrv_app.web.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Inside CommonMiddleware: Django's own errors and the slash redirect under /api/ in JSON.
    "namesrv_app.api.errors.ApiErrorAnswers",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # After authentication: records what signed-in users change (namesrv_app.audit).
    "namesrv_app.audit.AuditMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: counts the failed logins and refuses a locked-out pair (django-axes).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "namesrv_site.urls"
WSGI_APPLICATION = "namesrv_site.wsgi.application"
ASGI_APPLICATION = "namesrv_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The pages live in namesrv_app/templates (package data of the app).
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _sqlite(db_path: Path) -> dict[str, Any]:
    """One SQLite file in WAL mode."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(db_path),
        "OPTIONS": {
            # WAL lets the web process read while the gateway's projection writer
            # commits; IMMEDIATE takes the write lock up front instead of failing
            # half-way through a batch with "database is locked".
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        },
    }


def _shared_database() -> dict[str, Any]:
    """The cluster-wide database (accounts, tokens, experiment runs, audit log):
    DATABASE_URL (PostgreSQL on hosts), else the SQLite file NAMESRV_SHARED_DB_PATH
    (a local cluster's nodes share one), else run/dev.sqlite3."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if url.startswith("sqlite:"):
        # One file several local processes share: the same WAL settings as below.
        return _sqlite(Path(str(dj_database_url.parse(url)["NAME"])))
    if url:
        # The query becomes OPTIONS, which psycopg hands to libpq as they are: TLS is
        # ?sslmode=verify-full&sslrootcert=/etc/namesrv/ca.pem (docs/DEPLOY.md).
        return dict(dj_database_url.parse(url, conn_max_age=60))
    return _sqlite(Path(env_str("NAMESRV_SHARED_DB_PATH", str(BASE_DIR / "run" / "dev.sqlite3"))))


# Two databases, split by namesrv_app.db_router: ``default`` is shared by the whole
# cluster, ``projection`` (NAMESRV_DB_PATH) is this node's own route tables.
DATABASES = {
    "default": _shared_database(),
    "projection": _sqlite(
        Path(env_str("NAMESRV_DB_PATH", str(BASE_DIR / "run" / "dev.projection.sqlite3")))
    ),
}
DATABASE_ROUTERS = ["namesrv_app.db_router.ProjectionRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# rediss:// for TLS, the CA in the query (?ssl_ca_certs=/etc/namesrv/ca.pem): one
# checked URL for Celery, the Channels layer and beat's lock (namesrv_site.redis_url).
try:
    REDIS_URL = checked_redis_url(env_str("REDIS_URL", "redis://127.0.0.1:6379/0"))
except RedisUrlError as exc:
    raise ImproperlyConfigured(f"REDIS_URL: {exc}") from None
CELERY_BROKER_URL = REDIS_URL
# No result backend: nothing reads a task's result (the scans report to the gateway).
CELERY_TASK_IGNORE_RESULT = True
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- static files ---
# `collectstatic` gathers them into STATIC_ROOT with a content hash in every name and
# a gzip copy beside each; whitenoise serves them from there (StaticFilesMiddleware),
# hashed names cached by browsers for good (immutable). A launched node collects them
# into its own folder before its web process starts (node.processes sets
# NAMESRV_STATIC_ROOT); docs/DEPLOY.md, "Static files".
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("NAMESRV_STATIC_ROOT", str(BASE_DIR / "run" / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Source maps, which only a browser's developer tools fetch, are not compressed: they
# are most of the bytes (Redoc's and Swagger UI's), and a node collects at every start.
# The unhashed copies stay: the admin's scripts name a few icons without the hash.
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("NAMESRV_LOG_LEVEL", "INFO")},
    # django-axes announces itself at every start; its login failures stay (WARNING).
    "loggers": {"axes.apps": {"level": "WARNING"}},
}

_CONFIGURED_INTERNAL_SECRET = env_secret("NAMESRV_INTERNAL_SECRET", "NAMESRV_INTERNAL_SECRET_FILE")
# The secrets this process made up because none was configured (namesrv_app.checks).
NAMESRV_EPHEMERAL_SECRETS = tuple(
    name
    for name, configured in (
        ("SECRET_KEY", _CONFIGURED_SECRET_KEY),
        ("INTERNAL_SECRET", _CONFIGURED_INTERNAL_SECRET),
    )
    if configured is None
)

# The secret files the settings read, by variable: namesrv_app.checks refuses one that
# group or others may read (namesrv.E022), unless NAMESRV_ALLOW_READABLE_SECRET_FILES
# says that is intended (a secrets volume mounted 0644, say).
NAMESRV_SECRET_FILES = {
    name: path
    for name in ("DJANGO_SECRET_KEY_FILE", "NAMESRV_INTERNAL_SECRET_FILE")
    if (path := os.environ.get(name, "").strip())
}
NAMESRV_ALLOW_READABLE_SECRET_FILES = env_bool("NAMESRV_ALLOW_READABLE_SECRET_FILES", False)

NAMESRV: dict[str, Any] = {
    "NODE_ID": env_str("NAMESRV_NODE_ID", "n1"),
    "MODE": env_str("NAMESRV_MODE", "eventual"),
    "HOST": env_str("NAMESRV_HOST", "127.0.0.1"),
    "PORT": env_int("NAMESRV_PORT", 9876),
    "INTERNAL_PORT": env_int("NAMESRV_INTERNAL_PORT", 0),
    # The gateway's internal port trusts only loopback peers holding this secret
    # (NAMESRV_INTERNAL_SECRET_FILE or NAMESRV_INTERNAL_SECRET). Unset, each process
    # makes its own, so no other process gets in (check --deploy: namesrv.E021); a
    # launcher starting several processes passes the same secret to all of them.
    "INTERNAL_SECRET": _CONFIGURED_INTERNAL_SECRET or secrets.token_hex(16),
    "SCAN_INTERVAL_S": env_int("NAMESRV_SCAN_INTERVAL_S", 10),
    "NOTIFY_MIN_BROKER_ID_CHANGED": env_bool("NAMESRV_NOTIFY_MIN_BROKER_ID_CHANGED", False),
    "CLUSTER_FILE": env_str("NAMESRV_CLUSTER_FILE", ""),
    # Dotted path of a callable taking a namesrv_app.events.ChangeEvent; empty = none.
    "EVENT_PUBLISHER": env_str("NAMESRV_EVENT_PUBLISHER", ""),
    # Raft mode: dotted path of a callable told (node id, leader, term) on a change.
    "LEADER_PUBLISHER": env_str("NAMESRV_LEADER_PUBLISHER", ""),
    # Eventual mode's kvConfig.json; empty: beside the node's SQLite file.
    "KV_CONFIG_PATH": env_str("NAMESRV_KV_CONFIG_PATH", ""),
    # Raft mode only (run_gateway flags override them): this node's Raft port (its
    # identity, so never 0 in raft mode), every member's "host:port", the journal and
    # snapshot folder, test-only dial overrides, the bounded wait of a proposal, and
    # the allowance the replicated expiry gives for clock skew between nodes.
    "RAFT_PORT": env_int("NAMESRV_RAFT_PORT", 0),
    "RAFT_PEERS": env_str("NAMESRV_RAFT_PEERS", ""),
    "RAFT_DIR": env_str("NAMESRV_RAFT_DIR", ""),
    "RAFT_DIAL": env_str("NAMESRV_RAFT_DIAL", ""),
    "PROPOSE_TIMEOUT_S": float(env_str("NAMESRV_PROPOSE_TIMEOUT_S", "3.0")),
    "SKEW_ALLOWANCE_MS": env_int("NAMESRV_SKEW_ALLOWANCE_MS", 5000),
    # Shifts the wall clock this node stamps into commands; experiments use it to
    # inject clock skew. Apply never reads a clock, so only proposals move.
    "CLOCK_OFFSET_MS": env_int("NAMESRV_CLOCK_OFFSET_MS", 0),
    # Raft mode: the cluster secret every Raft peer must prove (a file, mode 0600,
    # or the value itself); run_gateway refuses to start raft mode without one.
    "RAFT_SECRET_FILE": env_str("NAMESRV_RAFT_SECRET_FILE", ""),
    "RAFT_SECRET": env_str("NAMESRV_RAFT_SECRET", ""),
    # Where the Raft port listens; empty: the host of this node's Raft identity.
    "RAFT_BIND_HOST": env_str("NAMESRV_RAFT_BIND_HOST", ""),
    # The remoting ACL (docs/SECURITY.md): the accounts file the gateway checks
    # signatures against, and whether the ACL is on at all (off only when asked).
    "ACL_ENABLED": env_bool("NAMESRV_ACL", True),
    "ACL_FILE": env_str("NAMESRV_ACL_FILE", ""),
    # The account this node's own processes (web, Celery) sign their requests with.
    "ACL_ACCESS_KEY": env_str("NAMESRV_ACL_ACCESS_KEY", ""),
    "ACL_SECRET_KEY_FILE": env_str("NAMESRV_ACL_SECRET_KEY_FILE", ""),
    # The public port's limits against hostile peers (docs/SECURITY.md): bytes held in
    # unfinished frames over all connections, seconds to finish a started frame, and
    # connections one remote address may hold.
    "UNFINISHED_FRAMES_BYTES_MAX": env_int("NAMESRV_UNFINISHED_FRAMES_BYTES_MAX", 64 * 1024 * 1024),
    "FRAME_DEADLINE_S": float(env_str("NAMESRV_FRAME_DEADLINE_S", "30")),
    "CONNECTIONS_PER_ADDRESS_MAX": env_int("NAMESRV_CONNECTIONS_PER_ADDRESS_MAX", 4096),
}

# --- web console and API ---
# Token auth for the API, session auth + CSRF for the console, the OpenAPI schema,
# and the console's own knobs in NAMESRV_WEB.
# API tokens are namesrv_app's own (namesrv_app.tokens: stored hashed, expiring), not
# DRF's authtoken app, which stored the keys themselves.

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"

REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "namesrv_app.api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["namesrv_app.api.permissions.IsViewer"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "namesrv_app.api.views.exception_handler",
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "raft-namesrv",
    "DESCRIPTION": (
        "REST API of a Raft-replicated RocketMQ NameServer node. Reads come from the "
        "node's projection (or the gateway for linearizable reads); every write goes "
        "to the node's gateway over the RocketMQ remoting protocol."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema and its docs need a console role unless NAMESRV_WEB_PUBLIC_API_DOCS.
    "SERVE_PERMISSIONS": ["namesrv_app.api.permissions.ApiDocsPermission"],
    # Swagger UI and Redoc from the drf-spectacular-sidecar package, served by the node
    # itself: the API docs work on a machine without internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

NAMESRV_WEB: dict[str, Any] = {
    # Anonymous GET /api/v1/routes/<topic>/ (what a producer could ask over the wire anyway).
    "ALLOW_ANONYMOUS_ROUTE_READS": env_bool("NAMESRV_WEB_ANONYMOUS_ROUTE_READS", False),
    # How long the web process waits for its gateway (and for peer nodes) per request.
    "GATEWAY_TIMEOUT_S": float(env_str("NAMESRV_WEB_GATEWAY_TIMEOUT_S", "3.0")),
    "PEER_TIMEOUT_S": float(env_str("NAMESRV_WEB_PEER_TIMEOUT_S", "1.0")),
    "PAGE_SIZE": env_int("NAMESRV_WEB_PAGE_SIZE", 50),
    # Local route reads (namesrv_app.api.route_reads): an answer may lag the
    # projection by this much (it reports the applied_version it reflects) ...
    "ROUTE_VERSION_TTL_MS": env_int("NAMESRV_WEB_ROUTE_VERSION_TTL_MS", 200),
    # ... and a revoked token or role still reads routes for at most this long (its
    # grant is held in the "api_tokens" cache below).
    "TOKEN_CACHE_TTL_MS": env_int("NAMESRV_WEB_TOKEN_CACHE_TTL_MS", 5000),
    # How long a new API token lives (create_operator --token-days overrides it).
    "TOKEN_DAYS": env_int("NAMESRV_WEB_TOKEN_DAYS", 90),
    # Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For names the real
    # client (namesrv_app.web.client_address); none by default: the peer is the client.
    "TRUSTED_PROXIES": env_networks("NAMESRV_WEB_TRUSTED_PROXIES"),
    # /api/schema/, /api/v1/schema/ and /api/v1/docs/ for anyone (else a console role).
    "PUBLIC_API_DOCS": env_bool("NAMESRV_WEB_PUBLIC_API_DOCS", False),
}
# Per worker process: "api_tokens" holds the route lane's token grants
# (namesrv_app.api.authentication.RouteReadTokenAuthentication), keyed by the token's
# digest, at most 4096 of them.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "api_tokens": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "api-tokens",
        "OPTIONS": {"MAX_ENTRIES": 4096},
    },
}

# --- login throttling (django-axes) ---
# Every password check (the console's login, the admin's) goes through
# AxesStandaloneBackend: after NAMESRV_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for NAMESRV_LOGIN_COOLOFF_MINUTES.
# Per pair, so an attacker cannot lock a user out from everywhere, nor try many
# users from one address undetected (each pair counts on its own).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("NAMESRV_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("NAMESRV_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# A successful login forgets that pair's earlier failures.
AXES_RESET_ON_SUCCESS = True
# Tries during a lockout are refused without being counted, so the cool-off runs
# from the last counted failure and the page can say when it ends.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# 429 Too Many Requests: the credentials may be right, the rate is what is refused.
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_CALLABLE = "namesrv_app.web.lockout.lockout_response"
# The address a failure counts under: the socket's peer, or behind a trusted proxy
# (NAMESRV_WEB_TRUSTED_PROXIES) the client it names in X-Forwarded-For. Ours rather
# than django-ipware's AXES_IPWARE_* options (ipware is not installed): ipware trusts a
# header by the proxies listed in it, matched as string prefixes, not by the peer that
# actually sent it.
AXES_CLIENT_IP_CALLABLE = "namesrv_app.web.client_address.client_address"

# --- passwords ---
# Django's validators, run by create_operator and the admin's password forms: long
# enough, not one of the 20,000 common passwords, not all digits, not like the username.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("NAMESRV_PASSWORD_MIN_LENGTH", 12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- HTTPS (NAMESRV_PROFILE=production) ---
# The local profile stays plain HTTP on loopback. Production serves the console
# over HTTPS only: redirect, HSTS, and cookies that never travel in clear text.
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("NAMESRV_SECURE_SSL_REDIRECT", True)
    # Probes and scrapers speak plain HTTP to the node itself (a load balancer's
    # health check, Prometheus): they get their answer, not a redirect. So do RocketMQ
    # clients asking the address server: MixAll.getWSAddr() is always http://.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$", r"^rocketmq/nsaddr"]
    SECURE_HSTS_SECONDS = env_int("NAMESRV_HSTS_SECONDS", 31_536_000)
    # Covers the hosts below the console's own name (n1.console.example -> *.n1...),
    # never the parent domain: safe to default on.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("NAMESRV_HSTS_INCLUDE_SUBDOMAINS", True)
    # Preloading is a request to browser vendors that only the owner of the
    # registrable domain can make (and hardly undo): opt-in, and when off that
    # choice is deliberate, so its reminder (security.W021) is silenced.
    SECURE_HSTS_PRELOAD = env_bool("NAMESRV_HSTS_PRELOAD", False)
    SILENCED_SYSTEM_CHECKS = [
        *([] if SECURE_HSTS_PRELOAD else ["security.W021"]),
        *([] if SECURE_HSTS_INCLUDE_SUBDOMAINS else ["security.W005"]),
    ]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Only behind a TLS-terminating proxy that sets (and strips from clients) the
    # header, e.g. "X-Forwarded-Proto=https"; never trusted unless configured.
    _PROXY_SSL_HEADER = env_str("NAMESRV_SECURE_PROXY_SSL_HEADER", "").strip()
    if _PROXY_SSL_HEADER:
        _HEADER, _SEP, _VALUE = _PROXY_SSL_HEADER.partition("=")
        if not _SEP or not _HEADER.strip() or not _VALUE.strip():
            raise ImproperlyConfigured(
                "NAMESRV_SECURE_PROXY_SSL_HEADER must look like X-Forwarded-Proto=https"
            )
        _META_NAME = "HTTP_" + _HEADER.strip().upper().replace("-", "_")
        SECURE_PROXY_SSL_HEADER = (_META_NAME, _VALUE.strip())

# --- HTTPS served by the web process itself ([tls] web = true in node.toml) ---
# node_env sets NAMESRV_WEB_HTTPS when uvicorn serves the port with the node's
# certificate (node.web_tls). The port then speaks nothing but HTTPS, so there is no
# plain request to redirect; what Django must do is keep its cookies off plain HTTP
# and tell browsers to come back over HTTPS. Outside the production profile HSTS is
# short by default: a node whose certificate is later removed is unreachable from a
# browser that saw it for at most that long (browsers ignore HSTS for IP addresses).
WEB_HTTPS = env_bool("NAMESRV_WEB_HTTPS", False)
WEB_HTTPS_HSTS_SECONDS = 86_400
if WEB_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    if not PRODUCTION:
        SECURE_HSTS_SECONDS = env_int("NAMESRV_HSTS_SECONDS", WEB_HTTPS_HSTS_SECONDS)

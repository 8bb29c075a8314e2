"""Settings of the NameServer project, read from the environment.

Every knob has a typed helper and a development default, so ``manage.py``
works on a fresh checkout, while production sets ``NAMESRV_DEBUG=false`` and
the secrets. The NameServer's own knobs live in one namespaced dict,
``NAMESRV``; ``namesrv_app.checks`` validates it (``manage.py check``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url

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


DEBUG = env_bool("NAMESRV_DEBUG", True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me" if DEBUG else "")
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "namesrv_app",
    "broker_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "namesrv_site.urls"
WSGI_APPLICATION = "namesrv_site.wsgi.application"
ASGI_APPLICATION = "namesrv_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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


def _database() -> dict[str, Any]:
    """PostgreSQL (or any engine) from DATABASE_URL, else one SQLite file per node in WAL mode."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return dict(dj_database_url.parse(url, conn_max_age=60))
    db_path = Path(env_str("NAMESRV_DB_PATH", str(BASE_DIR / "run" / "dev.sqlite3")))
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


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    },
}

REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "raft-namesrv",
    "DESCRIPTION": "A Raft-replicated RocketMQ NameServer",
    "VERSION": "0.1.0",
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("NAMESRV_LOG_LEVEL", "INFO")},
}

NAMESRV: dict[str, Any] = {
    "NODE_ID": env_str("NAMESRV_NODE_ID", "n1"),
    "MODE": env_str("NAMESRV_MODE", "eventual"),
    "HOST": env_str("NAMESRV_HOST", "127.0.0.1"),
    "PORT": env_int("NAMESRV_PORT", 9876),
    "INTERNAL_PORT": env_int("NAMESRV_INTERNAL_PORT", 0),
    # The gateway's internal port trusts only loopback peers holding this secret.
    # Development gets a random one per process; a launcher that starts several
    # processes must pass the same value to all of them through the environment.
    "INTERNAL_SECRET": env_str("NAMESRV_INTERNAL_SECRET", secrets.token_hex(16) if DEBUG else ""),
    "SCAN_INTERVAL_S": env_int("NAMESRV_SCAN_INTERVAL_S", 10),
    "IDLE_TIMEOUT_S": env_int("NAMESRV_IDLE_TIMEOUT_S", 120),
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
}

# --- web console and API ---
# Appended by the console work: token auth for the API, session auth + CSRF for
# the console, the OpenAPI schema, and the console's own knobs in NAMESRV_WEB.
INSTALLED_APPS += ["rest_framework.authtoken"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["namesrv_app.api.permissions.IsViewer"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "namesrv_app.api.views.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "raft-namesrv",
    "DESCRIPTION": (
        "REST API of a Raft-replicated RocketMQ NameServer node. Reads come from the "
        "node's projection (or the gateway for linearizable reads); every write goes "
        "to the node's gateway over the RocketMQ remoting protocol."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
}

NAMESRV_WEB: dict[str, Any] = {
    # Anonymous GET /api/v1/routes/<topic>/ (what a producer could ask over the wire anyway).
    "ALLOW_ANONYMOUS_ROUTE_READS": env_bool("NAMESRV_WEB_ANONYMOUS_ROUTE_READS", False),
    # How long the web process waits for its gateway (and for peer nodes) per request.
    "GATEWAY_TIMEOUT_S": float(env_str("NAMESRV_WEB_GATEWAY_TIMEOUT_S", "3.0")),
    "PEER_TIMEOUT_S": float(env_str("NAMESRV_WEB_PEER_TIMEOUT_S", "1.0")),
    "PAGE_SIZE": env_int("NAMESRV_WEB_PAGE_SIZE", 50),
    # Local route reads (namesrv_app.api.route_cache): an answer may lag the
    # projection by this much (it reports the applied_version it reflects) ...
    "ROUTE_VERSION_TTL_MS": env_int("NAMESRV_WEB_ROUTE_VERSION_TTL_MS", 200),
    # ... and a revoked token or role still reads routes for at most this long.
    "TOKEN_CACHE_TTL_MS": env_int("NAMESRV_WEB_TOKEN_CACHE_TTL_MS", 5000),
}
# First, so the common route read skips the stack's thread hops (it applies the
# security and frame headers itself and falls through for everything else).
MIDDLEWARE = ["namesrv_app.api.route_cache.RouteReadFastPath", *MIDDLEWARE]

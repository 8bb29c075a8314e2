"""``REDIS_URL`` checked once for every Redis client of a process, TLS included.

One URL feeds three clients: Celery's broker (kombu), the Channels layer
(channels-redis) and beat's lock (redis-py). Each reads TLS options from the URL's
query (``rediss://...?ssl_ca_certs=/etc/namesrv/ca.pem``), but they disagree on what a
``rediss://`` URL without options means: kombu then connects *without checking the
certificate* (a warning in the log), redis-py checks it. So the settings pass every
client the URL from :func:`checked_redis_url`, in which a TLS link always checks the
server:

* ``ssl_cert_reqs`` is added as ``required`` when missing; ``none`` or ``optional``
  are refused (whoever sits in between would read the Redis password);
* the server's name is checked against its certificate (redis-py's default), so
  ``ssl_check_hostname=false`` is refused: connect by a name or address the
  certificate carries;
* ``ssl_ca_certs`` (the CA to check the server with; the system's CAs when absent),
  ``ssl_certfile`` and ``ssl_keyfile`` (a client certificate, for a Redis with
  ``tls-auth-clients yes``) must name readable files;
* ``ssl_*`` options on a plain ``redis://`` URL are refused: they would do nothing.

Errors name the option, never the password.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlsplit

TLS_SCHEME = "rediss"
CERT_REQS_KEY = "ssl_cert_reqs"
CERT_REQUIRED = "required"
"""The one spelling every client reads (redis-py knows no ``CERT_REQUIRED``)."""
CHECK_HOSTNAME_KEY = "ssl_check_hostname"
FILE_KEYS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


class RedisUrlError(ValueError):
    """A ``REDIS_URL`` that cannot be used as it is; the message says which option."""


def _query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def _check_files(query: dict[str, str]) -> None:
    for key in FILE_KEYS:
        path = query.get(key)
        if path is None:
            continue
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise RedisUrlError(f"{key}={path}: not a readable file")


def checked_redis_url(url: str) -> str:
    """``url`` ready for every client: a ``rediss://`` URL gets ``ssl_cert_reqs=required``
    when it has none; RedisUrlError when an option would weaken or break the link."""
    query = _query(url)
    tls_keys = sorted(key for key in query if key.startswith("ssl_"))
    if urlsplit(url).scheme != TLS_SCHEME:
        if tls_keys:
            raise RedisUrlError(f"{', '.join(tls_keys)}: TLS options need a rediss:// URL")
        return url
    cert_reqs = query.get(CERT_REQS_KEY, CERT_REQUIRED)
    if cert_reqs != CERT_REQUIRED:
        raise RedisUrlError(
            f"{CERT_REQS_KEY}={cert_reqs}: a rediss:// link always checks the server's "
            f"certificate ({CERT_REQS_KEY}={CERT_REQUIRED}, the CA in ssl_ca_certs)"
        )
    check_hostname = query.get(CHECK_HOSTNAME_KEY)
    if check_hostname is not None and check_hostname.strip().lower() not in TRUE_WORDS:
        raise RedisUrlError(
            f"{CHECK_HOSTNAME_KEY}={check_hostname}: the server's name is always checked; "
            "connect by a host name or address its certificate carries"
        )
    _check_files(query)
    if CERT_REQS_KEY in query:
        return url
    # Appended to the query as written, so the rest of the URL keeps its own encoding.
    base = url.rstrip("?&")
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}{CERT_REQS_KEY}={CERT_REQUIRED}"

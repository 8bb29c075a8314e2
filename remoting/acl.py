"""Request signing of RocketMQ's ACL, as ``AclClientRPCHook`` does it (sans-IO).

A client holding an account (access key + secret key) signs every request it sends:

1. it adds ext field ``AccessKey`` (and ``SecurityToken`` when it has one);
2. it takes every ext field but ``Signature``, sorted by key, and concatenates their
   *values* (keys are not part of the content), UTF-8 encoded, followed by the body
   bytes;
3. it adds ext field ``Signature`` = Base64(HmacSHA1(secretKey, content)).

The server rebuilds the same content from the ext fields it received (the broker's
``PlainAccessValidator`` also leaves out ``_UNIQUE_KEY_QUERY``, which the client adds
after signing) and compares. Both header styles (JSON and the ROCKETMQ binary header)
carry the same ext map, so one algorithm covers both.

Java sorts keys with ``String.compareTo``, which compares UTF-16 code units; Python
compares code points. They differ only for keys mixing astral characters with
characters from U+E000 to U+FFFF, and :func:`java_key_order` sorts as Java does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from remoting.command import RemotingCommand

ACCESS_KEY_FIELD = "AccessKey"
SIGNATURE_FIELD = "Signature"
SECURITY_TOKEN_FIELD = "SecurityToken"
UNIQUE_KEY_QUERY_FIELD = "_UNIQUE_KEY_QUERY"
"""Added by the client after signing (message queries); never part of the content."""

_UNSIGNED_FIELDS = frozenset({SIGNATURE_FIELD, UNIQUE_KEY_QUERY_FIELD})


@dataclass(frozen=True, slots=True)
class Credentials:
    """One ACL account as a client holds it (``SessionCredentials``)."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("an ACL account needs a non-empty access key and secret key")

    def __repr__(self) -> str:
        # Never print the secret (log lines, tracebacks, test failures).
        return f"Credentials(access_key={self.access_key!r}, secret_key=***)"


def java_key_order(key: str) -> bytes:
    """A sort key ordering strings as Java's ``String.compareTo`` does (UTF-16 units)."""
    return key.encode("utf-16-be", "surrogatepass")


def signing_content(ext_fields: Mapping[str, str] | None, body: bytes | None) -> bytes:
    """The bytes a signature covers: the sorted ext values, then the body."""
    fields = ext_fields or {}
    values = "".join(
        fields[key] for key in sorted(fields, key=java_key_order) if key not in _UNSIGNED_FIELDS
    )
    # Java's getBytes(UTF_8) writes '?' for a lone surrogate, as the frame encoder does.
    text = values.encode("utf-8", "replace")
    return text + body if body else text


def signature(content: bytes, secret_key: str) -> str:
    """Base64(HmacSHA1(secret_key, content)), as ``AclSigner.calSignature``."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(request: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    """A copy of ``request`` carrying ``AccessKey`` (+ ``SecurityToken``) and ``Signature``.

    Any signature already present is replaced, so signing twice is harmless.
    """
    fields = {
        key: value for key, value in (request.ext_fields or {}).items() if key != SIGNATURE_FIELD
    }
    fields[ACCESS_KEY_FIELD] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN_FIELD] = credentials.security_token
    fields[SIGNATURE_FIELD] = signature(
        signing_content(fields, request.body), credentials.secret_key
    )
    return replace(request, ext_fields=fields)


def signature_matches(request: RemotingCommand, secret_key: str) -> bool:
    """True when the request's ``Signature`` is the one ``secret_key`` gives (constant time)."""
    fields = request.ext_fields or {}
    given = fields.get(SIGNATURE_FIELD)
    if not given:
        return False
    expected = signature(signing_content(fields, request.body), secret_key)
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def read_secret_file(path: str | Path, what: str) -> str:
    """The stripped contents of the secret file at ``path``; ValueError naming ``what``.

    A secret file that other users may read is refused: whoever reads it holds the key.
    """
    secret_path = Path(path).expanduser()
    try:
        mode = secret_path.stat().st_mode
        text = secret_path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{what}: cannot read {secret_path}: {exc.strerror or exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(f"{what}: {secret_path} is readable by others (chmod 600 {secret_path})")
    if not text:
        raise ValueError(f"{what}: {secret_path} is empty")
    return text


def load_credentials(access_key: str, secret_file: str | Path | None) -> Credentials | None:
    """The account to sign with: None when no access key is configured."""
    if not access_key:
        return None
    if not secret_file:
        raise ValueError(f"ACL access key {access_key!r} is set but no secret key file is")
    return Credentials(access_key, read_secret_file(secret_file, f"secret key of {access_key!r}"))

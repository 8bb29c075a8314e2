"""The Raft port's message cipher: AES-256-GCM-SIV in place of PySyncObj's Fernet.

PySyncObj authenticates and encrypts every message with the cluster secret when a
``password`` is set, through an object with three methods: ``encrypt_at_time``,
``extract_timestamp`` and ``decrypt`` (a ``cryptography`` Fernet). :class:`RaftCipher`
has the same three, so PySyncObj's connections use it unchanged
(``RouteLog.encryptor``), and it is the same protection: nothing a peer sends reaches
``zlib`` or ``pickle`` before its tag has been verified with the secret's key, and the
timestamp PySyncObj checks for order is authenticated with the message.

Why not Fernet: it is AES-128-CBC plus HMAC-SHA256 in Python-level steps with the token
base64-encoded, on every send and every receive of PySyncObj's one thread; one AEAD
call costs a small fraction of that (see docs/BENCHMARKS.md, "Tables left out of the
log, the leader's flush overlapped").

Token: version byte ``0x01`` + timestamp (8 bytes, big-endian) + nonce (12 random
bytes) + ciphertext and tag; the first 9 bytes are the associated data. GCM-SIV is
the mode whose security survives a repeated nonce (it would reveal only that two
messages were equal), so random nonces need no per-key message budget. The key is
derived from the cluster secret with PBKDF2-HMAC-SHA256 (100,000 iterations, as
PySyncObj derives Fernet's), under its own salt.

Every node of a cluster must run the same cipher: a node of an earlier release
(Fernet) and one of this release drop each other's connections. Upgrade all nodes
together, as for the log format (docs/RAFT.md).
"""

from __future__ import annotations

import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

VERSION = b"\x01"
_STAMP = struct.Struct(">Q")
_HEAD_BYTES = len(VERSION) + _STAMP.size
_NONCE_BYTES = 12
_SALT = b"rocketmq-namesrv raft port, AES-256-GCM-SIV, v1"
_KDF_ITERATIONS = 100_000


class InvalidToken(ValueError):
    """A message that was not made with the cluster secret (or was altered)."""


class RaftCipher:
    """What PySyncObj's ``TcpConnection`` calls its ``encryptor`` (see the module doc).

    Used from one thread (PySyncObj's tick thread): the plaintext of the token whose
    timestamp was just read is kept for the ``decrypt`` of the same token that follows.
    """

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCMSIV(key)
        self._opened: tuple[bytes, int, bytes] | None = None

    @classmethod
    def from_secret(cls, secret: str) -> RaftCipher:
        """The cipher of the cluster secret ``secret``."""
        kdf = PBKDF2HMAC(
            algorithm=hashes.SHA256(), length=32, salt=_SALT, iterations=_KDF_ITERATIONS
        )
        return cls(kdf.derive(secret.encode("utf-8")))

    def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:
        """``data`` sealed with ``current_time`` (PySyncObj passes its monotonic seconds)."""
        head = VERSION + _STAMP.pack(current_time)
        nonce = os.urandom(_NONCE_BYTES)
        return head + nonce + self._aead.encrypt(nonce, data, head)

    def extract_timestamp(self, token: bytes) -> int:
        """The authenticated timestamp of ``token``; InvalidToken if it is not genuine."""
        return self._open(token)[0]

    def decrypt(self, token: bytes) -> bytes:
        """The plaintext of ``token``; InvalidToken if it is not genuine."""
        return self._open(token)[1]

    def _open(self, token: bytes) -> tuple[int, bytes]:
        opened = self._opened
        if opened is not None and opened[0] is token:
            return opened[1], opened[2]
        if len(token) < _HEAD_BYTES + _NONCE_BYTES or token[:1] != VERSION:
            raise InvalidToken("not a Raft port message of this release")
        head = token[:_HEAD_BYTES]
        nonce = token[_HEAD_BYTES : _HEAD_BYTES + _NONCE_BYTES]
        try:
            plain = self._aead.decrypt(nonce, token[_HEAD_BYTES + _NONCE_BYTES :], head)
        except InvalidTag:
            raise InvalidToken("message not sealed with the cluster secret") from None
        (stamp,) = _STAMP.unpack_from(head, len(VERSION))
        self._opened = (token, stamp, plain)
        return stamp, plain

"""The HA handshake: master and slave prove a shared secret to each other (sans-IO).

RocketMQ's classic HA stream has no authentication at all: whoever reaches a
master's HA port reads its commit log and may report ack offsets, and a slave
appends whatever the peer at the master's address streams. Before that stream
starts, our brokers run a mutual challenge-response over the same connection:

=========  =====================================================  =====
direction  bytes                                                  size
=========  =====================================================  =====
M -> S     ``TAG`` + master nonce (32 random bytes)                40
S -> M     ``TAG`` + slave nonce (32 random bytes) + slave proof   72
M -> S     master proof                                            32
=========  =====================================================  =====

then the classic stream (the slave's first offset report, as before).

* ``TAG`` is ``FF 52 4D 51 48 41 00 01`` (``\\xffRMQHA``, two bytes of version).
  Its first byte makes it a negative int64, so a slave speaking the classic
  stream (ours with ``haAuthEnable=false``) takes the master's greeting for a bad
  transfer header at once instead of waiting; the master, reading a classic
  slave's first report where it expects the tag, refuses it at once too.
* proof = HMAC-SHA256(K, label + TAG + master nonce + slave nonce), with the labels
  ``rocketmq-ha slave proof`` / ``rocketmq-ha master proof``: one side's proof is
  never the other's answer, and both nonces are fresh per connection, so no
  recorded proof answers another connection.
* K = HMAC-SHA256(key ``rocketmq-ha key v1``, the secret): the secret file's text
  without surrounding whitespace, at least :data:`SECRET_BYTES_MIN` of them (a short
  secret could be guessed offline from one recorded handshake).

Every message has a fixed size, so an adapter reads exactly that many bytes
(with a timeout) and hands them over; everything here raises
:class:`HAAuthError` for anything but the right bytes, and compares proofs with
:func:`hmac.compare_digest`. Nothing after the handshake is encrypted or
authenticated (see docs/SECURITY.md, "broker_app's HA port").
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

from broker_app.ha.protocol import HAProtocolError
from remoting.acl import read_secret_file

VERSION = 1
TAG = b"\xffRMQHA" + VERSION.to_bytes(2, "big")
TAG_BYTES = len(TAG)  # 8
NONCE_BYTES = 32
MAC_BYTES = hashlib.sha256().digest_size  # 32
HELLO_BYTES = TAG_BYTES + NONCE_BYTES  # 40, master -> slave
ANSWER_BYTES = TAG_BYTES + NONCE_BYTES + MAC_BYTES  # 72, slave -> master
PROOF_BYTES = MAC_BYTES  # 32, master -> slave
SLAVE_LABEL = b"rocketmq-ha slave proof"
MASTER_LABEL = b"rocketmq-ha master proof"
KEY_LABEL = b"rocketmq-ha key v1"
SECRET_BYTES_MIN = 16


class HAAuthError(HAProtocolError):
    """The peer did not prove the HA secret (or did not speak the handshake)."""


class HAKey:
    """The handshake's HMAC key, derived from the shared secret; never printed."""

    __slots__ = ("_key",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < SECRET_BYTES_MIN:
            raise ValueError(
                f"the HA secret has {len(secret)} bytes; use at least {SECRET_BYTES_MIN} "
                "random bytes (e.g. openssl rand -hex 32)"
            )
        self._key = hmac.new(KEY_LABEL, secret, hashlib.sha256).digest()

    def proof(self, label: bytes, master_nonce: bytes, slave_nonce: bytes) -> bytes:
        """HMAC-SHA256 of ``label + TAG + master_nonce + slave_nonce``."""
        return hmac.new(
            self._key, label + TAG + master_nonce + slave_nonce, hashlib.sha256
        ).digest()

    def __repr__(self) -> str:
        return "HAKey(***)"


def load_key(path: str | Path) -> HAKey:
    """The key of the secret file at ``path``; ValueError saying what is wrong with it.

    The file is read as every secret file is (:func:`remoting.acl.read_secret_file`:
    its text without surrounding whitespace, refused when group or others may read it,
    since whoever reads it can pose as master or slave)."""
    secret = read_secret_file(path, "haSecretFile")
    try:
        return HAKey(secret.encode("utf-8"))
    except ValueError as exc:
        raise ValueError(f"haSecretFile: {Path(path).expanduser()}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class HAAuth:
    """How a broker's HA links authenticate.

    * a key: the handshake, then the classic stream;
    * no key (the default): nothing is replicated, the master refuses every
      peer and the slave does not connect (no haSecretFile);
    * :meth:`classic`: the unauthenticated classic stream (``haAuthEnable=false``).
    """

    key: HAKey | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.key is not None and not self.enabled:
            raise ValueError("an HA key with authentication turned off")

    @classmethod
    def classic(cls) -> HAAuth:
        """RocketMQ's unauthenticated stream, for an operator who asks for it."""
        return cls(None, enabled=False)

    @property
    def refuses(self) -> bool:
        """True when authentication is on but there is no key: no HA link at all."""
        return self.enabled and self.key is None

    def describe(self) -> str:
        """One word for log lines."""
        if not self.enabled:
            return "classic (haAuthEnable=false)"
        return "refused (no haSecretFile)" if self.key is None else "authenticated"


def check_tag(head: bytes, *, peer: str) -> None:
    """Raise :class:`HAAuthError` unless ``head`` (the first 8 bytes a ``peer`` sent) is TAG."""
    if head == TAG:
        return
    if head[:-2] == TAG[:-2]:
        version = int.from_bytes(head[-2:], "big")
        raise HAAuthError(f"{peer} speaks HA handshake version {version}, this broker {VERSION}")
    if peer == "slave" and len(head) == TAG_BYTES and head[0] == 0:
        # A classic slave's first 8 bytes are its offset report.
        raise HAAuthError(
            "slave sent no handshake (a classic report of offset "
            f"{int.from_bytes(head, 'big')}: give it haSecretFile, or set haAuthEnable=false "
            "on master and slave)"
        )
    raise HAAuthError(f"{peer} sent no HA handshake tag (got {head[:TAG_BYTES].hex()})")


def _nonce(given: bytes | None) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES) if given is None else given
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"a nonce has {NONCE_BYTES} bytes")
    return nonce


class MasterHandshake:
    """The master's side: greet, check the slave's answer, prove the secret back."""

    def __init__(self, key: HAKey, *, nonce: bytes | None = None) -> None:
        self._key = key
        self.master_nonce = _nonce(nonce)

    def hello(self) -> bytes:
        """The greeting the master sends first (:data:`HELLO_BYTES`)."""
        return TAG + self.master_nonce

    def answer(self, answer: bytes) -> bytes:
        """Check the slave's :data:`ANSWER_BYTES`; return the master's proof to send."""
        if len(answer) != ANSWER_BYTES:
            raise HAAuthError(f"slave answer has {len(answer)} bytes, not {ANSWER_BYTES}")
        check_tag(answer[:TAG_BYTES], peer="slave")
        slave_nonce = answer[TAG_BYTES : TAG_BYTES + NONCE_BYTES]
        given = answer[TAG_BYTES + NONCE_BYTES :]
        if hmac.compare_digest(slave_nonce, self.master_nonce):
            raise HAAuthError("slave echoed the master's nonce")
        expected = self._key.proof(SLAVE_LABEL, self.master_nonce, slave_nonce)
        if not hmac.compare_digest(given, expected):
            raise HAAuthError("slave proof does not match: the slave has another haSecretFile")
        return self._key.proof(MASTER_LABEL, self.master_nonce, slave_nonce)


class SlaveHandshake:
    """The slave's side: answer the master's greeting, then check the master's proof."""

    def __init__(self, key: HAKey, *, nonce: bytes | None = None) -> None:
        self._key = key
        self.slave_nonce = _nonce(nonce)
        self._master_nonce: bytes | None = None

    def answer(self, hello: bytes) -> bytes:
        """Check the master's :data:`HELLO_BYTES`; return the slave's answer to send."""
        if len(hello) != HELLO_BYTES:
            raise HAAuthError(f"master greeting has {len(hello)} bytes, not {HELLO_BYTES}")
        check_tag(hello[:TAG_BYTES], peer="master")
        master_nonce = hello[TAG_BYTES:]
        if hmac.compare_digest(master_nonce, self.slave_nonce):
            raise HAAuthError("master echoed the slave's nonce")
        self._master_nonce = master_nonce
        proof = self._key.proof(SLAVE_LABEL, master_nonce, self.slave_nonce)
        return TAG + self.slave_nonce + proof

    def check_proof(self, proof: bytes) -> None:
        """Raise :class:`HAAuthError` unless ``proof`` is the master's, for these nonces."""
        if self._master_nonce is None:
            raise HAAuthError("master proof before its greeting")
        if len(proof) != PROOF_BYTES:
            raise HAAuthError(f"master proof has {len(proof)} bytes, not {PROOF_BYTES}")
        expected = self._key.proof(MASTER_LABEL, self._master_nonce, self.slave_nonce)
        if not hmac.compare_digest(proof, expected):
            raise HAAuthError("master proof does not match: the master has another haSecretFile")

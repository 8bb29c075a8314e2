"""The Raft port's transport: PySyncObj's TCP transport with authentication enforced.

PySyncObj sends pickled messages, and unpickling is code execution: a peer that can
put bytes in front of ``pickle.loads`` can run anything on the node. So every peer
must prove the cluster secret before a single byte of its reaches a deserializer.

We use PySyncObj's own encryption for that, with our cipher in place of its Fernet
(:mod:`raftstore.raft.cipher`: AES-256-GCM-SIV, key derived from the secret with
PBKDF2): every message on the wire is sealed, and ``TcpConnection`` verifies the tag
before it decompresses or unpickles anything; a message that fails verification
drops the connection. The
first message of each connection carries a random per-connection key that every
later message must echo, so a recorded message cannot be replayed on another
connection. ``tests/integration/test_raft_port_auth.py`` proves it on a running
cluster: a pickled payload, sent raw or encrypted with a wrong secret, runs nothing.

Two gaps in PySyncObj 0.3.17 that this module closes:

* **Unbounded pre-auth buffering.** A connection buffers whatever length its first
  message claims (up to 2 GiB) before the HMAC can be checked. :class:`GuardedConnection`
  refuses more than :data:`PRE_AUTH_BYTES_MAX` from a peer that has not yet shown it
  holds the secret.
* **Slow pre-auth peers.** PySyncObj's connection timeout counts from the last
  byte read, so a peer sending one byte a second stays forever. The transport
  drops connections that have not identified themselves within
  :data:`PRE_AUTH_DEADLINE_S`.

The utility/status path of PySyncObj (``syncobj_admin``) goes through the same
connections, so it needs the secret too.

Private PySyncObj attributes used here, checked against 0.3.17 (pinned):
``TcpConnection._TcpConnection__processRead``, ``TcpConnection._TcpConnection__readBuffer``,
``TcpConnection._TcpConnection__writeBuffer``, ``TcpConnection._TcpConnection__trySendBuffer``,
``TcpConnection.sendRandKey``, ``TcpConnection.encryptor``, ``TCPTransport._connections``,
``TCPTransport._unknownConnections``, ``TCPTransport._onNewIncomingConnection`` and
``TCPTransport._onTick``.
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from collections.abc import Mapping
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

log = logging.getLogger(__name__)

SECRET_CHARS_MIN = 16
"""A cluster secret shorter than this is refused: it is a key, not a password."""
PRE_AUTH_BYTES_MAX = 4096
"""What a peer may have buffered before it has proven the secret. Its first message
(an encrypted 32-byte random key) is about 200 bytes."""
PRE_AUTH_DEADLINE_S = 5.0
"""A new incoming connection must prove the secret and name its node within this."""
COMPRESS_MIN_BYTES = 16 * 1024
"""Messages this big or bigger are deflated (level 1); smaller ones are sent stored."""
ACK_REPEAT_S = 0.2
"""A follower answers every AppendEntries; an answer that only repeats its last one
to the same leader (same next index, success, no reset) goes out at most this often.
Those repeats answer the commit-index round the leader sends after each apply and
every heartbeat: at 200 registrations/s they were a third of the leader's messages,
and the leader's only use of them is the time of the last answer, which decides
whether it still has a majority (``leader_fallback_timeout_s``, ten times longer).
An answer that moves the match index (new entries) always goes at once."""


def check_secret(secret: str) -> str:
    """``secret`` if it is usable as the cluster secret, else ValueError."""
    if len(secret) < SECRET_CHARS_MIN:
        raise ValueError(
            f"the Raft cluster secret must have at least {SECRET_CHARS_MIN} characters "
            f"(it has {len(secret)}); generate one, e.g. `openssl rand -hex 32`"
        )
    return secret


class GuardedConnection(TcpConnection):  # type: ignore[misc]
    """A ``TcpConnection`` that stops buffering a peer that has not proven the secret,
    and compresses only the messages worth it.

    ``sendRandKey`` is set once the peer's first message has passed the cipher's tag
    check (on both incoming and outgoing connections): until then the peer is
    unauthenticated and gets at most :data:`PRE_AUTH_BYTES_MAX` of buffer.

    PySyncObj deflates every message at level 3. For the small messages of light load
    (a heartbeat, an acknowledgement, one command) that cost more than sending the
    bytes: the light commit p50 of ``bench/raft_write.py`` went from 1.9 to 1.5 ms
    without it. Messages of :data:`COMPRESS_MIN_BYTES` or more (batches of entries) are
    deflated at level 1: sent raw, a 256 KiB batch made PySyncObj's receive buffer,
    which grows by concatenation, the bottleneck. The receiver inflates either.
    """

    def send(self, message: Any) -> None:
        """PySyncObj's ``TcpConnection.send`` with the compression level chosen by size."""
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        raw = pysyncobj_pickle.dumps(message)
        data = zlib.compress(raw, 0 if len(raw) < COMPRESS_MIN_BYTES else 1)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic()))
        self._TcpConnection__writeBuffer += struct.pack("i", len(data)) + data
        self._TcpConnection__trySendBuffer()

    def _TcpConnection__processRead(self) -> bool:
        more: bool = super()._TcpConnection__processRead()
        if self.sendRandKey is None and len(self._TcpConnection__readBuffer) > PRE_AUTH_BYTES_MAX:
            log.warning(
                "raft port: dropping an unauthenticated peer that sent %d bytes "
                "before proving the cluster secret",
                len(self._TcpConnection__readBuffer),
            )
            self.disconnect()
            return False
        return more


class RaftTransport(TCPTransport):  # type: ignore[misc]
    """PySyncObj's TCP transport with the pre-auth guards, durable sends and the
    follower-side trimming of re-sent entries (see :mod:`raftstore.raft.append`).

    The owning SyncObj must provide ``durability`` (journal flushes) and
    ``trim_append_entries``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._accepted_at: dict[Any, float] = {}
        self._last_ack: dict[Any, tuple[int, float]] = {}
        self.acks_thinned = 0
        super().__init__(*args, **kwargs)

    def addNode(self, node: Any) -> None:
        """PySyncObj's ``addNode``; the outgoing connection it makes is guarded too."""
        super().addNode(node)
        conn = self._connections.get(node)
        if conn is not None and type(conn) is TcpConnection:
            conn.__class__ = GuardedConnection

    def _onNewIncomingConnection(self, conn: Any) -> None:
        # The connection has been accepted but nothing has been read yet: switch it
        # to the guarded reader before its first byte arrives.
        conn.__class__ = GuardedConnection
        self._accepted_at[conn] = time.monotonic()
        super()._onNewIncomingConnection(conn)

    def _onTick(self) -> None:
        super()._onTick()
        if not self._accepted_at:
            return
        now = time.monotonic()
        for conn, accepted_at in list(self._accepted_at.items()):
            if conn not in self._unknownConnections:
                del self._accepted_at[conn]  # identified (or already gone)
            elif now - accepted_at > PRE_AUTH_DEADLINE_S:
                del self._accepted_at[conn]
                log.warning("raft port: dropping a peer that did not authenticate in time")
                self._unknownConnections.discard(conn)
                conn.disconnect()

    def send(self, node: Any, message: Any) -> Any:
        """Make the log durable before a follower acknowledges it, and the vote before
        it leaves, then send. A leader's new entries leave unflushed: its own flush
        runs while the followers write theirs (see ``RouteLog._onTick``)."""
        if isinstance(message, dict):
            kind = message.get("type")
            if kind == "next_node_idx" and message.get("success"):
                self._syncObj.durability.flush_journal()
                if not message.get("reset") and self._repeats_last_ack(node, message):
                    self.acks_thinned += 1
                    return True
            elif kind in ("request_vote", "response_vote"):
                self._syncObj.durability.sync_meta()
        return super().send(node, message)

    def _repeats_last_ack(self, node: Any, message: Mapping[str, Any]) -> bool:
        """True when this acknowledgement only repeats the last one sent to ``node``
        less than :data:`ACK_REPEAT_S` ago (see there); otherwise it is remembered."""
        now = time.monotonic()
        next_index = int(message["next_node_idx"])
        last = self._last_ack.get(node)
        if last is not None and last[0] == next_index and now - last[1] < ACK_REPEAT_S:
            return True
        self._last_ack[node] = (next_index, now)
        return False

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        """Trim re-sent entries this follower already holds (see raftstore.raft.append)."""
        if isinstance(message, dict) and message.get("type") == "append_entries":
            message = self._syncObj.trim_append_entries(message)
        super()._onMessageReceived(node, message)


def conf_security(self_addr: str, bind_host: str | None, secret: str) -> Mapping[str, str]:
    """The SyncObjConf keys that bind the Raft port and require the secret."""
    host, _, port = self_addr.rpartition(":")
    return {"bindAddress": f"{bind_host or host}:{port}", "password": check_secret(secret)}

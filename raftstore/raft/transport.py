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

One gap that made every failover slow:

* **Follower links that time out when an election needs them.** Followers send each
  other nothing while a leader lives, and PySyncObj closes a connection on which
  nothing was read for ``connectionTimeout`` (3 s) only when something is next sent
  on it. So the first message between two followers after a leader's death, the
  candidate's RequestVote, closed their link and was lost, and the election took a
  second round (docs/BENCHMARKS.md, "The first failover"). Every member now sends
  each connected peer it has sent nothing for :data:`KEEPALIVE_S` a one-key
  ``keepalive`` message, which the receiver drops unread (PySyncObj ignores message
  types it does not know, so older members do too); a link that really died is still
  closed by the same timeout.

And one gap in how the port survives running out of descriptors:

* **The port unbound for good.** PySyncObj's ``TcpServer`` closes its listening
  socket at the first failed ``accept`` (EMFILE when the process is out of
  descriptors) and never binds it again, so peers whose connections were cut could
  never reconnect (docs/BENCHMARKS.md, "a descriptor flood").
  :class:`RaftPortServer` keeps the socket and pauses accepting instead
  (:data:`ACCEPT_PAUSE_MIN_S`, doubling up to :data:`ACCEPT_PAUSE_MAX_S`), logging at
  most ten lines per 10 s; if the socket is closed anyway (an error event on it), it
  is bound again every ``bindRetryTime`` from the transport's tick. (Not through
  PySyncObj's own ``_ready`` flag: while it is False a node runs no tick at all, so
  it would stop heartbeats and reading its peers until the bind succeeds.) Outgoing
  connects that fail the same way are logged within the same allowance instead of
  failing the tick.
  Unauthenticated callers are bounded, so they cannot take the descriptors
  themselves; see below.

And one gap in how a member gets back in while others flood the port:

* **Members evicted by strangers.** Callers that have not proven the secret were
  bounded as one crowd (32, the oldest dropped first), so a connect flood from anywhere
  dropped a reconnecting member's connection before its first message was read, again
  and again. Now a caller's address decides its crowd before it has sent a byte
  (:meth:`RaftTransport._onNewIncomingConnection`): callers from an address no member
  has share :data:`UNAUTHENTICATED_MAX` slots, the oldest dropped first; callers from a
  member's address (its Raft identity's host, resolved) have
  :data:`MEMBER_CALLERS_MAX` slots per member there, of their own, which no stranger
  ever takes or counts against. A member therefore connects and proves the secret
  however many unauthenticated connections others hold. Only a flood from a member's
  own address (its host, or the loopback address a local cluster's members share)
  competes with it, within that address's slots, the oldest dropped first.

Private PySyncObj attributes used here, checked against 0.3.17 (pinned):
``TcpConnection._TcpConnection__processRead``, ``TcpConnection._TcpConnection__readBuffer``,
``TcpConnection._TcpConnection__writeBuffer``, ``TcpConnection._TcpConnection__trySendBuffer``,
``TcpConnection.sendRandKey``, ``TcpConnection.encryptor``, ``TCPTransport._connections``,
``TCPTransport._unknownConnections``, ``TCPTransport._onNewIncomingConnection``,
``TCPTransport._onIncomingMessageReceived``, ``TCPTransport._onDisconnected``,
``TCPTransport._nodes``,
``TCPTransport._onTick``, ``TCPTransport._server``, ``TCPTransport._ready``,
``TCPTransport._syncObj``, ``TCPTransport._createServer``,
``TCPTransport._connectIfNecessarySingle``, and
``TcpServer``'s ``_TcpServer__onNewConnection`` (replaced), ``_TcpServer__socket``,
``_TcpServer__fileno``, ``_TcpServer__state``, ``_TcpServer__poller``,
``_TcpServer__sendBufferSize``, ``_TcpServer__recvBufferSize``,
``_TcpServer__connectionTimeout``, ``_TcpServer__keepalive`` and
``_TcpServer__onNewConnectionCallback``.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import struct
import time
import zlib
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.monotonic import monotonic
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import SERVER_STATE, TcpServer
from pysyncobj.transport import TCPTransport

from remoting.limits import RefusalLog

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
ACCEPT_PAUSE_MIN_S = 0.05
ACCEPT_PAUSE_MAX_S = 1.0
"""How long the Raft port stops accepting after a failed accept (doubling from the
first to the second); it resumes at the first tick after that."""
ACCEPT_BATCH_MAX = 16
"""Connections accepted per readiness event (PySyncObj accepts one per poll)."""
RAFT_ACCEPT_BACKLOG = 128
"""PySyncObj listens with a backlog of 5: a burst of callers then drops peers' SYNs."""
UNAUTHENTICATED_MAX = 32
"""Incoming connections from addresses of no member that have not yet proven the
secret; past it the oldest is dropped. A real peer proves it in its first message,
milliseconds after connecting."""
MEMBER_CALLERS_MAX = 4
"""Per member at an address: incoming connections from that address that have not yet
proven the secret, apart from the strangers' :data:`UNAUTHENTICATED_MAX`. A member dials
once per ``connectionRetryTime`` and proves the secret in its first message, so it
needs one; a few cover retries whose earlier attempt is still being cut."""
MEMBER_ADDRESSES_TTL_S = 60.0
"""How long the members' resolved addresses are used before they are resolved again
(PySyncObj's resolver caches a name for 600 s; an IP identity needs no resolving)."""
KEEPALIVE_S = 1.0
"""A member sends each connected peer a ``keepalive`` after this long without
sending it anything: well inside the 3 s connection timeout."""
KEEPALIVE = {"type": "keepalive"}
PORT_LISTENING = "listening"
PORT_PAUSED = "paused"
PORT_NOT_LISTENING = "not listening"
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


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
    ``peer_host`` is the caller's IP address on an incoming connection (set by
    :class:`RaftPortServer`), empty on an outgoing one.

    PySyncObj deflates every message at level 3. For the small messages of light load
    (a heartbeat, an acknowledgement, one command) that costs more than sending the
    bytes (see docs/BENCHMARKS.md, "Tables left out of the log, the leader's flush
    overlapped"). Messages of :data:`COMPRESS_MIN_BYTES` or more (batches of entries)
    are deflated at level 1: sent raw, a 256 KiB batch made PySyncObj's receive
    buffer, which grows by concatenation, the bottleneck. The receiver inflates either.
    """

    peer_host = ""

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


class RaftPortServer(TcpServer):  # type: ignore[misc]
    """PySyncObj's ``TcpServer`` whose listening socket survives a failed accept.

    Made by class swap from the transport's own server (``RaftTransport._createServer``);
    the attributes below are set by :meth:`adopt`. Tick thread only."""

    refusals: RefusalLog
    accept_pauses: int
    rebinds: int
    _resume_at: float | None
    _pause_s: float
    _bind_at: float | None

    def adopt(self, refusals: RefusalLog) -> None:
        """Set this class's state on a server made as a plain ``TcpServer``."""
        self.refusals = refusals
        self.accept_pauses = 0
        self.rebinds = 0
        self._resume_at = None
        self._pause_s = ACCEPT_PAUSE_MIN_S
        self._bind_at = None

    def bind(self) -> None:
        """PySyncObj's bind, with a backlog that holds a burst of callers."""
        super().bind()
        self._TcpServer__socket.listen(RAFT_ACCEPT_BACKLOG)
        self._resume_at = None

    @property
    def state(self) -> str:
        """``listening``, ``paused`` (bound, not accepting for now) or ``not listening``."""
        if self._TcpServer__state != SERVER_STATE.BINDED:
            return PORT_NOT_LISTENING
        return PORT_LISTENING if self._resume_at is None else PORT_PAUSED

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        if event & POLL_EVENT_TYPE.ERROR:
            self.refusals.warning(
                time.monotonic(), "raft port: error on the listening socket: binding it again"
            )
            self.unbind()
            return
        if event & POLL_EVENT_TYPE.READ:
            for _ in range(ACCEPT_BATCH_MAX):
                if not self._accept_one():
                    return

    def _accept_one(self) -> bool:
        """Accept one caller; False when there is none now or accepting paused."""
        try:
            sock, address = self._TcpServer__socket.accept()
        except (BlockingIOError, InterruptedError):
            return False
        except ConnectionAbortedError:
            return True
        except OSError as exc:
            self._pause(exc)
            return False
        self._pause_s = ACCEPT_PAUSE_MIN_S
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._TcpServer__sendBufferSize)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._TcpServer__recvBufferSize)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            conn = GuardedConnection(
                poller=self._TcpServer__poller,
                socket=sock,
                timeout=self._TcpServer__connectionTimeout,
                sendBufferSize=self._TcpServer__sendBufferSize,
                recvBufferSize=self._TcpServer__recvBufferSize,
                keepalive=self._TcpServer__keepalive,
            )
        except OSError as exc:
            # The caller hung up already (setsockopt on a reset socket): it alone is lost.
            sock.close()
            self.refusals.warning(time.monotonic(), "raft port: dropped a caller: %s", exc)
            return True
        conn.peer_host = ip_text(address[0]) if isinstance(address, tuple) else ""
        self._TcpServer__onNewConnectionCallback(conn)
        return True

    def _pause(self, exc: OSError) -> None:
        """Stop polling the listening socket (it stays bound) until :meth:`resume_if_due`."""
        delay_s = self._pause_s
        self._pause_s = min(ACCEPT_PAUSE_MAX_S, delay_s * 2)
        if self._resume_at is None:
            self.accept_pauses += 1
        self._resume_at = time.monotonic() + delay_s
        self._TcpServer__poller.unsubscribe(self._TcpServer__fileno)
        why = "out of descriptors" if exc.errno in _RESOURCE_ERRNOS else "accept failed"
        self.refusals.warning(
            time.monotonic(),
            "raft port: %s (%s): not accepting for %.2f s; the port stays bound",
            why,
            exc,
            delay_s,
        )

    def keep_listening(self, now: float, retry_s: float) -> None:
        """Each tick once the port was first bound: resume a paused port, and bind a
        closed one again, at most every ``retry_s``."""
        self.resume_if_due(now)
        if self._TcpServer__state == SERVER_STATE.BINDED:
            return
        if self._bind_at is None:
            self.refusals.warning(now, "raft port: not listening: binding it again")
        elif now < self._bind_at:
            return
        self._bind_at = now + retry_s
        try:
            self.bind()
        except OSError as exc:
            # PySyncObj keeps the socket it failed to bind: close it now, not at collection.
            self._TcpServer__socket.close()
            self.refusals.warning(now, "raft port: cannot bind it again yet: %s", exc)
            return
        self._bind_at = None
        self.rebinds += 1
        log.info("raft port: listening again")

    def resume_if_due(self, now: float) -> None:
        """Accept again once the pause is over (each tick)."""
        resume_at = self._resume_at
        if resume_at is None or now < resume_at or self._TcpServer__fileno is None:
            return
        self._resume_at = None
        self._TcpServer__poller.subscribe(
            self._TcpServer__fileno,
            self._TcpServer__onNewConnection,
            POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR,
        )


class RaftTransport(TCPTransport):  # type: ignore[misc]
    """PySyncObj's TCP transport with the pre-auth guards, durable sends and the
    follower-side trimming of re-sent entries (see :mod:`raftstore.raft.append`).

    The owning SyncObj must provide ``durability`` (journal flushes) and
    ``trim_append_entries``.
    """

    _ready: bool  # PySyncObj's: True once the port was first bound (no tick runs before)
    _server: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Incoming connections not yet identified, by crowd (the member address they
        # came from; None: an address of no member), oldest first, with when each was
        # accepted; and each one's crowd.
        self._crowds: dict[str | None, dict[Any, float]] = {}
        self._crowd_of: dict[Any, str | None] = {}
        self._member_addresses: Counter[str] = Counter()
        self._member_addresses_at: float | None = None
        self._last_ack: dict[Any, tuple[int, float]] = {}
        self._last_sent: dict[Any, float] = {}
        self.acks_thinned = 0
        self.keepalives_sent = 0
        self.port_refusals = RefusalLog(logger=log)
        super().__init__(*args, **kwargs)

    def _createServer(self) -> None:
        super()._createServer()
        self._server.__class__ = RaftPortServer
        self._server.adopt(self.port_refusals)

    @property
    def port_state(self) -> str:
        """The Raft port: ``listening``, ``paused`` or ``not listening``."""
        server = self._server
        if not isinstance(server, RaftPortServer) or not self._ready:
            return PORT_NOT_LISTENING
        return server.state

    @property
    def accept_pauses(self) -> int:
        """Times the Raft port stopped accepting after a failed accept."""
        server = self._server
        return server.accept_pauses if isinstance(server, RaftPortServer) else 0

    @property
    def rebinds(self) -> int:
        """Times the Raft port was bound again after it had closed."""
        server = self._server
        return server.rebinds if isinstance(server, RaftPortServer) else 0

    def _connectIfNecessarySingle(self, node: Any) -> bool:
        try:
            return bool(super()._connectIfNecessarySingle(node))
        except OSError as exc:
            # Out of descriptors: PySyncObj would fail the whole tick, with a traceback
            # each; the connect is tried again after connectionRetryTime.
            self.port_refusals.warning(
                time.monotonic(), "raft: cannot connect to %s: %s", node, exc
            )
            return False

    def addNode(self, node: Any) -> None:
        """PySyncObj's ``addNode``; the outgoing connection it makes is guarded too."""
        super().addNode(node)
        self._member_addresses_at = None  # a new member: its address counts at once
        conn = self._connections.get(node)
        if conn is not None and type(conn) is TcpConnection:
            conn.__class__ = GuardedConnection

    def dropNode(self, node: Any) -> None:
        """PySyncObj's ``dropNode``; the member's address stops counting as one."""
        super().dropNode(node)
        self._member_addresses_at = None

    def members_at(self, host: str) -> int:
        """How many members (other than this node) have ``host`` as their Raft
        identity's address; resolved names are kept :data:`MEMBER_ADDRESSES_TTL_S`."""
        now = time.monotonic()
        checked_at = self._member_addresses_at
        if checked_at is None or now - checked_at > MEMBER_ADDRESSES_TTL_S:
            self._member_addresses = Counter(
                address
                for node in self._nodes
                if isinstance(node, TCPNode) and (address := member_address(node.host))
            )
            self._member_addresses_at = now
        return self._member_addresses.get(host, 0) if host else 0

    @property
    def callers_waiting(self) -> int:
        """Incoming connections that have not identified themselves yet."""
        return len(self._crowd_of)

    def _onNewIncomingConnection(self, conn: Any) -> None:
        # The connection has been accepted but nothing has been read yet: switch it
        # to the guarded reader before its first byte arrives, and put it in its crowd
        # by the address it came from (the only thing known of it yet).
        conn.__class__ = GuardedConnection
        host = conn.peer_host
        members = self.members_at(host)
        crowd = host if members else None
        waiting = self._crowds.setdefault(crowd, {})
        waiting[conn] = time.monotonic()
        self._crowd_of[conn] = crowd
        super()._onNewIncomingConnection(conn)
        cap = MEMBER_CALLERS_MAX * members if members else UNAUTHENTICATED_MAX
        while len(waiting) > cap:
            self._drop_caller(next(iter(waiting)), crowd, cap)

    def _drop_caller(self, conn: Any, crowd: str | None, cap: int) -> None:
        """Drop ``conn``, the oldest of ``crowd`` past its ``cap``."""
        self._forget_caller(conn)
        if conn not in self._unknownConnections:
            return  # identified meanwhile: a peer, not a caller to drop
        self._unknownConnections.discard(conn)
        conn.disconnect()
        if crowd is None:
            self.port_refusals.warning(
                time.monotonic(),
                "raft port: %d callers from addresses of no member have not proven "
                "the secret: dropping the oldest",
                cap,
            )
        else:
            self.port_refusals.warning(
                time.monotonic(),
                "raft port: %d callers from %s, a member's address, have not proven "
                "the secret: dropping the oldest",
                cap,
                crowd,
            )

    def _forget_caller(self, conn: Any) -> None:
        """``conn`` is no longer waiting to identify itself (idempotent)."""
        if conn not in self._crowd_of:
            return
        crowd = self._crowd_of.pop(conn)
        waiting = self._crowds[crowd]
        del waiting[conn]
        if not waiting:
            del self._crowds[crowd]

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        # PySyncObj's handling of an incoming connection's first messages (its random
        # key, then its node's address); once identified it no longer waits.
        super()._onIncomingMessageReceived(conn, message)
        if conn not in self._unknownConnections:
            self._forget_caller(conn)

    def _onDisconnected(self, conn: Any) -> None:
        self._forget_caller(conn)
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        # Runs only once PySyncObj bound the port first (_ready): from then on the port
        # is ours to keep (see RaftPortServer.keep_listening).
        server = self._server
        if isinstance(server, RaftPortServer):
            server.keep_listening(time.monotonic(), self._syncObj.conf.bindRetryTime)
        super()._onTick()
        now = time.monotonic()
        self._keep_links_alive(now)
        for waiting in list(self._crowds.values()):
            for conn, accepted_at in list(waiting.items()):
                if conn not in self._unknownConnections:
                    self._forget_caller(conn)  # identified (or already gone)
                elif now - accepted_at > PRE_AUTH_DEADLINE_S:
                    self._forget_caller(conn)
                    self._unknownConnections.discard(conn)
                    conn.disconnect()
                    self.port_refusals.warning(
                        now, "raft port: dropping a peer that did not authenticate in time"
                    )

    def _keep_links_alive(self, now: float) -> None:
        """A ``keepalive`` to each connected peer not sent anything for KEEPALIVE_S."""
        for node, conn in self._connections.items():
            if conn.state != CONNECTION_STATE.CONNECTED:
                continue
            if now - self._last_sent.get(node, 0.0) >= KEEPALIVE_S:
                self.keepalives_sent += 1
                self.send(node, KEEPALIVE)

    def send(self, node: Any, message: Any) -> Any:
        """Make the log durable before a follower acknowledges it, and the vote before
        it leaves, then send. A leader's new entries leave unflushed: its own flush
        runs while the followers write theirs (see ``RouteLog._onTick``)."""
        self._last_sent[node] = time.monotonic()
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
        """Trim re-sent entries this follower already holds (see raftstore.raft.append);
        a ``keepalive`` has done its work by being read."""
        if isinstance(message, dict):
            kind = message.get("type")
            if kind == "keepalive":
                return
            if kind == "append_entries":
                message = self._syncObj.trim_append_entries(message)
        super()._onMessageReceived(node, message)


def ip_text(host: str) -> str:
    """``host`` as an IP address in its usual text (an IPv4-mapped IPv6 address as
    IPv4), or unchanged when it is not one."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def member_address(host: str) -> str | None:
    """The IP address a member whose Raft identity's host is ``host`` connects from:
    the host itself when it is an address, else what it resolves to (PySyncObj's
    caching resolver; None when it does not resolve). A member that connects from
    another of its addresses is one more stranger, as every caller was before."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        resolved = globalDnsResolver().resolve(host)
        return None if resolved is None else ip_text(resolved)
    return ip_text(host)


def conf_security(self_addr: str, bind_host: str | None, secret: str) -> Mapping[str, str]:
    """The SyncObjConf keys that bind the Raft port and require the secret."""
    host, _, port = self_addr.rpartition(":")
    return {"bindAddress": f"{bind_host or host}:{port}", "password": check_secret(secret)}

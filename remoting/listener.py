"""Accepting connections within a budget of descriptors.

A process has a fixed number of descriptors (``RLIMIT_NOFILE``). Measured on a
gateway before this module: about 20,000 hostile connections ran it to its limit;
then PySyncObj's Raft server unbound its port for good, the Raft journal's
metadata could not be written, and asyncio logged a traceback per failed accept.
So every public listener of a process accepts only while a slot of one
:class:`ConnectionBudget` is free, and the budget is set well below the
descriptor limit, leaving room for what the process needs besides its clients.

:class:`Listener` is the accept loop (asyncio's ``create_server`` cannot be told
to stop accepting):

* at the budget's capacity it stops reading its listening socket, so new peers
  wait in the kernel's backlog, and starts again as soon as a connection of the
  process closes;
* when ``accept`` fails for want of descriptors or memory (EMFILE, ENFILE,
  ENOBUFS, ENOMEM) or for any other reason, it pauses too, and resumes when a
  connection closes or after a backoff (``ACCEPT_BACKOFF_MIN_S``, doubling up to
  ``ACCEPT_BACKOFF_MAX_S``);
* every pause is logged through a rate-limited log (``remoting.limits.RefusalLog``),
  never a traceback per accept.

An accepted socket holds its :class:`Slot` from ``accept`` until its connection
is lost; whatever happens between the two (the optional asynchronous
:data:`Prepare` step, where TLS peeks at the first byte, then the handshake) counts
against the budget and is bounded in time.

:func:`raise_open_files_limit` raises the soft descriptor limit to the hard one
at process start and sizes the process budget from it
(:func:`default_connections_max`); ``NAMESRV_CONNECTIONS_MAX`` overrides the size.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import ssl
import stat
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from remoting.limits import configured_connections_per_prefix_max

log = logging.getLogger(__name__)

CONNECTIONS_MAX_ENV = "NAMESRV_CONNECTIONS_MAX"
"""Environment variable: the process's connection cap (default: from the limit)."""
DESCRIPTORS_RESERVED = 256
"""Descriptors kept outside the cap for what a node needs besides its clients: the
interpreter and its libraries, the Raft port with its peers and unauthenticated
callers, the journal and its metadata, the projection's database, the internal and
metrics ports, hand-overs in flight, the gateway's own outgoing connections."""
DESCRIPTORS_RESERVED_DIVISOR = 8
"""And an eighth of the limit on top, so a large limit keeps a proportionate margin."""
CONNECTIONS_MAX_FLOOR = 16
"""A cap below this serves nobody; a limit that small is a configuration error."""
NR_OPEN_PATH = "/proc/sys/fs/nr_open"
NR_OPEN_DEFAULT = 1 << 20
"""Linux's default ceiling for a soft limit when the hard one is unlimited."""
ACCEPT_BATCH_MAX = 64
"""Sockets accepted per readiness event, so a burst does not hold the loop."""
ACCEPT_BACKOFF_MIN_S = 0.05
ACCEPT_BACKOFF_MAX_S = 1.0
PREPARE_TIMEOUT_S = 15.0
"""How long an accepted socket may spend in its :data:`Prepare` step."""
SSL_HANDSHAKE_TIMEOUT_S = 10.0
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""Accept failures that mean the process or the host is out of descriptors/memory."""
PAUSE_AT_CAP = "at the connection cap"
PAUSE_OUT_OF_DESCRIPTORS = "out of descriptors"
PAUSE_ACCEPT_FAILED = "accept failed"
UNIX_CONNECT_TIMEOUT_S = 5.0
UNIX_CONNECT_RETRY_MIN_S = 0.001
UNIX_CONNECT_RETRY_MAX_S = 0.05

Prepare = Callable[[socket.socket], Awaitable[ssl.SSLContext | None]]
"""The step between ``accept`` and the protocol: given the accepted (non-blocking)
socket, the TLS context to wrap it in, or None to serve it in plain text; raises
OSError (ConnectionError) when the socket is not to be served. It must not read
from the socket (peeking is fine): the protocol gets every byte."""

AcceptHandler = Callable[[socket.socket, "Slot"], Awaitable[None]]
"""What a :class:`Listener` does with an accepted socket: it owns the socket and
its slot from the call on, and must close and release both when it fails (the
listener does so too if it raises)."""


class BudgetExhausted(ConnectionError):
    """No slot of the connection budget is free for a connection (it was closed)."""


class RateLimitedLog(Protocol):
    """A log that writes at most so many lines per interval (``remoting.limits.RefusalLog``)."""

    def warning(self, now_s: float, message: str, *args: object) -> bool:
        """Log ``message % args`` unless the allowance is spent; True if logged."""
        ...


class Slot:
    """One connection's place in a :class:`ConnectionBudget`; :meth:`release` once."""

    __slots__ = ("_budget",)

    def __init__(self, budget: ConnectionBudget) -> None:
        self._budget: ConnectionBudget | None = budget

    def release(self) -> None:
        """Give the place back (later calls do nothing)."""
        budget, self._budget = self._budget, None
        if budget is not None:
            budget._release()

    @property
    def held(self) -> bool:
        """True until released."""
        return self._budget is not None


class ConnectionBudget:
    """How many connections a process (or one port) may hold at once.

    Any thread may acquire and release; a listener paused at the capacity is woken
    on its own event loop when a slot frees.
    """

    def __init__(self, capacity: int) -> None:
        """A budget of ``capacity`` slots; ValueError unless it is positive."""
        if capacity <= 0:
            raise ValueError(f"a connection budget must be positive, got {capacity}")
        self._capacity = capacity
        self._in_use = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []
        self.refused = 0
        """Acquisitions refused because no slot (beyond the reserve asked) was free."""
        self.pauses: dict[str, int] = {
            PAUSE_AT_CAP: 0,
            PAUSE_OUT_OF_DESCRIPTORS: 0,
            PAUSE_ACCEPT_FAILED: 0,
        }
        """Times a listener of this budget stopped accepting, by reason."""

    @property
    def capacity(self) -> int:
        """The most slots held at once."""
        return self._capacity

    @property
    def in_use(self) -> int:
        """Slots held now."""
        return self._in_use

    @property
    def available(self) -> int:
        """Slots free now."""
        return max(0, self._capacity - self._in_use)

    def resize(self, capacity: int) -> None:
        """Change the capacity (held slots stay held); wakes waiters if it grew."""
        if capacity <= 0:
            raise ValueError(f"a connection budget must be positive, got {capacity}")
        with self._lock:
            self._capacity = capacity
        self._wake()

    def acquire(self, reserve: int = 0) -> Slot | None:
        """A slot, or None when fewer than ``reserve`` + 1 are free."""
        with self._lock:
            if self._in_use + reserve >= self._capacity:
                self.refused += 1
                return None
            self._in_use += 1
        return Slot(self)

    def when_released(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, on the running loop, when a slot is next released
        (registering the same callback twice calls it once)."""
        waiter = (asyncio.get_running_loop(), callback)
        with self._lock:
            if waiter not in self._waiters:
                self._waiters.append(waiter)

    def forget(self, callback: Callable[[], None]) -> None:
        """Drop ``callback`` from the waiters (a listener that closed)."""
        with self._lock:
            self._waiters = [w for w in self._waiters if w[1] != callback]

    def _release(self) -> None:
        with self._lock:
            self._in_use -= 1
        if self._waiters:
            self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, callback in waiters:
            # The loop may be gone (a test's loop closed with its server still listed).
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(callback)


def default_connections_max(open_files: int, descriptors_per_connection: int = 1) -> int:
    """The connection cap for a process allowed ``open_files`` descriptors: the limit
    less :data:`DESCRIPTORS_RESERVED` and an eighth, divided among the descriptors
    each connection may hold (2 for the read front: the client and its link)."""
    usable = open_files - DESCRIPTORS_RESERVED - open_files // DESCRIPTORS_RESERVED_DIVISOR
    return max(CONNECTIONS_MAX_FLOOR, usable // max(1, descriptors_per_connection))


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE in force (unlimited read as Linux's ``nr_open``)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _nr_open() if soft == resource.RLIM_INFINITY else int(soft)


def _nr_open() -> int:
    try:
        with open(NR_OPEN_PATH, encoding="ascii") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return NR_OPEN_DEFAULT


def configured_connections_max(descriptors_per_connection: int = 1) -> int:
    """The process's cap: ``NAMESRV_CONNECTIONS_MAX`` if set (divided as
    :func:`default_connections_max` divides), else derived from the limit in force;
    ValueError when the variable is not a positive integer."""
    text = os.environ.get(CONNECTIONS_MAX_ENV, "").strip()
    if not text:
        return default_connections_max(open_files_limit(), descriptors_per_connection)
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"{CONNECTIONS_MAX_ENV} must be a positive integer, got {text!r}")
    return max(1, int(text) // max(1, descriptors_per_connection))


_process_budget: ConnectionBudget | None = None
_process_budget_lock = threading.Lock()


def process_budget() -> ConnectionBudget:
    """The budget every public listener of this process shares (made on first use)."""
    global _process_budget
    with _process_budget_lock:
        if _process_budget is None:
            _process_budget = ConnectionBudget(configured_connections_max())
        return _process_budget


@dataclass(frozen=True, slots=True)
class OpenFiles:
    """The descriptor limit in force after :func:`raise_open_files_limit`."""

    soft: int
    hard: int
    before: int
    connections_max: int


def raise_open_files_limit(*, descriptors_per_connection: int = 1) -> OpenFiles:
    """At process start: raise the soft RLIMIT_NOFILE to the hard one where allowed,
    size :func:`process_budget` from the result and log both.

    ``descriptors_per_connection``: 2 in the read front, whose clients may each hold
    a link to the gateway as well. ValueError when ``NAMESRV_CONNECTIONS_MAX`` or
    ``NAMESRV_CONNECTIONS_PER_PREFIX_MAX`` (remoting/limits.py) is bad.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = open_files_limit()
    target = _nr_open() if hard == resource.RLIM_INFINITY else int(hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, target, exc)
    cap = configured_connections_max(descriptors_per_connection)
    # Read here too, so a bad value stops the process at start with one line.
    per_prefix = configured_connections_per_prefix_max()
    process_budget().resize(cap)
    now = open_files_limit()
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    log.info(
        "open files limit %d (was %d, hard %s): at most %d connections on this process's "
        "public ports%s, %d per /24 or /64 prefix",
        now,
        before,
        hard_text,
        cap,
        f" ({CONNECTIONS_MAX_ENV})" if os.environ.get(CONNECTIONS_MAX_ENV) else "",
        per_prefix,
    )
    if cap * descriptors_per_connection > now - CONNECTIONS_MAX_FLOOR:
        log.warning(
            "%d connections may need more descriptors than the limit of %d: accepts "
            "will pause on EMFILE; raise LimitNOFILE or lower %s",
            cap,
            now,
            CONNECTIONS_MAX_ENV,
        )
    return OpenFiles(now, -1 if hard == resource.RLIM_INFINITY else int(hard), before, cap)


class Listener:
    """The accept loop of one listening socket, within ``budget`` (see the module
    docstring): each accepted socket goes to ``handler`` with its slot."""

    def __init__(
        self,
        sock: socket.socket,
        handler: AcceptHandler,
        *,
        budget: ConnectionBudget,
        refusals: RateLimitedLog,
        name: str = "",
        reserve: int = 0,
        log_at_cap: bool = True,
    ) -> None:
        """A listener on ``sock`` (already listening); ``reserve`` slots of the budget
        are left to others (accepts pause while no more than that are free).
        ``log_at_cap`` False: a pause at the budget's capacity is flow control, not
        worth a line (failed accepts are always logged)."""
        self.sock = sock
        self.budget = budget
        self.name = name or _describe(sock)
        self.reserve = reserve
        self.log_at_cap = log_at_cap
        self._handler = handler
        self._refusals = refusals
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading = False
        self._closed = False
        self._paused: str | None = None
        self._backoff_s = ACCEPT_BACKOFF_MIN_S
        self._retry: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0

    @property
    def paused(self) -> str | None:
        """Why accepting is paused now (``PAUSE_*``), None while accepting."""
        return self._paused

    @property
    def in_progress(self) -> int:
        """Accepted sockets whose handler has not finished (prepare, handshake)."""
        return len(self._tasks)

    def start(self) -> None:
        """Start accepting on the running loop."""
        self._loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        self._resume()

    async def close(self) -> None:
        """Stop accepting, close the listening socket and cancel unfinished handlers
        (their sockets are closed, their slots released)."""
        if self._closed:
            return
        self._closed = True
        self._stop_reading()
        if self._retry is not None:
            self._retry.cancel()
        self.budget.forget(self._resume)
        self.sock.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- the accept loop ---------------------------------------------------------------

    def _resume(self) -> None:
        if self._closed or self._loop is None:
            return
        if self._paused is not None:
            # Resumed by the backoff: a later release must not resume it again.
            self.budget.forget(self._resume)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self._paused = None
        if not self._reading:
            self._reading = True
            self._loop.add_reader(self.sock.fileno(), self._accept_ready)

    def _stop_reading(self) -> None:
        if self._reading and self._loop is not None:
            self._reading = False
            self._loop.remove_reader(self.sock.fileno())

    def _accept_ready(self) -> None:
        for _ in range(ACCEPT_BATCH_MAX):
            slot = self.budget.acquire(self.reserve)
            if slot is None:
                self._pause(PAUSE_AT_CAP, None)
                return
            try:
                conn, _address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                slot.release()
                return
            except ConnectionAbortedError:
                slot.release()  # the peer left the backlog before its turn
                continue
            except OSError as exc:
                slot.release()
                out = exc.errno in RESOURCE_ERRNOS
                self._pause(PAUSE_OUT_OF_DESCRIPTORS if out else PAUSE_ACCEPT_FAILED, exc)
                return
            self._backoff_s = ACCEPT_BACKOFF_MIN_S
            self.accepted += 1
            self._start_handler(conn, slot)

    def _pause(self, reason: str, exc: OSError | None) -> None:
        """Stop accepting; resume when a slot frees (a connection closed, which also
        gives back its descriptor) or, unless at the cap, after the backoff."""
        assert self._loop is not None
        self._stop_reading()
        if self._paused is None:
            self.budget.pauses[reason] += 1
        self._paused = reason
        self.budget.when_released(self._resume)
        now_s = self._loop.time()
        if exc is None:
            if not self.log_at_cap:
                return
            self._refusals.warning(
                now_s,
                "%s: not accepting: %d of its %d connections are open%s; resuming when one closes",
                self.name,
                self.budget.in_use,
                self.budget.capacity,
                f" ({self.reserve} kept for others)" if self.reserve else "",
            )
            return
        delay_s = self._backoff_s
        self._backoff_s = min(ACCEPT_BACKOFF_MAX_S, delay_s * 2)
        self._retry = self._loop.call_later(delay_s, self._resume)
        self._refusals.warning(
            now_s,
            "%s: accept failed (%s): %s; %d connections open; pausing accepts for %.2f s "
            "or until one closes",
            self.name,
            reason,
            exc,
            self.budget.in_use,
            delay_s,
        )

    def _start_handler(self, conn: socket.socket, slot: Slot) -> None:
        assert self._loop is not None
        conn.setblocking(False)
        task = self._loop.create_task(self._handle(conn, slot))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, conn: socket.socket, slot: Slot) -> None:
        try:
            await self._handler(conn, slot)
        except BaseException:
            slot.release()
            conn.close()
            raise


def protocol_handler(
    protocol_factory: Callable[[Slot], asyncio.BaseProtocol],
    *,
    refusals: RateLimitedLog,
    prepare: Prepare | None = None,
    prepare_timeout_s: float = PREPARE_TIMEOUT_S,
    ssl_handshake_timeout_s: float = SSL_HANDSHAKE_TIMEOUT_S,
) -> AcceptHandler:
    """An :data:`AcceptHandler` that runs ``prepare`` (if any, within
    ``prepare_timeout_s``) and then serves the socket with a protocol from
    ``protocol_factory(slot)``, over TLS when ``prepare`` gave a context.

    The protocol must release its slot when its connection is lost; until its
    connection is made (a failed prepare or handshake) the slot is released here."""

    async def handle(sock: socket.socket, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        try:
            context = None
            if prepare is not None:
                context = await asyncio.wait_for(prepare(sock), prepare_timeout_s)
            await loop.connect_accepted_socket(
                lambda: protocol_factory(slot),
                sock,
                ssl=context,
                ssl_handshake_timeout=None if context is None else ssl_handshake_timeout_s,
            )
        except (OSError, TimeoutError, ValueError) as exc:
            peer = _peer_of(sock)
            slot.release()
            sock.close()
            refusals.warning(loop.time(), "not serving %s: %s", peer, _describe_error(exc))

    return handle


def listening_sockets(
    host: str | None,
    port: int,
    backlog: int,
    *,
    sock: socket.socket | None = None,
    unix_path: str | None = None,
) -> list[socket.socket]:
    """What a server accepts on: a Unix socket at ``unix_path``, else ``sock`` (bound by
    another process; listening with ``backlog`` here), else TCP ``host:port``."""
    if unix_path is not None:
        return [bind_unix(unix_path, backlog)]
    if sock is not None:
        sock.listen(backlog)
        return [sock]
    return bind_tcp(host, port, backlog)


def start_listeners(
    sockets: list[socket.socket],
    protocol_factory: Callable[[Slot], asyncio.BaseProtocol],
    *,
    budget: ConnectionBudget,
    refusals: RateLimitedLog,
    prepare: Prepare | None = None,
    prepare_timeout_s: float = PREPARE_TIMEOUT_S,
    ssl_handshake_timeout_s: float = SSL_HANDSHAKE_TIMEOUT_S,
    listener_refusals: Callable[[], RateLimitedLog] | None = None,
) -> list[Listener]:
    """A started :class:`Listener` per socket, serving each accepted socket with
    :func:`protocol_handler` (``refusals`` logs the sockets not served; each listener
    logs its pauses in a log of its own from ``listener_refusals``, by default
    ``refusals``)."""
    handler = protocol_handler(
        protocol_factory,
        refusals=refusals,
        prepare=prepare,
        prepare_timeout_s=prepare_timeout_s,
        ssl_handshake_timeout_s=ssl_handshake_timeout_s,
    )
    listeners = []
    for sock in sockets:
        own = refusals if listener_refusals is None else listener_refusals()
        listener = Listener(sock, handler, budget=budget, refusals=own)
        listener.start()
        listeners.append(listener)
    return listeners


def bind_tcp(host: str | None, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets on every address of ``host`` (all interfaces when empty), as
    asyncio's ``create_server`` binds them; OSError naming the address on failure."""
    infos = socket.getaddrinfo(
        host or None,
        port,
        family=socket.AF_UNSPEC,
        type=socket.SOCK_STREAM,
        flags=socket.AI_PASSIVE,
    )
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"error while attempting to bind on address {address!r}: "
                    f"{(exc.strerror or str(exc)).lower()}",
                ) from None
            sock.listen(backlog)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def bind_unix(path: str, backlog: int) -> socket.socket:
    """A listening Unix socket at ``path`` (a stale socket file there is replaced),
    readable and writable by this user only."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.stat(path).st_mode):
            os.remove(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


async def connect_unix(path: str, timeout_s: float = UNIX_CONNECT_TIMEOUT_S) -> socket.socket:
    """A non-blocking socket connected to the Unix socket at ``path``.

    Linux answers a non-blocking ``connect`` to a Unix socket whose backlog is full
    with EAGAIN: unlike TCP's EINPROGRESS, nothing is in progress, the connect must be
    tried again. asyncio's ``sock_connect`` takes it for "in progress" and returns an
    unconnected socket (CPython gh-117208), whose first send fails with ENOTCONN: half
    of an unpaced burst of hand-overs was lost so. Here the connect is retried, with a
    short growing pause, until ``timeout_s``; then ConnectionError."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + timeout_s
    pause_s = UNIX_CONNECT_RETRY_MIN_S
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        while True:
            try:
                sock.connect(path)
                return sock
            except (BlockingIOError, InterruptedError):
                if loop.time() + pause_s > deadline_s:
                    raise ConnectionError(
                        f"{path}: its backlog stayed full for {timeout_s:.1f} s"
                    ) from None
                await asyncio.sleep(pause_s)
                pause_s = min(UNIX_CONNECT_RETRY_MAX_S, pause_s * 2)
    except BaseException:
        sock.close()
        raise


def _describe(sock: socket.socket) -> str:
    try:
        name = sock.getsockname()
    except OSError:
        return "listener"
    if isinstance(name, tuple) and len(name) >= 2:
        return f"listener {name[0]}:{name[1]}"
    return f"listener {name or '?'}"


def _describe_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _peer_of(sock: socket.socket) -> str:
    try:
        peer = sock.getpeername()
    except OSError:
        return "a connection"
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "a local connection"

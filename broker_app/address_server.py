"""Following the NameServers' address server (``fetchNamesrvAddrByAddressServer``).

Upstream's ``BrokerController`` with ``fetchNamesrvAddrByAddressServer=true`` (and no
``namesrvAddr``) asks ``BrokerOuterAPI.fetchNameServerAddr`` every two minutes for the
NameServer list and registers with whatever it answered from then on. The URL is
``MixAll.getWSAddr()``: ``http://{rocketmq.namesrv.domain}:8080/rocketmq/{subgroup}``,
without the ``:8080`` when the domain carries its own port; ``TopAddressing`` reads a
200 answer's first line as ``host:port;host:port``. Every node of this project serves
one (``GET /rocketmq/nsaddr``, namesrv_app/web/address_server.py).

Here the list is fetched once before the first registration and then every
``fetchNamesrvAddrInterval``. A fetch is bounded: :data:`FETCH_TIMEOUT_MS` for all of
it (upstream's ``fetchNSAddr(true, 3000)``), at most :data:`RESPONSE_BYTES_MAX` of
answer, no redirects, and the list parsed strictly (:mod:`remoting.namesrv_list`). A
fetch that fails, or answers an empty or malformed list, changes nothing: the broker
keeps the last list and says so in one log line a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass

from broker_app.registration import Registrar
from remoting.limits import RefusalLog
from remoting.namesrv_list import NamesrvListError, parse_namesrv_list

log = logging.getLogger(__name__)

WS_PORT = 8080
"""The port ``MixAll.getWSAddr()`` adds to a domain without one."""
WS_SUBGROUP_DEFAULT = "nsaddr"
FETCH_TIMEOUT_MS = 3000
"""The whole fetch: connect, send, read the answer."""
FETCH_INTERVAL_DEFAULT_MS = 120_000
"""``BrokerController`` fetches every two minutes."""
FETCH_INTERVAL_MIN_MS = 1000
RESPONSE_BYTES_MAX = 64 * 1024
"""Status line, headers and body together: a list of 64 NameServers is about 2 KiB."""
FAILURE_LOG_INTERVAL_S = 60.0
_DOMAIN = re.compile(
    r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?$"
)
_SUBGROUP = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (?P<code>[0-9]{3})(?: .*)?$")


class AddressServerError(Exception):
    """A fetch failed or answered something that is not a NameServer list."""


@dataclass(frozen=True, slots=True)
class WsAddr:
    """Where the address server is: ``http://{host}:{port}{path}``."""

    host: str
    port: int
    path: str
    host_header: str

    def __str__(self) -> str:
        return f"http://{self.host_header}{self.path}"


def ws_addr(domain: str, subgroup: str = WS_SUBGROUP_DEFAULT) -> WsAddr:
    """``MixAll.getWSAddr()`` for ``rocketmq.namesrv.domain`` and its subgroup; ValueError
    naming the key when either is not a plain host[:port] or a safe path segment."""
    found = _DOMAIN.match(domain)
    if found is None:
        raise ValueError(f"rocketmq.namesrv.domain must be host or host:port, got {domain[:80]!r}")
    if not _SUBGROUP.match(subgroup):
        raise ValueError(
            "rocketmq.namesrv.domain.subgroup must be 1 to 64 of A-Z a-z 0-9 _ . -, "
            f"got {subgroup[:80]!r}"
        )
    port_text = found.group("port")
    port = WS_PORT if port_text is None else int(port_text)
    if not 0 < port <= 65535:
        raise ValueError(f"rocketmq.namesrv.domain has no valid port: {domain!r}")
    host = found.group("host")
    # Upstream adds :8080 only when the domain has no ':' of its own.
    host_header = domain if port_text is not None else f"{host}:{WS_PORT}"
    return WsAddr(host.strip("[]"), port, f"/rocketmq/{subgroup}", host_header)


async def fetch_namesrv_addrs(
    where: WsAddr,
    *,
    timeout_s: float = FETCH_TIMEOUT_MS / 1000,
    bytes_max: int = RESPONSE_BYTES_MAX,
) -> tuple[str, ...]:
    """The NameServer list the address server answers now; AddressServerError if not."""
    try:
        async with asyncio.timeout(timeout_s):
            raw = await _http_get(where, bytes_max)
    except TimeoutError:
        raise AddressServerError(f"no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise AddressServerError(str(exc) or type(exc).__name__) from exc
    body = _body_of(raw)
    try:
        return parse_namesrv_list(body.decode("ascii"))
    except UnicodeDecodeError:
        raise AddressServerError("the answer is not ASCII text") from None
    except NamesrvListError as exc:
        raise AddressServerError(f"not a NameServer list: {exc}") from exc


async def _http_get(where: WsAddr, bytes_max: int) -> bytes:
    """One ``GET`` as HTTP/1.0 (so the answer is never chunked and ends with the
    connection), read until the server closes; AddressServerError past ``bytes_max``."""
    reader, writer = await asyncio.open_connection(where.host, where.port)
    try:
        writer.write(
            f"GET {where.path} HTTP/1.0\r\nHost: {where.host_header}\r\n"
            "Accept: text/plain\r\nUser-Agent: broker_app\r\n\r\n".encode("ascii")
        )
        await writer.drain()
        raw = bytearray()
        while chunk := await reader.read(bytes_max + 1 - len(raw)):
            raw += chunk
            if len(raw) > bytes_max:
                raise AddressServerError(f"the answer is larger than {bytes_max} bytes")
        return bytes(raw)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _body_of(raw: bytes) -> bytes:
    """The body of a ``200`` answer (its Content-Length's worth when it names one)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise AddressServerError("the answer has no complete header")
    lines = head.split(b"\r\n")
    status = _STATUS_LINE.match(lines[0])
    if status is None:
        raise AddressServerError("the answer is not HTTP")
    if status.group("code") != b"200":
        raise AddressServerError(f"status {status.group('code').decode()}")
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = value.strip()
            if not length.isdigit() or int(length) > len(body):
                raise AddressServerError("the answer is shorter than its Content-Length")
            return body[: int(length)]
    return body


class NamesrvAddrFollower:
    """The NameServer list a broker registers with, as its address server says."""

    def __init__(self, where: WsAddr, *, timeout_s: float = FETCH_TIMEOUT_MS / 1000) -> None:
        self.where = where
        self.timeout_s = timeout_s
        self.addrs: tuple[str, ...] = ()
        self._failure_log = RefusalLog(lines_max=1, interval_s=FAILURE_LOG_INTERVAL_S, logger=log)

    async def refresh(self) -> tuple[str, ...]:
        """Fetch the list; on success it becomes :attr:`addrs` (a change is logged as
        upstream's ``fetchNameServerAddr`` logs it), on failure :attr:`addrs` stays."""
        try:
            fetched = await fetch_namesrv_addrs(self.where, timeout_s=self.timeout_s)
        except AddressServerError as exc:
            self._failure_log.warning(
                time.monotonic(),
                "fetching the NameServer list from %s failed: %s; keeping %s",
                self.where,
                exc,
                ";".join(self.addrs) or "no NameServer",
            )
            return self.addrs
        self._failure_log.reset()
        if fetched != self.addrs:
            log.info(
                "name server address changed, old=%s, new=%s (from %s)",
                ";".join(self.addrs),
                ";".join(fetched),
                self.where,
            )
            self.addrs = fetched
        return self.addrs

    async def update(self, registrar: Registrar) -> None:
        """Refresh, then have ``registrar`` register with exactly that list: a new
        NameServer gets the next registration round, one that left gets nothing more."""
        registrar.namesrv_addrs = await self.refresh()

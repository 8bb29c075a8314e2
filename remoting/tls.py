"""TLS on the remoting protocol, as RocketMQ does it (``TlsSystemConfig``, ``TlsHelper``).

A server runs in one of three ``tls.server.mode``\\s:

* ``disabled``: plain TCP only;
* ``permissive``: a connection whose first byte is ``0x16`` (a TLS handshake record,
  the ClientHello) is served over TLS, any other first byte in plain text, so TLS and
  plain clients share one port, as upstream's ``HandshakeHandler`` tells them apart;
* ``enforcing``: TLS only; a plain first byte closes the connection at once.

Settings come in upstream's key names, from a ``tls.properties`` file
(``tls.config.file``) or from a node's ``[tls]`` section, which maps to the same keys:

=================================  ====================================================
``tls.server.mode``                 disabled | permissive | enforcing
``tls.server.certPath``             the server's certificate chain (PEM)
``tls.server.keyPath``              its private key (PEM, PKCS#8 as netty wants it)
``tls.server.keyPassword``          the key's password, if it is encrypted
``tls.server.trustCertPath``        CAs that sign clients' certificates
``tls.server.need.client.auth``     none | optional | require
``tls.enable``                      clients: speak TLS to every server (default false)
``tls.client.authServer``           clients: check the server's chain (default **true**)
``tls.client.trustCertPath``        clients: the CAs to check it against
``tls.client.certPath`` / ``keyPath`` / ``keyPassword``  clients' own certificate
``tls.client.checkHostname``        clients: also check the server's name (default false)
=================================  ====================================================

Two deliberate differences from upstream: a client checks the server's chain unless
told not to (upstream's ``tls.client.authServer`` defaults to false), and there is no
test mode that makes up a self-signed certificate: a server without certificate files
cannot start in permissive or enforcing mode. Like upstream's client, ours checks the
chain but not the name (``checkHostname`` turns that on).

The server re-reads its files when they change (checked at most once a second, at an
accept), as the NameServer's ``FileWatchService`` does; a set of files that does not
load keeps the last good context and logs why, so a half-copied renewal cannot take
the port down. Only connections accepted after the reload use the new files.

Process-wide client settings come from the file named by ``NAMESRV_TLS_CONFIG_FILE``,
as a Java client's come from ``-Dtls.config.file``: every remoting client of the
process (the console, the scan task, the demo brokers, the experiments) then speaks
TLS when ``tls.enable=true``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from remoting.errors import BodyDecodeError
from remoting.properties import config_boolean, decode_properties

log = logging.getLogger(__name__)

CONFIG_FILE_ENV = "NAMESRV_TLS_CONFIG_FILE"
# The first byte of a TLS record carrying a handshake message (the ClientHello).
TLS_HANDSHAKE_BYTE = 0x16
# How long an accepted connection may stay silent before its first byte tells TLS
# from plain: it bounds what a peer that is not yet anyone costs (RocketMQ clients
# send their first request at once; the handshake has its own bound, in the listener).
FIRST_BYTE_TIMEOUT_S = 10.0
RELOAD_CHECK_INTERVAL_S = 1.0
MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2

_E = TypeVar("_E", bound=enum.StrEnum)


class TlsMode(enum.StrEnum):
    """``tls.server.mode``."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.StrEnum):
    """``tls.server.need.client.auth``."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


class TlsConfigError(ValueError):
    """TLS settings that cannot be used; the message names the key."""


def _choice(kind: type[_E], key: str, text: str) -> _E:
    try:
        return kind(text.strip().lower())
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise TlsConfigError(f"{key}: must be one of {choices}, not {text!r}") from None


def _flag(key: str, text: str) -> bool:
    try:
        return config_boolean(key, text)
    except ValueError as exc:
        raise TlsConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """A server's side of ``tls.properties``."""

    mode: TlsMode = TlsMode.DISABLED
    cert_path: Path | None = None
    key_path: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    trust_cert_path: Path | None = None
    need_client_auth: ClientAuth = ClientAuth.NONE

    def check(self) -> None:
        """TlsConfigError when the settings cannot work together."""
        if self.mode is TlsMode.DISABLED:
            return
        if self.cert_path is None or self.key_path is None:
            raise TlsConfigError(
                f"tls.server.mode={self.mode}: tls.server.certPath and tls.server.keyPath "
                "are required (there is no test mode with a made-up certificate)"
            )
        if self.need_client_auth is not ClientAuth.NONE and self.trust_cert_path is None:
            raise TlsConfigError(
                f"tls.server.need.client.auth={self.need_client_auth}: "
                "tls.server.trustCertPath is required (the CAs of the clients' certificates)"
            )

    @property
    def files(self) -> tuple[Path, ...]:
        """The files the context is built from (watched for changes)."""
        paths = (self.cert_path, self.key_path, self.trust_cert_path)
        return tuple(path for path in paths if path is not None)


@dataclass(frozen=True, slots=True)
class TlsClientConfig:
    """A client's side of ``tls.properties``."""

    enabled: bool = False
    auth_server: bool = True
    trust_cert_path: Path | None = None
    cert_path: Path | None = None
    key_path: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = False

    def check(self) -> None:
        """TlsConfigError when the settings cannot work together."""
        if (self.cert_path is None) != (self.key_path is None):
            raise TlsConfigError("tls.client.certPath and tls.client.keyPath go together")
        if self.check_hostname and not self.auth_server:
            raise TlsConfigError("tls.client.checkHostname needs tls.client.authServer=true")


def _path(props: Mapping[str, str], key: str, base: Path) -> Path | None:
    text = props.get(key, "").strip()
    if not text:
        return None
    path = Path(text)
    return path if path.is_absolute() else base / path


def parse_tls_properties(
    props: Mapping[str, str], base: Path = Path(".")
) -> tuple[TlsServerConfig, TlsClientConfig]:
    """Both sides from upstream's keys (unknown keys are ignored, as Java does); relative
    paths are relative to ``base``. TlsConfigError naming the key when a value is bad."""
    server = TlsServerConfig(
        mode=_choice(TlsMode, "tls.server.mode", props.get("tls.server.mode", "disabled")),
        cert_path=_path(props, "tls.server.certPath", base),
        key_path=_path(props, "tls.server.keyPath", base),
        key_password=props.get("tls.server.keyPassword") or None,
        trust_cert_path=_path(props, "tls.server.trustCertPath", base),
        need_client_auth=_choice(
            ClientAuth,
            "tls.server.need.client.auth",
            props.get("tls.server.need.client.auth", "none"),
        ),
    )
    client = TlsClientConfig(
        enabled=_flag("tls.enable", props.get("tls.enable", "false")),
        auth_server=_flag("tls.client.authServer", props.get("tls.client.authServer", "true")),
        trust_cert_path=_path(props, "tls.client.trustCertPath", base),
        cert_path=_path(props, "tls.client.certPath", base),
        key_path=_path(props, "tls.client.keyPath", base),
        key_password=props.get("tls.client.keyPassword") or None,
        check_hostname=_flag(
            "tls.client.checkHostname", props.get("tls.client.checkHostname", "false")
        ),
    )
    server.check()
    client.check()
    return server, client


def read_tls_properties(path: Path) -> tuple[TlsServerConfig, TlsClientConfig]:
    """Both sides from a ``tls.properties`` file; TlsConfigError naming the file."""
    try:
        props = decode_properties(path.read_bytes())
    except (OSError, BodyDecodeError) as exc:
        raise TlsConfigError(f"{path}: cannot read TLS settings: {exc}") from exc
    try:
        return parse_tls_properties(props, path.parent)
    except TlsConfigError as exc:
        raise TlsConfigError(f"{path}: {exc}") from exc


def server_context(config: TlsServerConfig) -> ssl.SSLContext:
    """A server context from ``config``; TlsConfigError when the files do not load."""
    assert config.cert_path is not None and config.key_path is not None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MINIMUM_VERSION
    try:
        context.load_cert_chain(config.cert_path, config.key_path, config.key_password)
        if config.trust_cert_path is not None:
            context.load_verify_locations(cafile=config.trust_cert_path)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"cannot load the server's certificate or key: {exc}") from exc
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
    }[config.need_client_auth]
    return context


def client_context(config: TlsClientConfig) -> ssl.SSLContext:
    """A client context from ``config``; TlsConfigError when the files do not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = MINIMUM_VERSION
    try:
        if config.auth_server:
            context.check_hostname = config.check_hostname
            if config.trust_cert_path is not None:
                context.load_verify_locations(cafile=config.trust_cert_path)
            else:
                context.load_default_certs()
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if config.cert_path is not None and config.key_path is not None:
            context.load_cert_chain(config.cert_path, config.key_path, config.key_password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise TlsConfigError(f"cannot load the client's TLS files: {exc}") from exc
    return context


class ClientTls(enum.Enum):
    """How a remoting client chooses its TLS when not given a context."""

    PROCESS = "process"
    """As ``NAMESRV_TLS_CONFIG_FILE`` says (:func:`process_client_context`)."""
    PLAIN = "plain"
    """Never TLS (the loopback-only internal port, tests of plain peers)."""


ClientTlsChoice = ssl.SSLContext | ClientTls
"""What remoting clients take: a context of their own, or a :class:`ClientTls`."""


def resolve_client_tls(choice: ClientTlsChoice) -> ssl.SSLContext | None:
    """The context a client with ``choice`` connects with (None: plain)."""
    if isinstance(choice, ssl.SSLContext):
        return choice
    if choice is ClientTls.PLAIN:
        return None
    return process_client_context()


_process_client: tuple[str, ssl.SSLContext | None] | None = None


def process_client_context() -> ssl.SSLContext | None:
    """The context every remoting client of this process uses by default: from the file
    in ``NAMESRV_TLS_CONFIG_FILE`` when it says ``tls.enable=true``, else None (plain).
    Read once per value of the variable; TlsConfigError when the file is unusable."""
    global _process_client
    source = os.environ.get(CONFIG_FILE_ENV, "")
    if _process_client is not None and _process_client[0] == source:
        return _process_client[1]
    context: ssl.SSLContext | None = None
    if source:
        _, config = read_tls_properties(Path(source))
        context = client_context(config) if config.enabled else None
    _process_client = (source, context)
    return context


def _signature(paths: tuple[Path, ...]) -> tuple[tuple[int, int], ...]:
    stamps: list[tuple[int, int]] = []
    for path in paths:
        try:
            found = path.stat()
        except OSError:
            stamps.append((-1, -1))
        else:
            stamps.append((found.st_mtime_ns, found.st_size))
    return tuple(stamps)


# OpenSSL's long attribute names (what ``getpeercert`` gives) and the short ones
# operators write.
SUBJECT_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "emailAddress": "emailAddress",
    "serialNumber": "serialNumber",
    "domainComponent": "DC",
}


def normal_subject(pairs: list[tuple[str, str]]) -> str:
    """A subject as one canonical string: short names, ``ATTR=value`` sorted, commas
    between (a value's own commas and backslashes escaped)."""
    items = [
        f"{SUBJECT_SHORT_NAMES.get(attr, attr)}=" + value.replace("\\", "\\\\").replace(",", "\\,")
        for attr, value in pairs
    ]
    return ",".join(sorted(items))


def peer_subject(transport: asyncio.BaseTransport | None) -> str | None:
    """The normalised subject of the verified client certificate of a TLS
    ``transport`` (None: plain text, or no certificate), as accounts name it
    (``certificateSubject``, :mod:`remoting.acl_policy`)."""
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    cert = None if ssl_object is None else ssl_object.getpeercert()
    rdns = None if not cert else cert.get("subject")
    if not rdns:
        return None
    return normal_subject([(str(attr), str(value)) for rdn in rdns for attr, value in rdn])


class TlsRefused(ConnectionError):
    """An accepted connection that may not be served (enforcing mode, plain first byte;
    or a peer that closed or stayed silent before its first byte)."""


class ServerTls:
    """A listener's TLS: which context a new connection gets, the files watched.

    :meth:`prepare` is the step between ``accept`` and the protocol: it returns the
    context to wrap the socket in, or None to serve it in plain text.
    """

    def __init__(
        self, config: TlsServerConfig, *, first_byte_timeout_s: float = FIRST_BYTE_TIMEOUT_S
    ) -> None:
        """Load the files (TlsConfigError when they do not load or do not fit the mode);
        a connection silent for ``first_byte_timeout_s`` is not served."""
        config.check()
        self.config = config
        self.first_byte_timeout_s = first_byte_timeout_s
        self._context: ssl.SSLContext | None = None
        self._signature: tuple[tuple[int, int], ...] = ()
        self._checked_s = 0.0
        self.reloads = 0
        if config.mode is not TlsMode.DISABLED:
            self._signature = _signature(config.files)
            self._context = server_context(config)
            self._checked_s = time.monotonic()

    @property
    def mode(self) -> TlsMode:
        """The server's ``tls.server.mode``."""
        return self.config.mode

    @property
    def context(self) -> ssl.SSLContext | None:
        """The current context (None when disabled), reloaded first if the files changed."""
        self._maybe_reload()
        return self._context

    def _maybe_reload(self) -> None:
        if self._context is None:
            return
        now_s = time.monotonic()
        if now_s - self._checked_s < RELOAD_CHECK_INTERVAL_S:
            return
        self._checked_s = now_s
        signature = _signature(self.config.files)
        if signature == self._signature:
            return
        # Remembered before loading: a broken set is reported once, not every second.
        self._signature = signature
        try:
            self._context = server_context(self.config)
        except TlsConfigError as exc:
            log.error("TLS files changed but do not load; keeping the previous ones: %s", exc)
            return
        self.reloads += 1
        log.info("TLS certificate files changed: reloaded (%s)", self.config.cert_path)

    async def prepare(self, sock: socket.socket) -> ssl.SSLContext | None:
        """The context to serve ``sock`` with (None: plain). Reads nothing: in
        permissive and enforcing mode it waits, at most ``first_byte_timeout_s``, for the
        first byte and peeks at it. Raises TlsRefused when the connection is not to be
        served (the caller closes it)."""
        context = self.context
        if context is None:
            return None
        first = await peek_first_byte(sock, self.first_byte_timeout_s)
        if first == TLS_HANDSHAKE_BYTE:
            return context
        if self.config.mode is TlsMode.ENFORCING:
            raise TlsRefused(f"plain-text first byte 0x{first:02x} on a TLS-only port")
        return None


async def peek_first_byte(sock: socket.socket, timeout_s: float) -> int:
    """The first byte waiting on non-blocking ``sock``, left unread; TlsRefused when the
    peer closes first or sends nothing within ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline_s = loop.time() + timeout_s
    while True:
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            raise TlsRefused(f"connection failed before its first byte: {exc}") from exc
        else:
            if not data:
                raise TlsRefused("closed before its first byte")
            return data[0]
        remaining_s = deadline_s - loop.time()
        if remaining_s <= 0:
            raise TlsRefused(f"no first byte within {timeout_s:.0f} s")
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(sock.fileno(), _wake, readable)
        try:
            await asyncio.wait_for(readable, remaining_s)
        except TimeoutError:
            raise TlsRefused(f"no first byte within {timeout_s:.0f} s") from None
        finally:
            loop.remove_reader(sock.fileno())


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)

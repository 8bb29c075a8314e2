"""A remoting server's ACL: which peer may send which request code (sans framework).

The server names two sets of request codes; everything else is a *read*:

* **admin** codes change state and never come from a trusted machine peer. They
  need a valid signature of an *admin* account, always: no address is trusted.
* **white-listable** codes are what peers that cannot sign send (RocketMQ 4.x
  brokers do not sign their registrations). They need a valid signature of any
  account, or a peer address on the white list.
* **read** codes (everything else, unknown codes included) stay open unless the
  file says ``readsNeedSignature: true``; then any account's signature will do.

The NameServer gateway (``gateway/acl.py``) and ``broker_app`` each name their
sets and share this engine.

Signatures are RocketMQ's own (:mod:`remoting.acl`), so a Java client with
``AclClientRPCHook(new SessionCredentials(ak, sk))`` works unchanged. Accounts live
in a YAML file in the style of RocketMQ's ``plain_acl.yml``::

    globalWhiteRemoteAddresses:     # peers that may send broker codes unsigned
      - 127.0.0.1/32
      - 10.0.1.*
    readsNeedSignature: false
    accounts:
      - accessKey: ops-admin
        secretKey: a-long-random-secret
        admin: true
      - accessKey: brokers
        secretKey: another-secret
        admin: false
        whiteRemoteAddress: 10.0.1.0/24   # optional: only from these peers
      - accessKey: broker-a
        secretKey: a-third-secret
        brokerNames: [broker-a]           # optional: a per-broker account
      - accessKey: broker-b               # a name for the logs
        certificateSubject: CN=broker-b,O=Example   # TLS client certificate, no secret
        brokerNames: [broker-b]

One deliberate difference from upstream: there, a white-listed address skips the
signature for every code; here the white list only ever admits broker codes, and
an account's ``whiteRemoteAddress`` *restricts* where its signature is accepted.

``brokerNames`` binds an account to the brokers it may name (``named_codes``, the
NameServer's REGISTER_BROKER, UNREGISTER_BROKER and QUERY_DATA_VERSION): such an
account may name no other broker, and a broker name some account is bound to may be
named only by the accounts bound to it (unsigned or by any other account: refused;
an admin account may still send the ``admin_named_codes``). Whether a bound account
may also move a broker held by another connection is the gateway's rule
(``gateway/broker_holds.py``); :meth:`RemotingAcl.signer` tells it who signed.

``certificateSubject`` makes a verified TLS client certificate the account's identity:
a request that arrives unsigned over a TLS connection whose client certificate
(checked against ``tls.server.trustCertPath``; ``tls.server.need.client.auth=require``)
has exactly that subject counts as signed by the account, so a broker needs no shared
secret. The subject is written as ``ATTR=value`` pairs joined by commas, in any order,
with OpenSSL's short names (``CN``, ``O``, ``OU``, ``C``, ``ST``, ``L``, ``emailAddress``);
it must equal the certificate's whole subject. A signature, when a request carries
one, decides instead. Such an account may leave ``secretKey`` out.

The file holds secret keys, so it is refused when group or others may read or write
it (``chmod 600``), at start and on reload, unless the file itself says
``fileModeCheck: false`` (an operator's explicit choice, e.g. a mount that cannot be
made private).

The file is re-read when it changes (checked at most once a second, on guarded
requests only). A file that no longer parses keeps the last good accounts and
logs the error, so a typo neither locks everyone out nor opens the door.

A refusal is a NO_PERMISSION (16) answer whose remark says what was missing or
wrong; it changes nothing and keeps the connection.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from remoting.acl import ACCESS_KEY_FIELD, SIGNATURE_FIELD, signature_matches
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.tls import normal_subject

log = logging.getLogger(__name__)

LOOPBACK_WHITE_LIST = ("127.0.0.0/8", "::1/128")
"""What a server started without an ACL file trusts for its white-listable codes."""
RELOAD_CHECK_S = 1.0
REFUSAL_LOG_INTERVAL_S = 10.0
"""At most one refusal log line per reason per this many seconds (floods stay quiet)."""
BROKER_NAME_FIELD = "brokerName"
"""The header field naming the broker a named code is about."""
PRIVATE_FILE_MODE_BITS = stat.S_IRWXG | stat.S_IRWXO
"""Permission bits the accounts file must not have (it holds secret keys)."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AclConfigError(ValueError):
    """The ACL file is missing, unreadable or malformed; the message names the entry."""


# ------------------------------------------------------------------ addresses


def parse_address_pattern(pattern: str) -> Network:
    """One white-list entry as a network.

    Accepted: CIDR (``10.0.0.0/8``, ``fd00::/8``), a single address, ``*`` (every
    address) and upstream's IPv4 wildcard form with trailing ``*`` octets
    (``10.10.*`` or ``10.10.*.*``, both meaning ``10.10.0.0/16``).
    """
    text = pattern.strip()
    if text == "*":
        return ipaddress.ip_network("0.0.0.0/0")
    if "*" in text:
        octets = text.split(".")
        fixed = [octet for octet in octets if octet != "*"]
        if octets[: len(fixed)] != fixed or len(octets) > 4 or not fixed:
            raise AclConfigError(f"white-list entry {pattern!r}: '*' must end the address")
        prefix = ".".join([*fixed, *["0"] * (4 - len(fixed))])
        text = f"{prefix}/{8 * len(fixed)}"
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise AclConfigError(f"white-list entry {pattern!r} is not an address: {exc}") from exc


def peer_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The peer's address (IPv4-mapped IPv6 unwrapped); None when it is not an IP."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@functools.lru_cache(maxsize=4096)
def address_in(host: str, networks: tuple[Network, ...]) -> bool:
    """True when ``host`` lies in one of ``networks``. Remembered: every broker's
    registration is checked against the white list, from a handful of hosts, and
    parsing the address was most of the check."""
    address = peer_address(host)
    if address is None:
        return False
    return any(address.version == net.version and address in net for net in networks)


# ------------------------------------------------------------------ configuration


@dataclass(frozen=True, slots=True)
class Account:
    """One account of the ACL file."""

    access_key: str
    secret_key: str | None = field(repr=False)
    """None for an account known by its certificate only (it cannot sign)."""
    admin: bool = False
    white_remote_addresses: tuple[Network, ...] = ()
    broker_names: frozenset[str] | None = None
    """``brokerNames``: the only brokers this account may name; None: any broker."""
    certificate_subject: str | None = None
    """``certificateSubject``, normalised (:func:`remoting.tls.normal_subject`): the TLS client
    certificate that identifies this account; None: none does."""

    def binds(self, broker_name: str) -> bool:
        """True when this account is bound to ``broker_name`` (listed in ``brokerNames``)."""
        return self.broker_names is not None and broker_name in self.broker_names


@dataclass(frozen=True, slots=True)
class AclConfig:
    """Everything the ACL decides with."""

    accounts: Mapping[str, Account] = field(default_factory=dict)
    global_white_list: tuple[Network, ...] = ()
    reads_need_signature: bool = False
    file_mode_check: bool = True
    """``fileModeCheck``: False only when an operator allows a file others may read."""
    bindings: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    """Broker name -> the access keys bound to it (derived from the accounts)."""
    by_subject: Mapping[str, Account] = field(init=False, repr=False, compare=False)
    """Normalised certificate subject -> its account (derived from the accounts)."""

    def __post_init__(self) -> None:
        bound: dict[str, list[str]] = {}
        subjects: dict[str, Account] = {}
        for account in self.accounts.values():
            for name in sorted(account.broker_names or ()):
                bound.setdefault(name, []).append(account.access_key)
            if account.certificate_subject is not None:
                subjects[account.certificate_subject] = account
        # Frozen: set once here, the one place the derived indexes are built.
        object.__setattr__(self, "bindings", {n: tuple(keys) for n, keys in bound.items()})
        object.__setattr__(self, "by_subject", subjects)

    @classmethod
    def default(cls) -> AclConfig:
        """No accounts, loopback white-listed: a server started without an ACL file."""
        return cls({}, tuple(parse_address_pattern(p) for p in LOOPBACK_WHITE_LIST))


def _addresses(value: Any, where: str) -> tuple[Network, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        items = [part for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise AclConfigError(f"{where} must be an address, or a list of addresses")
    return tuple(parse_address_pattern(item) for item in items)


def _account(entry: Any, index: int) -> Account:
    where = f"accounts[{index}]"
    if not isinstance(entry, dict):
        raise AclConfigError(f"{where} must be a mapping")
    access_key, secret_key = entry.get("accessKey"), entry.get("secretKey")
    if not isinstance(access_key, str) or not access_key:
        raise AclConfigError(f"{where}.accessKey must be a non-empty string")
    subject = _subject(entry.get("certificateSubject"), f"{where}.certificateSubject")
    if isinstance(secret_key, int):
        secret_key = str(secret_key)  # upstream's examples write 12345678 unquoted
    if not (secret_key is None and subject is not None) and (
        not isinstance(secret_key, str) or len(secret_key) < 6
    ):
        raise AclConfigError(
            f"{where}.secretKey must be a string of at least 6 characters "
            "(it may be left out only with a certificateSubject)"
        )
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise AclConfigError(f"{where}.admin must be true or false")
    white = _addresses(entry.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress")
    names = _broker_names(entry.get("brokerNames"), f"{where}.brokerNames")
    return Account(access_key, secret_key, admin, white, names, subject)


def _subject(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise AclConfigError(f"{where} must be a subject such as CN=broker-a,O=Example")
    pairs = []
    for part in _split_unescaped(value.strip()):
        attr, equals, text = part.partition("=")
        if not equals or not attr.strip() or not text.strip():
            raise AclConfigError(f"{where}: {part!r} is not ATTR=value")
        pairs.append((attr.strip(), text.strip().replace("\\,", ",").replace("\\\\", "\\")))
    return normal_subject(pairs)


def _split_unescaped(text: str) -> list[str]:
    """``text`` split at commas that no backslash escapes."""
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in text:
        if char == "," and not escaped:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
        escaped = char == "\\" and not escaped
    parts.append("".join(current))
    return parts


def _broker_names(value: Any, where: str) -> frozenset[str] | None:
    """``brokerNames``: absent means any broker; otherwise a non-empty list of names."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AclConfigError(f"{where} must be a broker name, or a list of broker names")
    names = frozenset(item.strip() for item in value)
    if not names or "" in names:
        raise AclConfigError(
            f"{where} must name at least one broker, and no empty name "
            "(leave the key out for an account that may name any broker)"
        )
    return names


def parse_acl(document: Any) -> AclConfig:
    """An :class:`AclConfig` from the parsed YAML document; AclConfigError if malformed."""
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise AclConfigError("the ACL file must hold a mapping at its top level")
    accounts: dict[str, Account] = {}
    raw_accounts = document.get("accounts")
    if raw_accounts is None:
        raw_accounts = []
    if not isinstance(raw_accounts, list):
        raise AclConfigError("accounts must be a list")
    for index, entry in enumerate(raw_accounts):
        account = _account(entry, index)
        if account.access_key in accounts:
            raise AclConfigError(f"accounts[{index}]: accessKey {account.access_key!r} repeats")
        accounts[account.access_key] = account
    reads = document.get("readsNeedSignature", False)
    if not isinstance(reads, bool):
        raise AclConfigError("readsNeedSignature must be true or false")
    white = _addresses(document.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")
    return AclConfig(accounts, white, reads, _file_mode_check(document))


def _file_mode_check(document: Mapping[str, Any]) -> bool:
    check = document.get("fileModeCheck", True)
    if not isinstance(check, bool):
        raise AclConfigError("fileModeCheck must be true or false")
    return check


def _refuse_open_mode(path: Path, mode: int) -> None:
    """AclConfigError when group or others may read or write the file at ``path``."""
    if mode & PRIVATE_FILE_MODE_BITS:
        raise AclConfigError(
            f"ACL file {path} is open to group or others (mode {stat.S_IMODE(mode):04o}) "
            f"and holds secret keys: chmod 600 {path} (or set fileModeCheck: false in it)"
        )


def load_acl_file(path: Path) -> AclConfig:
    """Read and check the ACL file at ``path``: well-formed, and private to its owner
    unless it says ``fileModeCheck: false``."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AclConfigError(f"cannot read ACL file {path}: {exc.strerror or exc}") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"ACL file {path} is not valid YAML: {exc}") from exc
    try:
        config = parse_acl(document)
    except AclConfigError as exc:
        raise AclConfigError(f"ACL file {path}: {exc}") from exc
    if config.file_mode_check:
        _refuse_open_mode(path, mode)
    return config


def dump_acl(config: AclConfig) -> str:
    """The YAML text of ``config`` (what ``cluster up`` writes)."""
    document: dict[str, Any] = {
        "globalWhiteRemoteAddresses": [str(net) for net in config.global_white_list],
        "readsNeedSignature": config.reads_need_signature,
        "accounts": [
            {
                "accessKey": account.access_key,
                **({"secretKey": account.secret_key} if account.secret_key is not None else {}),
                **(
                    {"certificateSubject": account.certificate_subject}
                    if account.certificate_subject is not None
                    else {}
                ),
                "admin": account.admin,
                **(
                    {"whiteRemoteAddress": [str(n) for n in account.white_remote_addresses]}
                    if account.white_remote_addresses
                    else {}
                ),
                **(
                    {"brokerNames": sorted(account.broker_names)}
                    if account.broker_names is not None
                    else {}
                ),
            }
            for account in config.accounts.values()
        ],
    }
    if not config.file_mode_check:
        document["fileModeCheck"] = False
    return yaml.safe_dump(document, sort_keys=False)


class AclFile:
    """An ACL file that is re-read when it changes (stat at most once per ``check_s``)."""

    def __init__(self, path: Path, *, check_s: float = RELOAD_CHECK_S) -> None:
        self.path = Path(path)
        self._check_s = check_s
        self._stamp = self._stat()
        self._config = load_acl_file(self.path)
        self._next_check = time.monotonic() + check_s
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, ...] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        # The mode and ctime too: a chmod that opens the file to others is a change.
        return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_mode)

    def current(self) -> AclConfig:
        """The accounts in force, re-reading the file if it changed."""
        now = time.monotonic()
        if now < self._next_check:
            return self._config
        with self._lock:
            self._next_check = now + self._check_s
            stamp = self._stat()
            if stamp is None or stamp == self._stamp:
                if stamp is None:
                    log.error("ACL file %s is gone; keeping the last accounts", self.path)
                return self._config
            self._stamp = stamp
            try:
                self._config = load_acl_file(self.path)
            except AclConfigError as exc:
                log.error("%s; keeping the last good accounts", exc)
            else:
                log.info("ACL file %s reloaded: %d accounts", self.path, len(self._config.accounts))
        return self._config


# ------------------------------------------------------------------ decisions


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was refused: a short reason (for counting) and the remark."""

    reason: str
    remark: str


def _code_name(code: int) -> str:
    try:
        return f"{code} ({RequestCode(code).name})"
    except ValueError:
        return str(code)


class RemotingAcl:
    """Decides, per request, whether the peer may send it.

    ``source`` is an :class:`AclFile` (reloading) or a fixed :class:`AclConfig`;
    ``admin_codes`` and ``white_listable_codes`` are the server's code classes.
    ``named_codes`` (white-listable codes whose ``brokerName`` field names a broker) are
    also checked against the accounts' ``brokerNames``; an admin account may send the
    ``admin_named_codes`` among them for any broker.
    ``refusals`` counts refusals by reason, for the metrics and the tests.
    """

    def __init__(
        self,
        source: AclFile | AclConfig,
        *,
        admin_codes: frozenset[int],
        white_listable_codes: frozenset[int],
        white_listable_kind: str = "broker",
        named_codes: frozenset[int] = frozenset(),
        admin_named_codes: frozenset[int] = frozenset(),
    ) -> None:
        self._source = source
        self.admin_codes = admin_codes
        self.white_listable_codes = white_listable_codes
        self.named_codes = named_codes
        self.admin_named_codes = admin_named_codes
        self._kind = white_listable_kind
        self.refusals: Counter[str] = Counter()
        self._last_logged: dict[str, float] = {}

    @property
    def config(self) -> AclConfig:
        """The accounts in force now."""
        source = self._source
        return source.current() if isinstance(source, AclFile) else source

    def guards(self, code: int) -> bool:
        """True when ``code`` needs a check (admin, white-listable; reads if closed)."""
        return (
            code in self.admin_codes
            or code in self.white_listable_codes
            or self.config.reads_need_signature
        )

    def check(
        self, request: RemotingCommand, peer_host: str, peer_subject: str | None = None
    ) -> Refusal | None:
        """None when ``request`` from ``peer_host`` may proceed, else the refusal.
        ``peer_subject``: the normalised subject of the peer's verified TLS client
        certificate (:func:`remoting.tls.peer_subject`), which may stand for a signature."""
        config = self.config
        code = request.code
        account: Account | None = None
        certified = self._certified(request, peer_host, peer_subject, config)
        if certified is not None and (code not in self.admin_codes or certified.admin):
            refusal, account = None, certified
        elif code in self.admin_codes:
            refusal, account = self._signed(request, peer_host, config, admin=True)
        elif code in self.white_listable_codes:
            if not _is_signed(request) and address_in(peer_host, config.global_white_list):
                refusal = None
            else:
                refusal, account = self._signed(request, peer_host, config, admin=False)
        elif config.reads_need_signature:
            refusal, account = self._signed(request, peer_host, config, admin=False)
        else:
            return None
        if refusal is None and code in self.named_codes:
            refusal = self._named(request, account, config)
        if refusal is not None:
            self._count(refusal, peer_host)
        return refusal

    def signer(
        self, request: RemotingCommand, peer_host: str, peer_subject: str | None = None
    ) -> Account | None:
        """The account whose valid signature ``request`` carries, or, unsigned, whose
        certificate the peer presented; None otherwise. Nothing is counted or logged
        (the caller decides)."""
        config = self.config
        if not _is_signed(request):
            return self._certified(request, peer_host, peer_subject, config)
        return self._signed(request, peer_host, config, admin=False)[1]

    @staticmethod
    def _certified(
        request: RemotingCommand, peer_host: str, peer_subject: str | None, config: AclConfig
    ) -> Account | None:
        """The account an unsigned request's client certificate identifies, if any (and
        if the account's ``whiteRemoteAddress`` admits the peer)."""
        if peer_subject is None or _is_signed(request):
            return None
        account = config.by_subject.get(peer_subject)
        if account is None or (
            account.white_remote_addresses
            and not address_in(peer_host, account.white_remote_addresses)
        ):
            return None
        return account

    def _named(
        self, request: RemotingCommand, account: Account | None, config: AclConfig
    ) -> Refusal | None:
        """The ``brokerNames`` rule of a named code (see the module docstring)."""
        name = (request.ext_fields or {}).get(BROKER_NAME_FIELD)
        if not name:
            return None  # the handler answers a missing name
        what = f"{self._kind} request {_code_name(request.code)}"
        if account is not None and account.broker_names is not None:
            if name in account.broker_names:
                return None
            allowed = ", ".join(sorted(account.broker_names))
            return Refusal(
                "broker-name",
                f"{what}: AccessKey {account.access_key!r} may name only the brokers "
                f"[{allowed}], not {name!r}",
            )
        bound = config.bindings.get(name)
        if not bound or (
            account is not None and account.admin and request.code in self.admin_named_codes
        ):
            return None
        signed = "unsigned" if account is None else f"signed by AccessKey {account.access_key!r}"
        return Refusal(
            "broker-bound",
            f"{what} naming {name!r} ({signed}): that broker name is bound to AccessKey "
            f"{', '.join(repr(key) for key in bound)} in the accounts file; sign with it",
        )

    def _signed(
        self, request: RemotingCommand, peer_host: str, config: AclConfig, *, admin: bool
    ) -> tuple[Refusal | None, Account | None]:
        """(None, the signing account) when validly signed, else (the refusal, None)."""
        if admin:
            kind = "admin"
        elif request.code in self.white_listable_codes:
            kind = self._kind
        else:
            kind = "read"
        what = f"{kind} request {_code_name(request.code)}"
        fields = request.ext_fields or {}
        access_key = fields.get(ACCESS_KEY_FIELD)
        if not access_key or not fields.get(SIGNATURE_FIELD):
            missing = "AccessKey" if not access_key else "Signature"
            if kind == self._kind:
                return Refusal(
                    "unsigned",
                    f"{what} from {peer_host} needs a signature or a white-listed address "
                    f"(no {missing})",
                ), None
            return Refusal("unsigned", f"{what} needs an ACL signature (no {missing})"), None
        account = config.accounts.get(access_key)
        if account is None:
            return Refusal("unknown-key", f"{what}: unknown AccessKey {access_key!r}"), None
        if account.white_remote_addresses and not address_in(
            peer_host, account.white_remote_addresses
        ):
            return Refusal(
                "address", f"{what}: AccessKey {access_key!r} is not allowed from {peer_host}"
            ), None
        if account.secret_key is None or not signature_matches(request, account.secret_key):
            return Refusal(
                "bad-signature", f"{what}: signature does not match for AccessKey {access_key!r}"
            ), None
        if admin and not account.admin:
            return Refusal(
                "not-admin", f"{what}: AccessKey {access_key!r} is not an admin account"
            ), None
        return None, account

    def _count(self, refusal: Refusal, peer_host: str) -> None:
        self.refusals[refusal.reason] += 1
        now = time.monotonic()
        if now - self._last_logged.get(refusal.reason, -REFUSAL_LOG_INTERVAL_S) >= (
            REFUSAL_LOG_INTERVAL_S
        ):
            self._last_logged[refusal.reason] = now
            log.warning("ACL refused a request from %s: %s", peer_host, refusal.remark)

    def refuse(self, request: RemotingCommand, refusal: Refusal) -> RemotingCommand | None:
        """The NO_PERMISSION answer (None for a one-way request, which gets none)."""
        if request.is_oneway:
            return None
        return make_response(request, ResponseCode.NO_PERMISSION, remark=refusal.remark)


def _is_signed(request: RemotingCommand) -> bool:
    fields = request.ext_fields
    return fields is not None and SIGNATURE_FIELD in fields

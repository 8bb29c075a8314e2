"""Broker configuration: one validated, frozen value built from a file and flags.

A config file may be JSON (an object) or Java properties (RocketMQ's
``broker.conf``). Keys may be our snake_case field names or RocketMQ's own
camelCase names (``brokerClusterName``, ``namesrvAddr``, ``brokerRole``,
``haListenPort``, ``registerNameServerPeriod``...), so an existing
``broker.conf`` mostly works as is. Command-line flags override the file.

The values are converted by msgspec to :class:`BrokerConfig`'s own field types (the
dataclass is the schema, :func:`build_config`); a value that does not fit is one
:class:`ConfigError` that names the key as the user wrote it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as schema

from broker_app.address_server import (
    FETCH_INTERVAL_DEFAULT_MS,
    FETCH_INTERVAL_MIN_MS,
    WS_SUBGROUP_DEFAULT,
    WsAddr,
    ws_addr,
)
from broker_app.ha.auth import HAAuth, load_key
from broker_app.ha.config import HAConfig
from broker_app.redelivery import DEFAULT_DELAY_LEVELS, DelayLevelError, parse_delay_levels
from broker_app.store.message_store import FlushDiskType, StoreConfig
from remoting.acl import Credentials, load_credentials
from remoting.acl_policy import AclConfig, AclConfigError, AclFile, RemotingAcl
from remoting.bodies import decode_properties
from remoting.codes import RequestCode
from remoting.properties import config_boolean
from remoting.tls import (
    ClientTls,
    ClientTlsChoice,
    ServerTls,
    TlsConfigError,
    TlsMode,
    client_context,
    read_tls_properties,
)
from tools import msgspec_errors

DELETE_TOPIC_IN_BROKER = 215
"""RocketMQ's ``RequestCode.DELETE_TOPIC_IN_BROKER`` (not in :class:`RequestCode`: only
our broker and the tools that talk to it use it)."""
BROKER_ADMIN_CODES: frozenset[int] = frozenset(
    {RequestCode.UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER}
)
"""Codes of the broker port that change its topics: an admin's signature, always."""
NAMESRV_PUSH_CODES: frozenset[int] = frozenset({RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE})
"""What NameServers push to brokers: a signature or a white-listed NameServer address."""
REGISTER_PERIOD_MIN_MS = 10_000  # BrokerController clamps registerNameServerPeriod to
REGISTER_PERIOD_MAX_MS = 60_000  # [10 s, 60 s]
PORT_MAX = 65535


class BrokerRole(StrEnum):
    """RocketMQ's ``BrokerRole``."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class ConfigError(ValueError):
    """A configuration that cannot work; the message names the setting."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything one broker process needs to know at start."""

    store_dir: Path
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 0
    ha_port: int = 0
    role: BrokerRole = BrokerRole.ASYNC_MASTER
    namesrv_addrs: tuple[str, ...] = ()
    # fetchNamesrvAddrByAddressServer: the NameServer list comes from the address server
    # MixAll.getWSAddr() names (rocketmq.namesrv.domain, .subgroup), fetched at start and
    # every fetchNamesrvAddrInterval (broker_app/address_server.py), instead of namesrvAddr.
    fetch_namesrv_addr_by_address_server: bool = False
    namesrv_domain: str = ""
    namesrv_domain_subgroup: str = WS_SUBGROUP_DEFAULT
    fetch_namesrv_addr_interval_ms: int = FETCH_INTERVAL_DEFAULT_MS
    register_period_ms: int = 30_000
    register_initial_delay_ms: int = 10_000
    register_timeout_ms: int = 6_000
    # forceRegister (upstream's default: true): the periodic round registers the whole
    # topic table with every NameServer. Off, it first asks QUERY_DATA_VERSION and
    # registers only where a NameServer's view differs. Forced rounds are what brings a
    # topic deleted on the NameServers only back, and what repairs a node that lost
    # the broker's topics without noticing (a restart from an old snapshot).
    force_register: bool = True
    compress_register_bytes: int = 64 * 1024
    # enableSplitRegistration / splitRegistrationSize (5.x): a table of more topics than
    # the size is registered in parts of that many, so it never needs a frame past
    # 16 MiB; the NameServer registers the merged table at the last part.
    split_registration: bool = False
    split_registration_size: int = 800
    fast_heartbeat: bool = False
    heartbeat_interval_ms: int = 1_000
    heartbeat_timeout_ms: int = 10_000
    slave_timeout_ms: int = 3_000
    slave_sync_interval_ms: int = 10_000
    slave_sync_initial_delay_ms: int = 3_000
    ha_master_address: str | None = None
    auto_create_topic: bool = True
    default_topic_queue_nums: int = 4
    broker_permission: int = 6
    segment_bytes: int = 64 * 1024 * 1024
    record_bytes_max: int = 4 * 1024 * 1024 + 1024
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500
    ha: HAConfig = field(default_factory=HAConfig)
    # The HA link's shared secret (docs/SECURITY.md, "broker_app's HA port"): master and
    # slaves prove it to each other before the classic stream. Without a file nothing is
    # replicated (the master refuses every peer, a slave does not connect);
    # haAuthEnable=false is RocketMQ's unauthenticated stream, only when asked.
    ha_auth_enabled: bool = True
    ha_secret_file: Path | None = None
    ready_file: Path | None = None
    # Raft failover (docs/RAFT.md, "Failover"): report offsets, opt the group in,
    # and take this role when the NameServers elect this slave.
    raft_failover: bool = False
    failover_master_role: BrokerRole = BrokerRole.ASYNC_MASTER
    # The NameServers' remoting ACL: the account this broker signs its registrations,
    # heartbeats and unregistrations with (unsigned when empty, which the NameServers
    # accept only from white-listed addresses).
    namesrv_access_key: str = ""
    namesrv_secret_key_file: Path | None = None
    # This broker's own remoting ACL (docs/SECURITY.md): topic creation and deletion need
    # an admin signature; NOTIFY_MIN_BROKER_ID_CHANGE a signature or a white-listed NameServer.
    # Without a file: no accounts, loopback white-listed. Off only when asked.
    acl_enabled: bool = True
    acl_file: Path | None = None
    # TLS (remoting/tls.py): a tls.properties in upstream's keys, as the JVM's
    # -Dtls.config.file. Its tls.server.* side serves this broker's remoting port
    # (permissive: TLS and plain clients alike), its tls.enable / tls.client.* side is how
    # this broker reaches the NameServers. Without it: a plain port, and the client side
    # from NAMESRV_TLS_CONFIG_FILE when that is set.
    tls_config_file: Path | None = None
    # Consumers (broker_app/consume_processor.py). slaveReadEnable is on here (upstream:
    # off) so that consumers go on from the slave while the master is gone; the pull
    # answer's suggestWhichBrokerId sends a consumer to the slave when what it has
    # left to read exceeds accessMessageInMemoryMaxRatio percent of memory_bytes
    # (0: the machine's physical memory, as upstream's TOTAL_PHYSICAL_MEMORY_SIZE).
    slave_read_enable: bool = True
    long_polling_enable: bool = True
    short_polling_ms: int = 1_000
    access_message_in_memory_max_ratio: int = 40
    memory_bytes: int = 0
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    channel_expired_ms: int = 120_000
    consumer_offset_flush_interval_ms: int = 5_000

    @property
    def effective_register_period_ms(self) -> int:
        """``max(10000, min(registerNameServerPeriod, 60000))`` as BrokerController does."""
        return max(REGISTER_PERIOD_MIN_MS, min(self.register_period_ms, REGISTER_PERIOD_MAX_MS))

    @property
    def is_slave(self) -> bool:
        """True for the SLAVE role."""
        return self.role is BrokerRole.SLAVE

    def address_server(self) -> WsAddr | None:
        """The address server to follow (``fetchNamesrvAddrByAddressServer``), else None;
        ConfigError when its domain or subgroup is malformed."""
        if not self.fetch_namesrv_addr_by_address_server:
            return None
        if not self.namesrv_domain:
            raise ConfigError(
                "fetchNamesrvAddrByAddressServer=true needs rocketmq.namesrv.domain "
                "(host:port of a NameServer's web port); upstream's default, "
                "jmenv.tbsite.net, is not reachable outside Alibaba"
            )
        try:
            return ws_addr(self.namesrv_domain, self.namesrv_domain_subgroup)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def namesrv_credentials(self) -> Credentials | None:
        """The account to sign NameServer requests with; ConfigError if unreadable."""
        try:
            return load_credentials(self.namesrv_access_key, self.namesrv_secret_key_file)
        except ValueError as exc:
            raise ConfigError(f"namesrvAccessKey/namesrvSecretKeyFile: {exc}") from exc

    def ha_auth(self) -> HAAuth:
        """How the HA links authenticate; ConfigError for a secret file that cannot be used
        (:meth:`validate` refuses a file together with ``haAuthEnable=false``)."""
        if not self.ha_auth_enabled:
            return HAAuth.classic()
        if self.ha_secret_file is None:
            return HAAuth()
        try:
            return HAAuth(load_key(self.ha_secret_file))
        except ValueError as exc:  # its message names haSecretFile
            raise ConfigError(str(exc)) from exc

    def remoting_acl(self) -> RemotingAcl | None:
        """The ACL of this broker's remoting port (None when turned off)."""
        if not self.acl_enabled:
            return None
        try:
            source = AclConfig.default() if self.acl_file is None else AclFile(self.acl_file)
        except AclConfigError as exc:
            raise ConfigError(str(exc)) from exc
        return RemotingAcl(
            source,
            admin_codes=BROKER_ADMIN_CODES,
            white_listable_codes=NAMESRV_PUSH_CODES,
            white_listable_kind="NameServer",
        )

    def tls(self) -> tuple[ServerTls | None, ClientTlsChoice]:
        """The remoting port's TLS (None: plain) and how the client reaches the
        NameServers, from ``tlsConfigFile``; ConfigError when it does not load."""
        if self.tls_config_file is None:
            return None, ClientTls.PROCESS
        try:
            server, client = read_tls_properties(self.tls_config_file)
            server_tls = None if server.mode is TlsMode.DISABLED else ServerTls(server)
            return server_tls, client_context(client) if client.enabled else ClientTls.PLAIN
        except TlsConfigError as exc:
            raise ConfigError(f"tlsConfigFile: {exc}") from exc

    def store_config(self) -> StoreConfig:
        """The message store part of this config."""
        return StoreConfig(
            store_dir=self.store_dir,
            segment_bytes=self.segment_bytes,
            record_bytes_max=self.record_bytes_max,
            flush_disk_type=self.flush_disk_type,
            flush_interval_ms=self.flush_interval_ms,
        )

    def validate(self) -> None:
        """Raise :class:`ConfigError` for a setting, or a mix of them, that cannot work."""
        if self.is_slave != (self.broker_id != 0):
            raise ConfigError("brokerId must be 0 for a master and positive for a SLAVE")
        if self.broker_id < 0:
            raise ConfigError("brokerId must not be negative")
        if not 0 <= self.port <= PORT_MAX or not 0 <= self.ha_port <= PORT_MAX:
            raise ConfigError("ports must be within 0..65535")
        if min(self.heartbeat_interval_ms, self.slave_timeout_ms, self.flush_interval_ms) <= 0:
            raise ConfigError("intervals and timeouts must be positive")
        if self.split_registration_size < 1:
            raise ConfigError("splitRegistrationSize must be at least 1 topic")
        if self.record_bytes_max + 8 > self.segment_bytes:
            raise ConfigError("mappedFileSizeCommitLog must exceed the largest record")
        if self.failover_master_role is BrokerRole.SLAVE:
            raise ConfigError("failoverMasterRole must be ASYNC_MASTER or SYNC_MASTER")
        if not self.cluster_name or not self.broker_name:
            raise ConfigError("brokerClusterName and brokerName must be set")
        self._validate_address_server()
        if (
            min(
                self.short_polling_ms,
                self.channel_expired_ms,
                self.consumer_offset_flush_interval_ms,
            )
            <= 0
            or self.memory_bytes < 0
        ):
            raise ConfigError("consumer intervals must be positive and memory_bytes not negative")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ConfigError("accessMessageInMemoryMaxRatio must be within 0..100")
        try:
            parse_delay_levels(self.message_delay_level)
        except DelayLevelError as exc:
            raise ConfigError(str(exc)) from exc
        try:
            self.ha.validate()
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if not self.ha_auth_enabled and self.ha_secret_file is not None:
            raise ConfigError(
                "haAuthEnable=false and haSecretFile are both set: remove haSecretFile for "
                "the classic unauthenticated HA stream, or haAuthEnable=false to authenticate"
            )

    def _validate_address_server(self) -> None:
        if self.address_server() is None:
            return
        if self.namesrv_addrs:
            # BrokerController follows namesrvAddr and ignores the flag then; say so
            # instead of ignoring a key.
            raise ConfigError(
                "namesrvAddr and fetchNamesrvAddrByAddressServer=true are both set: the "
                "broker registers with one list, so keep one of them"
            )
        if self.fetch_namesrv_addr_interval_ms < FETCH_INTERVAL_MIN_MS:
            raise ConfigError(
                f"fetchNamesrvAddrInterval must be at least {FETCH_INTERVAL_MIN_MS} ms"
            )


# RocketMQ broker.conf names -> our field names.
ALIASES: dict[str, str] = {
    "brokerClusterName": "cluster_name",
    "brokerName": "broker_name",
    "brokerId": "broker_id",
    "brokerIP1": "host",
    "listenPort": "port",
    "haListenPort": "ha_port",
    "brokerRole": "role",
    "namesrvAddr": "namesrv_addrs",
    "fetchNamesrvAddrByAddressServer": "fetch_namesrv_addr_by_address_server",
    # The JVM properties MixAll.getWSAddr() reads, and the broker.conf names that
    # BrokerStartup.properties2SystemEnv copies into them.
    "rocketmq.namesrv.domain": "namesrv_domain",
    "rmqAddressServerDomain": "namesrv_domain",
    "rocketmq.namesrv.domain.subgroup": "namesrv_domain_subgroup",
    "rmqAddressServerSubGroup": "namesrv_domain_subgroup",
    "fetchNamesrvAddrInterval": "fetch_namesrv_addr_interval_ms",
    "storePathRootDir": "store_dir",
    "registerNameServerPeriod": "register_period_ms",
    "registerBrokerTimeoutMills": "register_timeout_ms",
    "forceRegister": "force_register",
    "enableSplitRegistration": "split_registration",
    "splitRegistrationSize": "split_registration_size",
    "slaveTimeout": "slave_timeout_ms",
    "haMasterAddress": "ha_master_address",
    "autoCreateTopicEnable": "auto_create_topic",
    "defaultTopicQueueNums": "default_topic_queue_nums",
    "brokerPermission": "broker_permission",
    "mappedFileSizeCommitLog": "segment_bytes",
    "flushDiskType": "flush_disk_type",
    "flushIntervalCommitLog": "flush_interval_ms",
    "brokerHeartbeatInterval": "heartbeat_interval_ms",
    "brokerNotActiveTimeoutMillis": "heartbeat_timeout_ms",
    "haSendHeartbeatInterval": "ha.heartbeat_interval_ms",
    "haHousekeepingInterval": "ha.housekeeping_interval_ms",
    "haTransferBatchSize": "ha.transfer_batch_bytes",
    "haSlaveFallbehindMax": "ha.slave_fallbehind_max_bytes",
    "haAuthEnable": "ha_auth_enabled",
    "haSecretFile": "ha_secret_file",
    "enableRaftFailover": "raft_failover",
    "failoverMasterRole": "failover_master_role",
    "namesrvAccessKey": "namesrv_access_key",
    "namesrvSecretKeyFile": "namesrv_secret_key_file",
    "aclEnable": "acl_enabled",
    "aclFile": "acl_file",
    "tlsConfigFile": "tls_config_file",
    "slaveReadEnable": "slave_read_enable",
    "longPollingEnable": "long_polling_enable",
    "shortPollingTimeMills": "short_polling_ms",
    "accessMessageInMemoryMaxRatio": "access_message_in_memory_max_ratio",
    "messageDelayLevel": "message_delay_level",
    "channelExpiredTimeout": "channel_expired_ms",
    "flushConsumerOffsetInterval": "consumer_offset_flush_interval_ms",
}

_SCHEMA = schema.type_info(BrokerConfig)
"""BrokerConfig as msgspec sees it: the schema :func:`build_config` converts to."""


_TOP = {f.name: f.type for f in msgspec_errors.fields(_SCHEMA)}
_HA = {f.name: f.type for f in msgspec_errors.fields(_TOP["ha"])}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_BLANK_IS_NONE = frozenset({"ha_secret_file", "tls_config_file", "ha_master_address"})
"""Settings whose blank value (a broker.conf line left empty) is "none", not the current
folder or an empty address."""
_CONF_NAMES = {name: alias for alias, name in reversed(ALIASES.items())}


def read_config_file(path: Path) -> dict[str, Any]:
    """The raw settings of a JSON or properties file (JSON when it starts with ``{``)."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        loaded = json.loads(text)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: a JSON config must be an object")
        return loaded
    return dict(decode_properties(text.encode("utf-8")))


def build_config(settings: dict[str, Any]) -> BrokerConfig:
    """A validated :class:`BrokerConfig` from raw settings (file values, then flags).

    msgspec converts the settings to BrokerConfig's own fields and types (text to
    integers, enums, paths, the nested HAConfig); a value that does not fit is a
    ConfigError naming the key as the user wrote it (``brokerId must be a whole number,
    got 'x'``)."""
    tree, written = _settings_tree(settings)
    try:
        config = msgspec.convert(tree, BrokerConfig, strict=False, dec_hook=_decode_path)
    except msgspec.ValidationError as exc:
        raise ConfigError(_explain(str(exc), written, settings)) from None
    config.validate()
    return config


def _settings_tree(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """The settings in BrokerConfig's shape, HA ones under ``ha``, each value in the form
    msgspec is given (:func:`_text_form`); and which key the user wrote for each field."""
    top: dict[str, Any] = {}
    ha: dict[str, Any] = {}
    written: dict[tuple[str, ...], str] = {}
    path: tuple[str, ...]
    for raw_name, value in settings.items():
        if value is None:
            continue
        name = ALIASES.get(raw_name, raw_name)
        if name.startswith("ha.") or (name in _HA and name not in _TOP):
            table, kinds, path = ha, _HA, ("ha", name.removeprefix("ha."))
        else:
            table, kinds, path = top, _TOP, (name,)
        key = path[-1]
        if key not in kinds or path == ("ha",):
            raise ConfigError(f"unknown setting {raw_name!r}")
        table[key] = _text_form(raw_name, key, kinds[key], value)
        written[path] = raw_name
    return {**top, "ha": ha}, written


def _text_form(raw_name: str, name: str, kind: schema.Type, value: Any) -> Any:
    """``value`` as msgspec is given it: text without the blanks around it.

    A broker.conf holds only text, and a JSON value or a flag is read by the same rule
    (``5`` as ``"5"``, ``true`` as ``"True"``), so a JSON ``1`` is no more a boolean than
    a properties ``1``. Three rules are ours, not msgspec's lax reading of text: a whole
    number is digits with an optional sign, as Java's ``Integer.parseInt`` reads it, a boolean
    is ``true`` or ``false`` in any case, as :func:`~remoting.properties.config_boolean`
    says (msgspec would also take ``1`` and ``0``, which Java's ``Boolean.parseBoolean``
    silently reads as false), and an enum is named in any case (``slave``). A list
    (``namesrvAddr``) is ';'-separated text or a JSON list."""
    bare = msgspec_errors.bare(kind)
    if isinstance(bare, schema.VarTupleType) and not isinstance(value, dict):
        items = value if isinstance(value, list | tuple) else str(value).split(";")
        return [str(item).strip() for item in items if str(item).strip()]
    if isinstance(value, list | dict):
        return value  # msgspec refuses it, naming the type it wanted
    text = str(value).strip()
    if isinstance(bare, schema.BoolType):
        try:
            return config_boolean(raw_name, text)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if isinstance(bare, schema.EnumType):
        return text.upper()
    if isinstance(bare, schema.IntType):
        # Java's Integer.parseInt: digits with an optional sign (msgspec alone would
        # also read "5.0" and "1e3" as whole numbers).
        if _JAVA_INT.fullmatch(text) is None:
            raise ConfigError(f"{raw_name} must be {msgspec_errors.describe(kind)}, got {value!r}")
        return int(text)
    if not text and name in _BLANK_IS_NONE:
        return None
    return text


def _decode_path(kind: type, value: Any) -> Any:
    """msgspec's hook for the one field type it does not know, :class:`Path`."""
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError(f"Expected `{kind.__name__}`, got `{type(value).__name__}`")


def _explain(message: str, written: dict[tuple[str, ...], str], settings: dict[str, Any]) -> str:
    """msgspec's complaint as ``<the key the user wrote> must be <type>, got <value>``."""
    text, path = msgspec_errors.split(message)
    if name := msgspec_errors.missing_field(text):
        return f"{_CONF_NAMES.get(name, name)} ({name}) must be set"
    if not path:
        return message
    raw_name = written.get(tuple(map(str, path)), ".".join(map(str, path)))
    kind = msgspec_errors.info_at(_SCHEMA, path)
    return f"{raw_name} must be {msgspec_errors.describe(kind)}, got {settings.get(raw_name)!r}"


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port) for the ``--address`` flag."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"address must be host:port, got {address!r}")
    return host, int(port)

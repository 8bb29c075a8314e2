"""What our brokers report of their HA links, for raft failover (our header fields).

A broker of a raft failover group adds to its REGISTER_BROKER, BROKER_HEARTBEAT and
QUERY_DATA_VERSION:

* a slave, ``haClientAddr``: the local address (``host:port``) of its HA connection to
  its master, while it has one;
* a master, ``haSlaveAcks``: for each HA connection that passed the handshake, its peer
  address and the commit-log offset it acknowledged, ``host:port=offset`` joined by
  commas (``127.0.0.1:51001=4096,127.0.0.1:51007=4000``), empty with no slave.

Both sides see the same TCP connection, so the two addresses match; the election
trusts a slave's progress only as its master reports it (docs/RAFT.md, "Failover").
Upstream brokers send neither field. Reading bounds both: at most
:data:`SLAVE_ACKS_MAX` links, addresses of at most :data:`ADDR_CHARS_MAX` characters.
"""

from __future__ import annotations

from collections.abc import Iterable

from remoting.command import RemotingCommand
from remoting.errors import HeaderFieldError
from remoting.headers import header_str

HA_CLIENT_ADDR_FIELD = "haClientAddr"
HA_SLAVE_ACKS_FIELD = "haSlaveAcks"
SLAVE_ACKS_MAX = 32
"""Most HA links a master's report lists (brokers run one or two slaves)."""
ADDR_CHARS_MAX = 255
_OFFSET_MAX = 2**63 - 1

SlaveAcks = tuple[tuple[str, int], ...]


def encode_slave_acks(acks: Iterable[tuple[str, int]]) -> str:
    """``haSlaveAcks``'s text for ``acks`` (peer address, acknowledged offset)."""
    return ",".join(f"{addr}={offset:d}" for addr, offset in acks)


def _addr(text: str, field: str) -> str:
    host, colon, port = text.rpartition(":")
    if not (host and colon and port.isdigit()) or len(text) > ADDR_CHARS_MAX:
        raise HeaderFieldError(f"the custom field <{field}> holds no host:port: {text[:64]!r}")
    return text


def decode_slave_acks(text: str) -> SlaveAcks:
    """The links of a ``haSlaveAcks`` text; :class:`HeaderFieldError` naming the field
    for anything else (more than :data:`SLAVE_ACKS_MAX`, a bad address or offset)."""
    if not text:
        return ()
    items = text.split(",", SLAVE_ACKS_MAX)
    if len(items) > SLAVE_ACKS_MAX:
        raise HeaderFieldError(
            f"the custom field <{HA_SLAVE_ACKS_FIELD}> lists more than {SLAVE_ACKS_MAX} links"
        )
    acks: list[tuple[str, int]] = []
    for item in items:
        addr, equals, offset = item.rpartition("=")
        if not equals or not offset.isdigit() or len(offset) > 19 or int(offset) > _OFFSET_MAX:
            raise HeaderFieldError(
                f"the custom field <{HA_SLAVE_ACKS_FIELD}> holds no addr=offset: {item[:64]!r}"
            )
        acks.append((_addr(addr, HA_SLAVE_ACKS_FIELD), int(offset)))
    return tuple(acks)


def read_ha_report(request: RemotingCommand) -> tuple[str | None, SlaveAcks | None]:
    """(``haClientAddr``, ``haSlaveAcks``) of ``request``, each None when absent."""
    client = header_str(request, HA_CLIENT_ADDR_FIELD)
    acks = header_str(request, HA_SLAVE_ACKS_FIELD)
    return (
        None if client is None else _addr(client, HA_CLIENT_ADDR_FIELD),
        None if acks is None else decode_slave_acks(acks),
    )

"""What a broker says of its HA links: to the NameServers for raft failover
(:mod:`remoting.ha_report`), and in GET_BROKER_RUNTIME_INFO.

A master knows each slave by the peer address of its authenticated HA connection and the
offset it acknowledged; a slave knows the local address of its connection to the master.
Both ends see the same TCP connection, so the NameServer can tell which registered slave
its master vouches for (raftstore/failover.py).
"""

from __future__ import annotations

from broker_app.ha.auth import HAAuth
from broker_app.ha.client import HAClient
from broker_app.ha.service import HAService
from remoting.ha_report import (
    HA_CLIENT_ADDR_FIELD,
    HA_SLAVE_ACKS_FIELD,
    SLAVE_ACKS_MAX,
    encode_slave_acks,
)


def report_fields(service: HAService | None, client: HAClient | None) -> dict[str, str]:
    """The ``haSlaveAcks`` of a master (``service``), or the ``haClientAddr`` of a slave
    whose ``client`` is connected; empty otherwise."""
    if service is not None:
        slaves = service.slaves()[:SLAVE_ACKS_MAX]
        return {HA_SLAVE_ACKS_FIELD: encode_slave_acks((s.address, s.ack_offset) for s in slaves)}
    if client is not None and client.local_address is not None:
        return {HA_CLIENT_ADDR_FIELD: client.local_address}
    return {}


def runtime_fields(
    service: HAService | None, client: HAClient | None, auth: HAAuth
) -> dict[str, str]:
    """The HA rows of GET_BROKER_RUNTIME_INFO (upstream's names where they exist)."""
    info: dict[str, str] = {}
    if service is not None:
        info["haConnections"] = str(len(service.slaves()))
        info["haPushToSlaveMaxOffset"] = str(service.push_to_slave_max_offset)
        info["haRefusedConnections"] = str(service.refused_connections)
    if client is not None:
        info["haMasterAddress"] = client.master_address or ""
        info["haConnected"] = str(client.connected).lower()
    info["haAuth"] = auth.describe()
    return info

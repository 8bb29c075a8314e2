"""NOTIFY_MIN_BROKER_ID_CHANGE (905): the gateway tells a group when its minimum id moves."""

from __future__ import annotations

import asyncio

from gateway.options import GatewayOptions
from gateway.server import Gateway
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.model import TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from remoting.server import RemotingServer

RECEIVE_TIMEOUT_S = 5.0


def two_topics() -> TopicConfigSerializeWrapper:
    """Two topics, so the single-topic guard stays out of the way."""
    return TopicConfigSerializeWrapper(
        topic_config_table={t: TopicConfig(t, 4, 4) for t in ("T1", "T2")}
    )


async def test_a_slave_hears_when_a_lower_broker_id_registers() -> None:
    """A master (id 0) joining a slave-only group makes the gateway notify the slave one-way
    (NOTIFY_MIN_BROKER_ID_CHANGED seeds notifyMinBrokerIdChanged=true)."""
    received: asyncio.Queue[RemotingCommand] = asyncio.Queue(maxsize=8)

    async def slave_side(request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        received.put_nowait(request)
        return None

    slave = RemotingServer(slave_side, host="127.0.0.1", port=0)
    await slave.start()
    gateway = Gateway(GatewayOptions(node_id="n1", port=0, notify_min_broker_id_changed=True))
    slave_addr = f"127.0.0.1:{slave.port}"
    try:
        for broker_id, addr in ((1, slave_addr), (0, "127.0.0.1:10911")):
            await gateway.service.register_broker(
                BrokerRegistration(
                    cluster_name="DefaultCluster",
                    broker_addr=addr,
                    broker_name="broker-a",
                    broker_id=broker_id,
                    ha_server_addr="127.0.0.1:10912",
                    enable_acting_master=True,
                ),
                two_topics(),
            )
        notice = await asyncio.wait_for(received.get(), RECEIVE_TIMEOUT_S)
    finally:
        await gateway.client.close()
        await slave.close()
    assert notice.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
    assert notice.is_oneway
    assert notice.ext_fields == {
        "minBrokerId": "0",
        "minBrokerAddr": "127.0.0.1:10911",
        "haBrokerAddr": "127.0.0.1:10912",
    }

"""Channel close handling; covers upstream ``routeinfo/BrokerHousekeepingServiceTest``
(onChannelClose / onChannelException / onChannelIdle all map to ChannelDestroyed)."""

from __future__ import annotations

from raftstore.commands import ChannelDestroyed
from raftstore.route_table import RouteTable
from tests.raftstore.cast import ADDR_A0, ADDR_A1, BROKER_A, register, topics


def test_a_closed_channel_that_no_broker_uses_changes_nothing(table: RouteTable) -> None:
    """testOnChannelClose / testOnChannelException / testOnChannelIdle: no failure, no change."""
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"), channel="c1"
    )
    before = table.digest()
    result = table.apply(ChannelDestroyed("127.0.0.1:9876"))
    assert result.changes.empty and table.digest() == before


def test_a_closed_channel_unregisters_only_the_broker_it_carried(table: RouteTable) -> None:
    register(
        table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"), channel="m"
    )
    register(
        table, addr=ADDR_A1, name=BROKER_A, broker_id=1, topic_table=topics("T", "U"), channel="s"
    )
    result = table.apply(ChannelDestroyed("s"))
    assert table.broker_datas()[BROKER_A].broker_addrs == {0: ADDR_A0}
    assert table.live_broker("DefaultCluster", ADDR_A1) is None
    assert table.live_broker("DefaultCluster", ADDR_A0) is not None
    assert result.changes.broker_names == frozenset({BROKER_A})

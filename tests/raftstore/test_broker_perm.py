"""Ports of upstream ``routeinfo/RouteInfoManagerBrokerPermTest`` (2 tests).

Upstream replaces the topic table with ``{topic-0: {broker-0: perm 4}}``; here
REGISTER_TOPIC sets broker-0's queue of topic-0 to perm 4 in the static cluster.
"""

from __future__ import annotations

from raftstore.commands import AddWritePerm, DeleteTopic, WipeWritePerm
from raftstore.results import PermOutcome
from raftstore.route_table import RouteTable
from tests.raftstore.cast import perm_of, queue, register_topic


def read_only_topic_0(table: RouteTable) -> RouteTable:
    """Leave topic-0 as the only topic of broker-0, read-only."""
    for i in range(1, 10):
        table.apply(DeleteTopic(f"topic-{i}"))
    register_topic(table, "topic-0", queue("broker-0", perm=4))
    return table


def test_add_write_perm_counts_the_topic_and_restores_perm_6(static_table: RouteTable) -> None:
    """testAddWritePermOfBrokerByLock."""
    read_only_topic_0(static_table)
    assert static_table.apply(AddWritePerm("broker-0")).outcome == PermOutcome(topic_count=1)
    assert perm_of(static_table.pickup_topic_route("topic-0"), "broker-0") == 6


def test_wipe_write_perm_counts_the_topic_even_when_nothing_changes(
    static_table: RouteTable,
) -> None:
    """testWipeWritePermOfBrokerByLock: returns 1, perm stays 4, and no state changed."""
    read_only_topic_0(static_table)
    version = static_table.applied_version
    result = static_table.apply(WipeWritePerm("broker-0"))
    assert result.outcome == PermOutcome(topic_count=1)
    assert result.changes.empty and static_table.applied_version == version
    assert perm_of(static_table.pickup_topic_route("topic-0"), "broker-0") == 4

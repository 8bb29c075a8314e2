"""Property test: a registration answered as a heartbeat is one that changes nothing else.

Raft mode answers a REGISTER_BROKER from the applied state when
the plan of the registration holds only liveness edits
(``RouteTable.liveness_only_answer``) (``raftstore.liveness.RegistrationDeduper``). Here every such
answer is checked against really applying the registration to a copy of the
table: same answer, only liveness changed, and the same state as a heartbeat.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings, strategies as st

from raftstore.commands import BrokerHeartbeat, Command, RegisterBroker
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.raftstore.commands_strategy import BASE_MS, command_lists, register_brokers, times

EXAMPLES = 300
"""About one in five examples is answered as a heartbeat (measured)."""

offsets = st.none() | st.integers(0, 3)


def _without_channel(table: RouteTable) -> list[object]:
    return [dataclasses.replace(entry, channel=None) for entry in table.live_brokers()]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    command_lists,
    register_brokers,
    st.lists(register_brokers, max_size=3),
    times,
    offsets,
    offsets,
    st.booleans(),
)
def test_a_registration_answered_as_a_heartbeat_changes_only_liveness(
    commands: list[Command],
    first: RegisterBroker,
    between: list[RegisterBroker],
    now_ms: int,
    max_offset: int | None,
    confirm_offset: int | None,
    again: bool,
) -> None:
    table = RouteTable()
    for command in [*commands, first, *between]:
        table.apply(command)
    # The same registration again (a later periodic one, or another member's copy),
    # or an unrelated one.
    candidate = (
        dataclasses.replace(
            first, now_ms=now_ms, max_offset=max_offset, confirm_offset=confirm_offset
        )
        if again
        else dataclasses.replace(between[0] if between else first, now_ms=now_ms)
    )
    answer = table.liveness_only_answer(candidate)
    applied = RouteTable.restore(table.snapshot())
    result = applied.apply(candidate)
    if answer is None:
        return
    assert result.outcome == answer
    changes = result.changes
    assert not (
        changes.topics
        or changes.broker_names
        or changes.clusters
        or changes.kv
        or changes.kv_namespaces
        or changes.config
    ), changes
    touched = RouteTable.restore(table.snapshot())
    touched.apply(
        BrokerHeartbeat(
            cluster_name=candidate.cluster_name,
            broker_addr=candidate.broker_addr,
            now_ms=candidate.now_ms,
            max_offset=candidate.max_offset,
            confirm_offset=candidate.confirm_offset,
        )
    )
    assert touched.digests().client_view == applied.digests().client_view
    assert _without_channel(touched) == _without_channel(applied)


def test_a_repeated_registration_is_recognised() -> None:
    """The common case: a broker's next periodic registration (same DataVersion) is
    answered from state; a new DataVersion, a new topic or a new HA address is not."""
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=BASE_MS, counter=1),
        topic_config_table={t: TopicConfig(topic_name=t) for t in ("T1", "T2")},
    )
    first = RegisterBroker(
        cluster_name="c1",
        broker_addr="10.0.0.1:10911",
        broker_name="a",
        broker_id=0,
        ha_server_addr="10.0.0.1:10912",
        now_ms=BASE_MS,
        topic_config_wrapper=wrapper,
        enable_acting_master=False,
        channel="ch1",
    )
    slave = dataclasses.replace(first, broker_addr="10.0.0.2:10911", broker_id=1)
    table = RouteTable()
    table.apply(first)
    table.apply(slave)
    again = table.liveness_only_answer(dataclasses.replace(slave, now_ms=BASE_MS + 30_000))
    assert again is not None and again.master_addr == "10.0.0.1:10911"
    assert table.liveness_only_answer(dataclasses.replace(first, channel="ch2")) is not None
    newer = dataclasses.replace(wrapper, data_version=DataVersion(timestamp=BASE_MS, counter=2))
    more = dataclasses.replace(
        wrapper, topic_config_table={**wrapper.topic_config_table, "T3": TopicConfig("T3")}
    )
    for changed in (
        dataclasses.replace(first, topic_config_wrapper=newer),
        dataclasses.replace(first, topic_config_wrapper=more),
        dataclasses.replace(first, ha_server_addr="10.0.0.1:10999"),
        dataclasses.replace(first, broker_id=2),
        dataclasses.replace(first, topic_config_wrapper=None),
    ):
        assert table.liveness_only_answer(changed) is None, changed


@settings(max_examples=100, deadline=None)
@given(command_lists, register_brokers)
def test_planning_a_registration_changes_nothing(
    commands: list[Command], candidate: RegisterBroker
) -> None:
    table = RouteTable()
    for command in commands:
        table.apply(command)
    before = table.snapshot()
    answer = table.liveness_only_answer(candidate)
    assert table.snapshot() == before
    # And applying it gives the same answer.
    assert answer is None or table.apply(candidate).outcome == answer

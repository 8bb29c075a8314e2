"""A registration whose topic table is elided (``RegisterBroker.topics_elided``) gives
exactly the state the whole registration gives, or changes nothing and asks for it.

Raft mode replicates a broker's registration without its topic table when the table is
the one the broker registered last (same ``topics_digest``) and only the DataVersion
moved. Apply trusts that only while ``Tables.registered`` still records the table:
``raftstore.registration.elided_topics_hold``. The property test runs random command histories
on two tables, one given the elided form and one the whole registration, and checks
they never differ.
"""

from __future__ import annotations

import dataclasses
import hashlib

from hypothesis import given, settings, strategies as st

from raftstore.commands import Command, DeleteTopic, RegisterBroker, UpdateNamesrvConfig
from raftstore.results import RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.raftstore import cast
from tests.raftstore.commands_strategy import (
    commands,
    register_brokers,
    times,
    topic_configs,
    versions,
)

EXAMPLES = 300
TAKEN: list[int] = []  # elided registrations applied per example (see the last test)


# Masters registering tables of two or more topics without queue mappings: the
# registrations that get recorded, mixed into otherwise random histories.
def _as_master(
    command: RegisterBroker, table: list[TopicConfig], dv: DataVersion
) -> RegisterBroker:
    wrapper = TopicConfigSerializeWrapper(
        data_version=dv, topic_config_table={tc.topic_name or "": tc for tc in table}
    )
    return dataclasses.replace(command, broker_id=0, topic_config_wrapper=wrapper)


masters = st.builds(
    _as_master,
    register_brokers,
    st.lists(topic_configs, min_size=2, max_size=4, unique_by=lambda tc: tc.topic_name),
    versions,
)
histories = st.lists(st.one_of(commands, masters), max_size=40)


def _with_digest(command: RegisterBroker) -> RegisterBroker:
    """``command`` carrying a digest of its table, as the gateway computes one."""
    wrapper = command.topic_config_wrapper
    if wrapper is None:
        return command
    named = repr(
        (
            sorted(wrapper.topic_config_table.items()),
            sorted(wrapper.topic_queue_mapping_info_map.items()),
            command.filter_server_list,
        )
    )
    return dataclasses.replace(
        command, topics_digest=hashlib.blake2b(named.encode(), digest_size=16).digest()
    )


def _elided(command: RegisterBroker, dv: DataVersion, now_ms: int) -> RegisterBroker:
    return dataclasses.replace(
        command,
        now_ms=now_ms,
        topics_elided=True,
        topic_config_wrapper=TopicConfigSerializeWrapper(data_version=dv),
    )


def _whole(command: RegisterBroker, dv: DataVersion, now_ms: int) -> RegisterBroker:
    wrapper = command.topic_config_wrapper
    assert wrapper is not None
    return dataclasses.replace(
        command, now_ms=now_ms, topic_config_wrapper=dataclasses.replace(wrapper, data_version=dv)
    )


@settings(max_examples=EXAMPLES, deadline=None)
@given(histories, st.data())
def test_an_elided_registration_equals_the_whole_one_or_asks_for_it(
    history: list[Command], data: st.DataObject
) -> None:
    elided_table, whole_table = RouteTable(), RouteTable()
    registered: list[RegisterBroker] = []
    taken = 0
    for command in history:
        if isinstance(command, RegisterBroker):
            command = _with_digest(command)
            if command.topic_config_wrapper is not None:
                registered.append(command)
        elided_table.apply(command)
        whole_table.apply(command)
        if not registered or not data.draw(st.booleans()):
            continue
        again = data.draw(st.sampled_from(registered[-3:]))  # recent: often still recorded
        dv, now_ms = data.draw(versions), data.draw(times)
        before = elided_table.digests().full
        result = elided_table.apply(_elided(again, dv, now_ms))
        whole = whole_table.apply(_whole(again, dv, now_ms))
        outcome = result.outcome
        assert isinstance(outcome, RegisterBrokerOutcome)
        if outcome.needs_full:
            assert result.changes.empty and elided_table.digests().full == before
            elided_table.apply(_whole(again, dv, now_ms))
        else:
            taken += 1
            assert outcome == whole.outcome
            assert not (result.changes.topics - whole.changes.topics)
        assert elided_table.digests().full == whole_table.digests().full
    restored = RouteTable.restore(elided_table.snapshot())
    assert restored.digests().full == elided_table.digests().full
    TAKEN.append(taken)


def _master(topics: dict[str, TopicConfig] | None = None, counter: int = 1) -> RegisterBroker:
    table = cast.topics("T1", "T2", "T3") if topics is None else topics
    return _with_digest(
        RegisterBroker(
            cluster_name=cast.DEFAULT_CLUSTER,
            broker_addr=cast.ADDR_A0,
            broker_name=cast.BROKER_A,
            broker_id=0,
            ha_server_addr=cast.HA_A0,
            now_ms=cast.NOW_MS,
            topic_config_wrapper=cast.wrapper(
                table, DataVersion(timestamp=cast.NOW_MS, counter=counter)
            ),
            filter_server_list=(),
            enable_acting_master=False,
        )
    )


def _outcome(table: RouteTable, command: RegisterBroker) -> RegisterBrokerOutcome:
    outcome = table.apply(command).outcome
    assert isinstance(outcome, RegisterBrokerOutcome)
    return outcome


def test_the_common_case_and_each_reason_to_ask_for_the_table() -> None:
    table = RouteTable()
    first = _master()
    table.apply(first)
    dv2 = DataVersion(timestamp=cast.NOW_MS, counter=2)
    # Same table, new DataVersion: applied without the table.
    result = table.apply(_elided(first, dv2, cast.NOW_MS + 1))
    assert isinstance(result.outcome, RegisterBrokerOutcome) and not result.outcome.needs_full
    live = table.live_broker(cast.DEFAULT_CLUSTER, cast.ADDR_A0)
    assert live is not None and live.data_version == dv2
    assert not result.changes.topics
    assert table.liveness_only_answer(_elided(first, dv2, cast.NOW_MS + 2)) is not None

    # An operator deleted a topic: the broker's next registration must bring it back,
    # so the elided form is refused and the whole table is needed.
    table.apply(DeleteTopic("T2"))
    dv3 = DataVersion(timestamp=cast.NOW_MS, counter=3)
    assert _outcome(table, _elided(first, dv3, cast.NOW_MS + 3)).needs_full
    assert table.liveness_only_answer(_elided(first, dv3, cast.NOW_MS + 3)) is None
    table.apply(_whole(first, dv3, cast.NOW_MS + 3))
    assert table.pickup_topic_route("T2") is not None
    # Recorded again by the whole registration.
    dv4 = DataVersion(timestamp=cast.NOW_MS, counter=4)
    assert not _outcome(table, _elided(first, dv4, cast.NOW_MS + 4)).needs_full

    # Another table (digest), a slave, a changed deleteTopicWithBrokerRegistration.
    other = _master(cast.topics("T1", "T9"))
    assert _outcome(table, _elided(other, dv4, cast.NOW_MS + 5)).needs_full
    slave = dataclasses.replace(first, broker_addr=cast.ADDR_A1, broker_id=1)
    assert _outcome(table, _elided(slave, dv4, cast.NOW_MS + 5)).needs_full
    table.apply(UpdateNamesrvConfig((("deleteTopicWithBrokerRegistration", "true"),)))
    assert _outcome(table, _elided(first, dv4, cast.NOW_MS + 6)).needs_full
    assert table.registered_topics_digest(cast.BROKER_A) == first.topics_digest


def test_the_record_survives_a_snapshot() -> None:
    table = RouteTable()
    first = _master()
    table.apply(first)
    restored = RouteTable.restore(table.snapshot())
    assert restored.registered_topics_digest(cast.BROKER_A) == first.topics_digest
    assert restored.digests() == table.digests()
    dv2 = DataVersion(timestamp=cast.NOW_MS, counter=2)
    assert not _outcome(restored, _elided(first, dv2, cast.NOW_MS + 1)).needs_full
    # The client view does not include it: a table without the record looks the same.
    plain = RouteTable()
    plain.apply(dataclasses.replace(first, topics_digest=None))
    assert plain.digests().client_view == table.digests().client_view
    assert plain.digests().full != table.digests().full


def test_the_property_test_applied_elided_registrations() -> None:
    """Runs after the property test (file order): it must have exercised the case."""
    if TAKEN:
        assert sum(TAKEN) >= len(TAKEN) // 10, TAKEN

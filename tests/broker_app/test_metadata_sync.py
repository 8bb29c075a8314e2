"""SlaveSynchronize bodies: what a master answers and how a slave applies it."""

from __future__ import annotations

from broker_app.metadata import BrokerMetadata, MetadataSnapshot
from remoting.model import DataVersion, TopicConfig


def master_metadata() -> BrokerMetadata:
    metadata = BrokerMetadata(MetadataSnapshot())
    metadata.upsert_topic(TopicConfig("TopicA", 8, 8), 1_000)
    metadata.upsert_subscription_group("GroupA", {"consumeEnable": True}, 2_000)
    metadata.commit_offset("TopicA", "GroupA", 3, 42)
    metadata.set_delay_offsets({1: 10, 2: 20})
    return metadata


def test_offset_bodies_use_fastjsons_unquoted_integer_keys() -> None:
    master = master_metadata()
    assert b'"offsetTable":{"TopicA@GroupA":{3:42}}' in master.encode_consumer_offsets()
    assert master.encode_delay_offsets() == b'{"offsetTable":{1:10,2:20}}'


def test_a_slave_takes_everything_from_a_master_with_newer_versions() -> None:
    master = master_metadata()
    slave = BrokerMetadata(MetadataSnapshot())
    assert slave.apply_master_topics(master.encode_topics())
    assert slave.apply_master_subscription_groups(master.encode_subscription_groups())
    slave.apply_master_consumer_offsets(master.encode_consumer_offsets())
    slave.apply_master_delay_offsets(master.encode_delay_offsets())
    copied = slave.snapshot
    assert copied.topics["TopicA"].read_queue_nums == 8
    assert copied.topic_version == DataVersion(0, 1_000, 1)
    assert copied.subscription_groups["GroupA"]["consumeEnable"] is True
    assert copied.consumer_offsets == {"TopicA@GroupA": {3: 42}}
    assert copied.delay_offsets == {1: 10, 2: 20}


def test_an_unchanged_topic_version_is_not_applied_again() -> None:
    master = master_metadata()
    slave = BrokerMetadata(MetadataSnapshot())
    slave.apply_master_topics(master.encode_topics())
    assert not slave.apply_master_topics(master.encode_topics())

"""Broker metadata survives a restart through the broker_app tables."""

from __future__ import annotations

import pytest

from broker_app.metadata import BrokerMetadata, MetadataSnapshot
from broker_app.persistence import DjangoMetadataRepository
from remoting.model import DataVersion, TopicConfig

pytestmark = pytest.mark.django_db


def test_a_saved_snapshot_loads_back_identically() -> None:
    metadata = BrokerMetadata(MetadataSnapshot())
    metadata.upsert_topic(TopicConfig("TopicA", 8, 4, 6, "SINGLE_TAG", 1, True, {"k": "v"}), 5)
    metadata.upsert_subscription_group("GroupA", {"consumeEnable": True}, 6)
    metadata.commit_offset("TopicA", "GroupA", 2, 99)
    snapshot = metadata.set_delay_offsets({3: 7})
    repository = DjangoMetadataRepository("DefaultCluster", "broker-a", 0, role="SYNC_MASTER")
    assert repository.load() is None
    repository.save(snapshot)
    loaded = repository.load()
    assert loaded is not None
    assert dict(loaded.topics) == dict(snapshot.topics)
    assert loaded.topic_version == DataVersion(0, 5, 1)
    assert loaded.consumer_offsets == {"TopicA@GroupA": {2: 99}}
    assert loaded.delay_offsets == {3: 7}
    assert loaded.subscription_groups["GroupA"]["groupName"] == "GroupA"


def test_brokers_keep_separate_rows() -> None:
    master = DjangoMetadataRepository("DefaultCluster", "broker-a", 0)
    slave = DjangoMetadataRepository("DefaultCluster", "broker-a", 1)
    master.save(MetadataSnapshot(topics={"OnlyMaster": TopicConfig("OnlyMaster")}))
    slave.save(MetadataSnapshot())
    loaded = slave.load()
    assert loaded is not None and dict(loaded.topics) == {}

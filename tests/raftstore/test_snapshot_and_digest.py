"""The snapshot codec and the state digest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raftstore.commands import BrokerHeartbeat, PutKV, UpdateNamesrvConfig
from raftstore.route_table import RouteTable
from raftstore.snapshot import FORMAT_VERSION, MAGIC
from remoting.model import TopicQueueMappingInfo
from tests.raftstore.cast import (
    ADDR_A0,
    ADDR_A1,
    BROKER_A,
    DEFAULT_CLUSTER,
    NOW_MS,
    register,
    topics,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTED_DIGEST = """
from raftstore.route_table import RouteTable
from tests.raftstore.test_snapshot_and_digest import populated
print(populated(RouteTable()).digest())
"""


def populated(table: RouteTable) -> RouteTable:
    """A table with something in every table, config included."""
    info = TopicQueueMappingInfo(
        topic="T", total_queues=2, bname=BROKER_A, curr_id_map={1: 0, 0: 1}
    )
    register(
        table,
        addr=ADDR_A0,
        name=BROKER_A,
        broker_id=0,
        topic_table=topics("T", "U", "V"),
        filter_servers=["f:1", "f:2"],
        mappings={"T": info},
        zone="z",
        channel="c",
    )
    register(table, addr=ADDR_A1, name=BROKER_A, broker_id=1, cluster="Other", acting=True)
    table.apply(PutKV("ORDER_TOPIC_CONFIG", "T", "broker-a:8"))
    table.apply(PutKV("ns", "k", "v"))
    table.apply(UpdateNamesrvConfig((("supportActingMaster", "true"),)))
    return table


def test_a_restored_table_answers_exactly_like_the_original() -> None:
    original = populated(RouteTable())
    restored = RouteTable.restore(original.snapshot())
    assert restored.digest() == original.digest()
    assert restored.config == original.config
    assert (restored.applied_version, restored.routes_version) == (
        original.applied_version,
        original.routes_version,
    )
    assert restored.pickup_topic_route("T") == original.pickup_topic_route("T")
    assert restored.cluster_info() == original.cluster_info()
    assert restored.live_brokers() == original.live_brokers()
    assert restored.filter_servers() == original.filter_servers()
    assert restored.topic_queue_mapping_infos() == original.topic_queue_mapping_infos()
    assert restored.topics_by_cluster(DEFAULT_CLUSTER) == original.topics_by_cluster(
        DEFAULT_CLUSTER
    )


def test_the_snapshot_is_magic_version_and_canonical_json() -> None:
    data = populated(RouteTable()).snapshot()
    assert data.startswith(MAGIC) and data[len(MAGIC) : len(MAGIC) + 2] == FORMAT_VERSION.to_bytes(
        2, "big"
    )
    doc = json.loads(data[len(MAGIC) + 2 :])
    assert set(doc) == {"applied_version", "routes_version", "state"}


def test_restore_rejects_an_unknown_format_version() -> None:
    data = bytearray(RouteTable().snapshot())
    data[len(MAGIC) + 1] = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match="unknown"):
        RouteTable.restore(bytes(data))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"NOTSNP\x00\x01{}",
        MAGIC + b"\x00\x01not json",
        MAGIC + b"\x00\x01{}",
        MAGIC + b"\x00\x01[]",
    ],
)
def test_restore_rejects_garbage(data: bytes) -> None:
    with pytest.raises(ValueError):
        RouteTable.restore(data)


def test_restore_rejects_a_field_of_the_wrong_type() -> None:
    data = RouteTable().snapshot()
    doc = json.loads(data[len(MAGIC) + 2 :])
    doc["state"]["config"]["listen_port"] = "9876"
    with pytest.raises(ValueError, match="listen_port"):
        RouteTable.restore(data[: len(MAGIC) + 2] + json.dumps(doc).encode())


def test_the_digest_ignores_versions_but_not_state() -> None:
    table = populated(RouteTable())
    digest = table.digest()
    table.applied_version += 5
    assert table.digest() == digest
    table.apply(BrokerHeartbeat(DEFAULT_CLUSTER, ADDR_A0, NOW_MS + 1))
    assert table.digest() != digest


def test_the_digest_is_the_same_in_processes_with_different_hash_seeds() -> None:
    digests = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", SCRIPTED_DIGEST],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        digests.add(out.stdout.strip())
    assert digests == {populated(RouteTable()).digest()}

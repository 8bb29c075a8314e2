"""The Raft log codec carries the failover fields, and still reads entries without them."""

from __future__ import annotations

import json

from raftstore.commands import BrokerHeartbeat, ExpireBrokers, QueryDataVersion, RegisterBroker
from raftstore.raft.codec import FORMAT_JSON, MAGIC, decode_command, encode_command
from raftstore.results import Replication
from remoting.model import DataVersion

NOW_MS = 1_700_000_000_000


def test_failover_fields_survive_a_round_trip() -> None:
    commands = [
        RegisterBroker(
            "DefaultCluster",
            "127.0.0.1:10911",
            "broker-a",
            0,
            "127.0.0.1:10912",
            NOW_MS,
            max_offset=4096,
            confirm_offset=4000,
            enable_raft_failover=True,
            replication=Replication(slave_acks=(("127.0.0.1:51001", 4000),)),
        ),
        BrokerHeartbeat("DefaultCluster", "127.0.0.1:10911", NOW_MS, 4096, 4000),
        BrokerHeartbeat(
            "DefaultCluster",
            "127.0.0.1:10921",
            NOW_MS,
            4000,
            4000,
            Replication(client_addr="127.0.0.1:51001"),
        ),
        QueryDataVersion(
            "DefaultCluster",
            "127.0.0.1:10911",
            "broker-a",
            0,
            DataVersion(1, 2, 3),
            NOW_MS,
            max_offset=4096,
            confirm_offset=4000,
        ),
        ExpireBrokers(NOW_MS, 1_000, failover_lag_bytes_max=1 << 28),
    ]
    for command in commands:
        assert decode_command(encode_command(command)) == command


def test_an_entry_written_before_the_failover_fields_decodes_with_defaults() -> None:
    body = {
        "v": 1,
        "id": "n1/0/1",
        "t": "BrokerHeartbeat",
        "c": {"cluster_name": "DefaultCluster", "broker_addr": "127.0.0.1:10911", "now_ms": NOW_MS},
    }
    entry = MAGIC + FORMAT_JSON + json.dumps(body).encode()
    command = decode_command(entry)
    assert command == BrokerHeartbeat("DefaultCluster", "127.0.0.1:10911", NOW_MS)
    assert isinstance(command, BrokerHeartbeat) and command.max_offset is None

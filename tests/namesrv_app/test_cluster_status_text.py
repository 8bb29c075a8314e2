"""``manage.py cluster status``: a node's alarms, a Raft port not listening among them,
are printed as lines of their own, not only in ``--json``; in raft mode one line gives
every node's applied index (the survivor to keep after a lost majority has the highest)."""

from __future__ import annotations

import dataclasses

from namesrv_app.management import cluster_text
from raftstore.raft import RaftStatus


def test_a_node_whose_raft_port_is_not_listening_is_named_in_the_status_text() -> None:
    alarm = "the Raft port 127.0.0.1:7001 is not listening: a peer that loses its ..."
    raft = RaftStatus(
        node_id="n1",
        mode="raft",
        state="follower",
        leader=None,
        term=3,
        commit_index=9,
        applied_index=9,
        log_length=9,
        has_quorum=True,
        applied_version=4,
        digest="d",
        view_digest="v",
        live_brokers=(),
        peers=(),
        self_addr="127.0.0.1:7001",
        raft_port="not listening",
        alarms=(alarm,),
    )
    status = {
        "run_dir": "/run/local",
        "processes": [{"name": "n1-gateway", "pid": 42, "alive": True, "log": "n1/gateway.log"}],
        "running": True,
        "nodes": [
            {"id": "n1", "status": dataclasses.asdict(raft), "error": None},
            {"id": "n2", "status": None, "error": "gateway not running"},
        ],
    }
    text = cluster_text.status_text(status)
    assert "raft_port=not listening" in text
    assert f"n1 ALARM: {alarm}" in text.splitlines()
    assert "applied index: n1 9, n2 -" in text.splitlines()


def test_an_eventual_node_shows_its_own_last_scan_and_no_raft_words() -> None:
    from raftstore.replicator import LocalReplicator

    scanned = dataclasses.asdict(LocalReplicator("n1").status())
    scanned["last_scan"] = {"at_ms": 1_000, "role": "standalone", "expired": 2}
    never = {**dataclasses.asdict(LocalReplicator("n2").status()), "last_scan": None}
    status = {
        "run_dir": "/run/local",
        "processes": [{"name": "n1-gateway", "pid": 42, "alive": True, "log": "n1/gateway.log"}],
        "running": True,
        "nodes": [
            {"id": "n1", "status": scanned, "error": None},
            {"id": "n2", "status": never, "error": None},
        ],
    }
    lines = cluster_text.status_text(status).splitlines()
    [n1] = [line for line in lines if line.startswith("n1: ")]
    [n2] = [line for line in lines if line.startswith("n2: ")]
    assert "mode=eventual" in n1 and " s ago (2 expired)" in n1
    assert n2.endswith("last_scan=none yet")
    for word in ("leader=", "term=", "has_quorum=", "state=", "commit_index=", "log_length="):
        assert word not in n1 and word not in n2
    assert not any(line.startswith("applied index:") for line in lines)

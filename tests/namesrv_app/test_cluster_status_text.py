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

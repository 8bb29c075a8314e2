"""Demo brokers can move off the fixed ports, so two local clusters run side by side."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from localcluster.launcher import DEMO_BROKER_BASE_PORT, ClusterPlan, plan_ports
from localcluster.lifecycle import demo_broker_specs


def _plan(tmp_path: Path) -> ClusterPlan:
    return plan_ports(
        tmp_path, nodes=1, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )


def test_the_default_layout_is_upstreams_10911_step_10(tmp_path: Path) -> None:
    specs = demo_broker_specs(_plan(tmp_path), DEMO_BROKER_BASE_PORT)
    assert sorted((s.port, s.ha_port) for s in specs) == [
        (10911, 10912),
        (10921, 10922),
        (10931, 10932),
        (10941, 10942),
    ]


def test_base_port_zero_takes_distinct_free_ports_even_when_10911_is_taken(
    tmp_path: Path,
) -> None:
    # Hold the default port, as a first `make run` does.
    with socket.socket() as holder:
        # Already taken by someone else: the point holds either way.
        with contextlib.suppress(OSError):
            holder.bind(("127.0.0.1", DEMO_BROKER_BASE_PORT))
        specs = demo_broker_specs(_plan(tmp_path), 0)
    ports = [p for s in specs for p in (s.port, s.ha_port)]
    assert len(set(ports)) == len(ports) == 8
    assert DEMO_BROKER_BASE_PORT not in ports
    for port in ports:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free when planned

"""``NameServerService.scan_observers``: told each liveness scan's outcome or failure,
and how the gateway's metrics count scans through it (no gateway, no network)."""

from __future__ import annotations

import logging

import pytest

from gateway.dispatch import RequestDispatcher
from gateway.metrics import GatewayMetrics
from gateway.scan_fallback import ScanOutcome
from gateway.services import NameServerService, ServiceError
from raftstore.replicator import LocalReplicator

Node = tuple[LocalReplicator, NameServerService, RequestDispatcher]
FAR_FUTURE_MS = 2**50


async def test_observers_are_told_each_outcome_and_each_failure_which_is_raised_again(
    registered_node: Node,
) -> None:
    _replicator, service, _dispatcher = registered_node
    seen: list[ScanOutcome | Exception] = []
    service.scan_observers.append(seen.append)

    outcome = await service.scan(FAR_FUTURE_MS)
    with pytest.raises(ServiceError):
        await service.scan(-1)  # not a time: the scan fails before proposing

    assert len(outcome.expired) == 1
    assert seen[0] is outcome
    assert isinstance(seen[1], ServiceError)


async def test_an_observer_that_raises_changes_nothing_for_the_scan_or_the_others(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    _replicator, service, _dispatcher = node
    seen: list[ScanOutcome | Exception] = []

    def broken(_result: ScanOutcome | Exception) -> None:
        raise RuntimeError("observer bug")

    service.scan_observers += [broken, seen.append]
    with caplog.at_level(logging.ERROR, logger="gateway.services"):
        outcome = await service.scan()

    assert outcome.expired == () and seen == [outcome]
    assert "scan observer failed" in caplog.text


async def test_the_metrics_count_runs_expiries_and_failures(registered_node: Node) -> None:
    replicator, service, _dispatcher = registered_node
    metrics = GatewayMetrics(replicator)
    service.scan_observers.append(metrics.count_scan)

    await service.scan()  # nothing due yet
    await service.scan(FAR_FUTURE_MS)  # expires default-broker
    with pytest.raises(ServiceError):
        await service.scan(-1)

    sample = metrics.registry.get_sample_value
    assert sample("namesrv_scan_runs_total") == 3
    assert sample("namesrv_scan_expired_total") == 1
    assert sample("namesrv_scan_failures_total") == 1

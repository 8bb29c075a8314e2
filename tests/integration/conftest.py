"""Shared fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.raft_cluster_harness import RaftGatewayCluster, running_cluster


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RaftGatewayCluster]:
    """Three raft-mode gateway processes with an agreed leader, one cluster per module."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    with running_cluster(tmp_path_factory.mktemp(module)) as nodes:
        yield nodes

"""Fixtures of the route-table tests: a fresh table and config per test."""

from __future__ import annotations

import pytest

from raftstore.config import NamesrvConfig
from raftstore.route_table import RouteTable
from tests.raftstore.cast import register_static_cluster


@pytest.fixture
def table() -> RouteTable:
    """An empty table with the 5.x default config."""
    return RouteTable(NamesrvConfig())


@pytest.fixture
def acting_table() -> RouteTable:
    """An empty table with ``supportActingMaster`` on, as RouteInfoManagerNewTest sets it."""
    return RouteTable(NamesrvConfig(support_acting_master=True))


@pytest.fixture
def static_table() -> RouteTable:
    """The 3 x 3 x 10 cluster of upstream RouteInfoManagerTestBase, default config."""
    table = RouteTable(NamesrvConfig())
    register_static_cluster(table)
    return table

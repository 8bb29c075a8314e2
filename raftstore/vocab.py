"""Words every package shares: the two replication modes.

One place for the strings a node, the launcher, the experiments and the Spark
jobs all write into files and command lines, so they cannot drift apart.
"""

from __future__ import annotations

MODE_EVENTUAL = "eventual"
"""Upstream's design: each node applies its own writes; nodes never talk."""
MODE_RAFT = "raft"
"""Every write is a Raft log entry applied in the same order on every node."""
MODES = (MODE_EVENTUAL, MODE_RAFT)

"""The demo brokers' timings as the console explains them.

One place decides when the short heartbeat timeouts of ``make run``'s demo brokers get a
sentence next to them, so every page says it the same way. Shares read as the experiment
report writes them (:mod:`experiment_reports.text`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from broker_app.config import BrokerConfig
from localcluster.plan import DEMO_BROKER_SETTINGS
from raftstore.config import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS

MS_PER_S = 1000

DEMO_HEARTBEAT_MS = int(DEMO_BROKER_SETTINGS["heartbeat_interval_ms"])
DEMO_TIMEOUT_MS = int(DEMO_BROKER_SETTINGS["heartbeat_timeout_ms"])
# A broker's defaults are RocketMQ's: its registerNameServerPeriod, the NameServer's timeout.
ROCKETMQ_REGISTER_PERIOD_MS = BrokerConfig(store_dir=Path(".")).register_period_ms
ROCKETMQ_TIMEOUT_MS = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS


def _s(ms: int | float) -> str:
    return f"{ms / MS_PER_S:g} s"


def demo_timing_note(registered_timeouts_ms: Iterable[int | None]) -> str:
    """The sentence that explains the demo brokers' short timeout, or "" when no broker
    shown registered it (the timeout is read from what each broker registered)."""
    if DEMO_TIMEOUT_MS not in set(registered_timeouts_ms):
        return ""
    return (
        f"demo brokers: heartbeat every {_s(DEMO_HEARTBEAT_MS)}, dropped after "
        f"{_s(DEMO_TIMEOUT_MS)} of silence; RocketMQ's defaults are "
        f"{_s(ROCKETMQ_REGISTER_PERIOD_MS)} and {_s(ROCKETMQ_TIMEOUT_MS)}"
    )

"""HA knobs, named after RocketMQ's ``MessageStoreConfig`` with the unit last."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_HEARTBEAT_INTERVAL_MS = 5000  # haSendHeartbeatInterval
DEFAULT_HOUSEKEEPING_INTERVAL_MS = 20000  # haHousekeepingInterval
DEFAULT_TRANSFER_BATCH_BYTES = 32 * 1024  # haTransferBatchSize
DEFAULT_SLAVE_FALLBEHIND_MAX_BYTES = 256 * 1024 * 1024  # haSlaveFallbehindMax
DEFAULT_RECONNECT_DELAY_MS = 1000
DEFAULT_CONNECT_TIMEOUT_MS = 3000
DEFAULT_HANDSHAKE_TIMEOUT_MS = 5000
READ_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class HAConfig:
    """Intervals and bounds of master/slave replication (tests compress the intervals)."""

    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    housekeeping_interval_ms: int = DEFAULT_HOUSEKEEPING_INTERVAL_MS
    transfer_batch_bytes: int = DEFAULT_TRANSFER_BATCH_BYTES
    slave_fallbehind_max_bytes: int = DEFAULT_SLAVE_FALLBEHIND_MAX_BYTES
    reconnect_delay_ms: int = DEFAULT_RECONNECT_DELAY_MS
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    # The whole authentication handshake (broker_app/ha/auth.py), on either side: a peer
    # that has not proven the secret by then is closed.
    handshake_timeout_ms: int = DEFAULT_HANDSHAKE_TIMEOUT_MS

    def validate(self) -> None:
        """Raise ValueError for settings that cannot work together."""
        if min(self.heartbeat_interval_ms, self.housekeeping_interval_ms) <= 0:
            raise ValueError("HA intervals must be positive")
        if self.housekeeping_interval_ms <= self.heartbeat_interval_ms:
            # Otherwise an idle but healthy link is closed between two heartbeats.
            raise ValueError("haHousekeepingInterval must exceed haSendHeartbeatInterval")
        if self.connect_timeout_ms <= 0 or self.handshake_timeout_ms <= 0:
            raise ValueError("HA connect and handshake timeouts must be positive")
        if self.transfer_batch_bytes <= 0 or self.slave_fallbehind_max_bytes <= 0:
            raise ValueError("HA sizes must be positive")

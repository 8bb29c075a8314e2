"""Saving the broker's metadata snapshot: one persistence thread, bursts coalesced.

Every part that changes the metadata (topics, consumer groups and offsets, delay offsets,
SlaveSynchronize) asks for a save here; the repository (Django rows, or memory in tests)
is only ever called from this thread, never from the event loop.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from broker_app.metadata import BrokerMetadata, MetadataRepository, MetadataSnapshot


class MetadataSaver:
    """Loads and saves ``metadata``'s snapshot through ``repository`` on its own thread."""

    def __init__(self, repository: MetadataRepository, metadata: BrokerMetadata) -> None:
        self.repository = repository
        self.metadata = metadata
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="persist")
        self._queued = False

    async def load(self) -> MetadataSnapshot | None:
        """The saved snapshot, or None when this broker has none yet."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.repository.load)

    def save_soon(self) -> None:
        """Save the latest snapshot on the persistence thread (coalescing bursts)."""
        if self._queued:
            return
        self._queued = True

        def save() -> None:
            self._queued = False
            self.repository.save(self.metadata.snapshot)

        self._executor.submit(save)

    def close(self) -> None:
        """Save the snapshot of this moment a last time and wait for the thread to end."""
        self._executor.submit(self.repository.save, self.metadata.snapshot)
        self._executor.shutdown(wait=True)

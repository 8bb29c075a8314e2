"""SlaveSynchronize: a slave copies its master's metadata, as upstream's ``SlaveSynchronize``
(topic config, consumer offsets, delay offsets, subscription groups).

Every ``slave_sync_interval_ms`` (4.x: 10 s) the slave asks the master's
remoting port for its topic configs (21), consumer offsets (43), delay
offsets (45) and subscription groups (201). Topics and groups are taken only
when their DataVersion differs, as upstream does; offsets are merged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_app.metadata import BrokerMetadata
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError

log = logging.getLogger(__name__)

SYNC_TIMEOUT_S = 3.0


class SlaveSynchronizer:
    """Pulls metadata from :attr:`master_addr` into ``metadata``; ``persist`` saves it."""

    def __init__(
        self, client: RemotingClient, metadata: BrokerMetadata, persist: Callable[[], None]
    ) -> None:
        self.client = client
        self.metadata = metadata
        self.persist = persist
        self.master_addr: str | None = None
        self.rounds = 0

    async def sync_all(self) -> bool:
        """One round of all four syncs; True when anything changed."""
        if not self.master_addr:
            return False
        steps = (
            (RequestCode.GET_ALL_TOPIC_CONFIG, self.metadata.apply_master_topics),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, self.metadata.apply_master_consumer_offsets),
            (RequestCode.GET_ALL_DELAY_OFFSET, self.metadata.apply_master_delay_offsets),
            (
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                self.metadata.apply_master_subscription_groups,
            ),
        )
        changed = False
        for code, apply in steps:
            changed |= await self._sync_one(self.master_addr, code, apply)
        self.rounds += 1
        if changed:
            self.persist()
        return changed

    async def _sync_one(self, addr: str, code: RequestCode, apply: Callable[[bytes], bool]) -> bool:
        try:
            response = await self.client.invoke(addr, RemotingCommand.request(code), SYNC_TIMEOUT_S)
        except RemotingClientError as exc:
            log.warning("slave sync %s from %s failed: %s", code.name, addr, exc)
            return False
        if response.code != ResponseCode.SUCCESS or not response.body:
            log.warning("slave sync %s from %s: code %s", code.name, addr, response.code)
            return False
        try:
            return apply(response.body)
        except (BodyDecodeError, ValueError) as exc:
            log.warning("slave sync %s from %s: unreadable body: %s", code.name, addr, exc)
            return False

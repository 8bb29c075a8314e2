"""What the broker port's request handlers need from the running broker.

:class:`BrokerCore` names the state and the calls that :mod:`broker_app.processor` and
:mod:`broker_app.consume_processor` use; :class:`~broker_app.broker.BrokerController` is
the one broker that has them. The handlers depend on this description and the controller
builds the handlers, so the imports run one way: broker -> processor -> core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker_app.clients import ConsumerManager, ProducerManager, RebalanceLockManager
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.long_polling import PullHold
from broker_app.metadata import BrokerMetadata
from broker_app.store.message_store import MessageInput, MessageStore, PutResult
from remoting.model import TopicConfig


@dataclass(frozen=True, slots=True)
class PutOutcome:
    """A stored message and the answer code SEND_MESSAGE gives for it."""

    result: PutResult
    code: int
    remark: str | None = None


class BrokerCore(Protocol):
    """The broker as its request handlers see it: state they read, calls they make."""

    config: BrokerConfig
    role: BrokerRole
    metadata: BrokerMetadata
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    pull_hold: PullHold
    store: MessageStore | None
    clock_ms: Callable[[], int]

    @property
    def port(self) -> int:
        """The bound remoting port."""
        ...

    @property
    def broker_addr(self) -> str:
        """``host:port`` of the remoting server, as registered."""
        ...

    def check_writable(self, topic: str, default_queue_nums: int | None) -> tuple[int, str] | None:
        """Why a send to ``topic`` is refused (code, remark), or None."""
        ...

    async def put_message(self, message: MessageInput) -> PutOutcome:
        """Store one message and say what SEND_MESSAGE answers."""
        ...

    def create_topic(self, config: TopicConfig) -> None:
        """Create or update a topic and tell the NameServers."""
        ...

    async def delete_topic(self, topic: str) -> bool:
        """Delete a topic here and re-register; True when it existed."""
        ...

    async def on_min_broker_id_change(
        self,
        *,
        min_broker_id: int | None,
        min_broker_addr: str | None,
        offline_broker_addr: str | None,
        ha_broker_addr: str | None,
    ) -> None:
        """Record a NOTIFY_MIN_BROKER_ID_CHANGE."""
        ...

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table."""
        ...

    def require_store(self) -> MessageStore:
        """The message store of a started broker."""
        ...

    def memory_bytes(self) -> int:
        """The memory a pull may assume (slave redirection)."""
        ...

    def ensure_consumer_group(self, group: str, *, retry: bool, dead_letter: bool = False) -> None:
        """Create a subscription group (and its retry/DLQ topics) on first sight."""
        ...

    def commit_consumer_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """Record a consumer offset (persisted later)."""
        ...

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Tell a group's consumers that its membership changed."""
        ...

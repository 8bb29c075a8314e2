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
from broker_app.consumer_groups import ConsumerGroups
from broker_app.long_polling import PullHold
from broker_app.metadata import BrokerMetadata
from broker_app.replication import BrokerReplication
from broker_app.store.message_store import MessageInput, MessageStore, PutResult
from broker_app.topics import BrokerTopics


@dataclass(frozen=True, slots=True)
class PutOutcome:
    """A stored message and the answer code SEND_MESSAGE gives for it."""

    result: PutResult
    code: int
    remark: str | None = None


class BrokerCore(Protocol):
    """The broker as its request handlers see it: state they read, calls they make."""

    config: BrokerConfig
    metadata: BrokerMetadata
    topics: BrokerTopics
    groups: ConsumerGroups
    replication: BrokerReplication
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    pull_hold: PullHold
    store: MessageStore | None
    clock_ms: Callable[[], int]

    @property
    def role(self) -> BrokerRole:
        """Master or slave, at this moment."""
        ...

    @property
    def port(self) -> int:
        """The bound remoting port."""
        ...

    @property
    def broker_addr(self) -> str:
        """``host:port`` of the remoting server, as registered."""
        ...

    async def put_message(self, message: MessageInput) -> PutOutcome:
        """Store one message and say what SEND_MESSAGE answers."""
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

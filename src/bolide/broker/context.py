"""The broker's core: what every request handler and service of the broker reaches — the
managers, the store and the clock.

:class:`BrokerContext` is filled by the composition root (:mod:`bolide.broker.broker`) and
handed to each handler group (:mod:`bolide.broker.handlers`), the replication and the metrics;
handlers keep no state of their own beyond it. It sits on the broker's own floor, beside the
managers it holds, so nothing of the broker reaches up into ``handlers/`` for it. Helpers
shared by several handler modules (the refusal, the born host) live here too.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bolide.base.clock import Clock
from bolide.base.errors import ProtocolError
from bolide.broker.config import BrokerConfig, BrokerRole
from bolide.broker.consumers import ConsumerManager
from bolide.broker.locks import RebalanceLockManager
from bolide.broker.long_polling import LongPollingService
from bolide.broker.offsets import ConsumerOffsetManager
from bolide.broker.pop.service import PopService
from bolide.broker.producers import ProducerManager
from bolide.broker.schedule import ScheduleMessageService
from bolide.broker.stats import BrokerStats
from bolide.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from bolide.broker.timer import TimerMessageService
from bolide.broker.topics import TopicConfigManager
from bolide.broker.trace.recorder import BrokerTrace
from bolide.broker.transactions import TransactionService
from bolide.protocol.address import SocketAddress, parse_socket_address
from bolide.protocol.codes import ResponseCode
from bolide.remoting import Connection
from bolide.store.api import MessageStore, PutResult

__all__ = [
    "BORN_HOST_ATTRIBUTE",
    "BrokerContext",
    "RefusedError",
    "born_host_of",
    "find_group_or_refuse",
]

BORN_HOST_ATTRIBUTE = "bolide.born_host"
"""Connection attribute caching the peer's address as a SocketAddress (parsed once)."""


class RefusedError(Exception):
    """A request a handler answers with ``code`` and ``remark`` before (or instead of)
    reaching the store; raised by a handler's checks and caught by the same handler."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class ReplicationPort(Protocol):
    """What handlers ask of the broker's replication (broker/ha/replication.py)."""

    role: BrokerRole
    """The role now (in controller mode the controller changes it at run time)."""

    async def wait_replicated(self, result: PutResult) -> None:
        """Under SYNC_MASTER, hold a stored put until a slave has it (may change its status)."""
        ...

    def runtime_info(self) -> dict[str, str]:
        """Replication's GET_BROKER_RUNTIME_INFO entries."""
        ...

    @property
    def waits_for_replicas(self) -> bool:
        """Whether a stored send now waits for replicas (SYNC_MASTER: the configured role,
        or in controller mode the role the SyncStateSet gives)."""
        ...


@dataclass(slots=True)
class BrokerContext:
    """The broker's shared state, as request handlers see it.

    ``register_soon`` asks the name-server registration to run at once, off the caller's path
    (after a topic was auto-created); ``register_now`` registers and returns how many name
    servers accepted (admin topic creation answers after it). ``random`` picks queues for
    sends that let the broker choose; tests seed it.
    """

    config: BrokerConfig
    clock: Clock
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager[Connection]
    producers: ProducerManager[Connection]
    long_polling: LongPollingService
    stats: BrokerStats
    register_soon: Callable[[], None]
    register_now: Callable[[], Awaitable[int]]
    locks: RebalanceLockManager
    """The orderly consumers' queue locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ)."""
    random: random.Random = field(default_factory=random.Random)
    schedule: ScheduleMessageService | None = None
    """Delivers delay-level messages; GET_ALL_DELAY_OFFSET reads its progress."""
    timer: TimerMessageService | None = None
    """Plans and delivers timer messages (TIMER_DELIVER_MS / TIMER_DELAY_MS / _SEC)."""
    pop: PopService | None = None
    """POP consumption (POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME)."""
    replication: ReplicationPort | None = None
    """The master/slave role's parts (set by the broker once they started)."""
    transactions: TransactionService | None = None
    """Half messages, END_TRANSACTION and the transaction checker."""
    trace: BrokerTrace | None = None
    """Broker-side message trace (traceOnBrokerEnable): takes notes of deliveries."""

    @property
    def role(self) -> BrokerRole:
        """The broker's role now. In controller mode the configured ``brokerRole`` stays SLAVE
        while the controller makes the broker a master (and back), so whoever asks "am I a
        master?" asks here: the replication's role once it started, the configured one before."""
        replication = self.replication
        return self.config.broker_role if replication is None else replication.role

    config_file: Path | None = None
    """The broker.conf the broker was started with: UPDATE_BROKER_CONFIG writes its changes
    back to it (None: changes last until the broker stops)."""


def born_host_of(connection: Connection) -> SocketAddress:
    """The peer's ``(ip, port)``, the born host of the messages it sends (IPv4-mapped IPv6
    already shown as IPv4 by the connection). Raises :class:`ProtocolError` when the
    connection has no usable peer address."""
    cached = connection.attributes.get(BORN_HOST_ATTRIBUTE)
    if isinstance(cached, tuple):
        return cached
    try:
        address = parse_socket_address(connection.remote_address)
    except ProtocolError as error:
        raise ProtocolError(f"peer address {connection.remote_address!r} unusable") from error
    connection.attributes[BORN_HOST_ATTRIBUTE] = address
    return address


async def find_group_or_refuse(
    groups: SubscriptionGroupManager, group: str, *, missing_remark: str
) -> SubscriptionGroupConfig:
    """The settings of ``group``, created if the broker may create it (see
    :meth:`SubscriptionGroupManager.find_or_create`).

    Raises:
        RefusedError: SYSTEM_ERROR when the new group could not be written (OSError), or
            SUBSCRIPTION_GROUP_NOT_EXIST with ``missing_remark`` (each request type words it
            as RocketMQ does) when the group is unknown and may not be created.
    """
    try:
        group_config = await groups.find_or_create(group)
    except OSError as error:
        raise RefusedError(
            ResponseCode.SYSTEM_ERROR, f"cannot record group {group}: {error}"
        ) from error
    if group_config is None:
        raise RefusedError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, missing_remark)
    return group_config

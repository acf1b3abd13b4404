"""The consumers' parts (rebalance, offset store, pull loop, send-back) talk to the broker
through small protocols; these adapters implement them over a :class:`ClientInstance`.

Keeping the protocols narrow lets the unit tests drive each part with an in-memory peer and
a manual clock, while the consumers wire them to the real instance here.
"""

from __future__ import annotations

import dataclasses
import logging

from bolide.base import limits
from bolide.base.errors import BolideError, ConfigError, ConnectionClosedError, NoRouteError
from bolide.client import rpc
from bolide.client.instance import ClientInstance
from bolide.client.namespace import with_namespace
from bolide.client.producer.producer import Producer
from bolide.client.rpc import PullResult
from bolide.protocol.address import format_socket_address
from bolide.protocol.bodies import MASTER_BROKER_ID, MessageQueue
from bolide.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
)
from bolide.protocol.message import Message, MessageExt, PropertyKey
from bolide.protocol.system_topics import CLIENT_INNER_PRODUCER_GROUP

__all__ = [
    "InstanceOffsetBroker",
    "InstancePullClient",
    "InstanceRebalanceClient",
    "InstanceSendBack",
]

_log = logging.getLogger("bolide.client.consumer")

_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)


class InstanceRebalanceClient:
    """:class:`~bolide.client.consumer.rebalance.RebalanceClient` over an instance; a topic
    without a stored route is looked up on demand (a retry topic appears only after the
    first heartbeat creates it)."""

    def __init__(self, instance: ClientInstance) -> None:
        self._instance = instance

    @property
    def client_id(self) -> str:
        return self._instance.client_id

    async def subscribe_queues(self, topic: str) -> list[MessageQueue] | None:
        queues = self._instance.subscribe_queues(topic)
        if queues is None:
            await self._instance.update_route(topic)
            queues = self._instance.subscribe_queues(topic)
        return queues

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        return await self._instance.find_consumer_ids(topic, group)

    async def max_offset(self, queue: MessageQueue) -> int:
        return await self._instance.max_offset(queue)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        return await self._instance.search_offset(queue, timestamp_ms)


class InstanceOffsetBroker:
    """:class:`~bolide.client.consumer.offset_store.OffsetBroker` for ``group``."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self._instance = instance
        self._group = group

    async def query_consumer_offset(self, queue: MessageQueue) -> int | None:
        instance = self._instance
        address = await instance.queue_broker_address(queue)
        return await rpc.query_consumer_offset(
            instance.pool,
            address,
            self._group,
            queue.topic,
            queue.queue_id,
            instance.config.api_timeout_ms,
        )

    async def update_consumer_offset_oneway(self, queue: MessageQueue, offset: int) -> None:
        instance = self._instance
        address = await instance.queue_broker_address(queue)
        await rpc.update_consumer_offset(
            instance.pool,
            address,
            self._group,
            queue.topic,
            queue.queue_id,
            offset,
            instance.config.api_timeout_ms,
            oneway=True,
        )


class InstancePullClient:
    """:class:`~bolide.client.consumer.pull_loop.PullClient`: pulls from the broker the last
    answer suggested (Java's ``PullAPIWrapper.updatePullFromWhichNode``).

    * Each answer's ``suggestWhichBrokerId`` is remembered per queue; the next pull goes to
      that id of the queue's broker name, else (``findBrokerAddressInSubscribe``) id + 1 for a
      slave, else the lowest id known.
    * A pull to a slave clears the COMMIT_OFFSET flag: slaves do not store consumer offsets.
    * An address that cannot be reached is avoided for PULL_BROKER_DOWN_BACKOFF_MS while the
      broker name has another one (a master that died: its slave serves the reads), and the
      pull is tried once more there at once.
    """

    def __init__(self, instance: ClientInstance) -> None:
        self._instance = instance
        self._suggested: dict[MessageQueue, int] = {}
        self._down_until_ms: dict[str, int] = {}

    async def pull_message(
        self, queue: MessageQueue, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        instance = self._instance
        target = self._choose(queue.broker_name, self._suggested.get(queue, MASTER_BROKER_ID))
        if target is None:
            await instance.queue_broker_address(queue)  # refreshes the route or raises
            target = self._choose(queue.broker_name, MASTER_BROKER_ID)
        if target is None:
            raise NoRouteError(f"no address known for broker {queue.broker_name!r} of {queue}")
        try:
            result = await self._pull(target, header, timeout_ms)
        except ConnectionClosedError:
            address = target[0]
            self._down_until_ms[address] = (
                instance.clock.monotonic_ms() + limits.PULL_BROKER_DOWN_BACKOFF_MS
            )
            fallback = self._choose(queue.broker_name, MASTER_BROKER_ID)
            if fallback is None or fallback[0] == address:
                raise
            _log.info("broker %s unreachable: pulling %s from %s", address, queue, fallback[0])
            result = await self._pull(fallback, header, timeout_ms)
        self._suggested[queue] = result.suggest_which_broker_id
        return result

    async def _pull(
        self, target: tuple[str, int], header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        address, broker_id = target
        if broker_id != MASTER_BROKER_ID and header.sys_flag & _COMMIT_OFFSET:
            header = dataclasses.replace(header, sys_flag=header.sys_flag & ~_COMMIT_OFFSET)
        return await rpc.pull_message(self._instance.pool, address, header, timeout_ms)

    def _choose(self, broker_name: str, broker_id: int) -> tuple[str, int] | None:
        """(address, id) to pull from: ``broker_id``, else id + 1 for a slave, else the
        lowest id; addresses recently unreachable only when nothing else is known."""
        addresses = self._instance.routes.brokers.get(broker_name) or {}
        if not self._down_until_ms:
            # Nothing was ever unreachable: every address is (the loop below would agree).
            address = addresses.get(broker_id)
            if address is not None:
                return address, broker_id
        now_ms = self._instance.clock.monotonic_ms()
        reachable = {
            known_id: address
            for known_id, address in addresses.items()
            if self._down_until_ms.get(address, 0) <= now_ms
        }
        for candidates in (reachable, addresses):
            for wanted in (broker_id, broker_id + 1 if broker_id != MASTER_BROKER_ID else None):
                if wanted is not None and wanted in candidates:
                    return candidates[wanted], wanted
            if candidates:
                lowest = min(candidates)
                return candidates[lowest], lowest
        return None


class InstanceSendBack:
    """:class:`~bolide.client.consumer.consume_concurrently.SendBackClient` for ``group``.

    The re-send fallback goes through a producer of the instance, made on first use: group
    ``CLIENT_INNER_PRODUCER``, or ``CLIENT_INNER_PRODUCER-<group>`` when another consumer
    of the instance already registered that name. :meth:`close` shuts it down.
    """

    def __init__(self, instance: ClientInstance, group: str, namespace: str | None = None) -> None:
        self._instance = instance
        self._group = group
        self._namespace = namespace
        """The consumer's namespace: the listener saw topics without it, the broker wants
        them with it (Java's sendMessageBack wraps the topic again)."""
        self._producer: Producer | None = None

    async def send_back(
        self, message: MessageExt, broker_name: str, delay_level: int, max_reconsume_times: int
    ) -> None:
        instance = self._instance
        # The broker of the queue the message came from; the record's store host otherwise.
        address = instance.broker_address(broker_name) or format_socket_address(message.store_host)
        header = ConsumerSendMsgBackRequestHeader(
            commit_log_offset=message.commit_log_offset,
            group=self._group,
            delay_level=delay_level,
            origin_msg_id=message.msg_id,
            origin_topic=with_namespace(self._namespace, message.topic),
            max_reconsume_times=max_reconsume_times,
        )
        await rpc.send_message_back(instance.pool, address, header, limits.SEND_BACK_TIMEOUT_MS)

    async def send_to_retry_topic(self, message: Message) -> None:
        original_topic = message.properties.get(PropertyKey.RETRY_TOPIC)
        if original_topic:
            message.properties[PropertyKey.RETRY_TOPIC] = with_namespace(
                self._namespace, original_topic
            )
        producer = await self._inner_producer()
        await producer.send(message)

    async def _inner_producer(self) -> Producer:
        if self._producer is not None:
            return self._producer
        for group in (CLIENT_INNER_PRODUCER_GROUP, f"{CLIENT_INNER_PRODUCER_GROUP}-{self._group}"):
            producer = Producer(group, instance=self._instance)
            try:
                await producer.start()
            except ConfigError:
                continue  # the name is taken on this instance: try the next one
            self._producer = producer
            return producer
        raise ConfigError(f"no inner producer group free on client {self._instance.client_id}")

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                await producer.shutdown()
            except BolideError as error:
                _log.warning("inner producer of %s: %s", self._group, error)

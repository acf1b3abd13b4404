"""The rules both send paths share: which sends the fast forms may take, where a send that
left the queue to the broker goes, and what a batch becomes before the store.

The general path (:mod:`bolide.broker.handlers.send`) is the one definition of a send; the
fast forms (:mod:`bolide.broker.handlers.send_fast`) take only what
:func:`takes_fast_form` allows, and give the same record and the same answer.
"""

from __future__ import annotations

from random import Random

from bolide.base.errors import ProtocolError
from bolide.broker.context import BrokerContext, RefusedError, born_host_of
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.handlers.send_properties import clean_entry, has_delay
from bolide.broker.topics import TopicConfig, is_writeable
from bolide.broker.transactions.records import is_transaction_half
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import (
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    MessageSysFlag,
    PropertyKey,
    transaction_type,
)
from bolide.protocol.record import (
    BatchEntry,
    decode_batch_body,
    decode_properties,
    encode_properties,
)
from bolide.protocol.system_topics import (
    RETRY_GROUP_TOPIC_PREFIX,
    SEND_FORBIDDEN_TOPICS,
    is_retry_topic,
)
from bolide.remoting import Connection
from bolide.store.api import BatchPutRequest

__all__ = ["MULTI_TAG_FILTER", "BatchPreparer", "any_writable_queue", "takes_fast_form"]

MULTI_TAG_FILTER = "MULTI_TAG"
"""A topic's filter type whose messages are stored with the MULTI_TAGS sysFlag bit."""
_PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED)


def takes_fast_form(
    config: TopicConfig | None, broker_permission: int, topic: str, queue_id: int, sys_flag: int
) -> bool:
    """Whether a send (single or batch) to ``topic`` may take a fast form: the topic is known
    (auto-creation awaits), writable when ordered, not one producers may not send to nor a
    retry topic, the sysFlag names no transaction half and the queue id is below the topic's
    queue count. Anything else takes the general path, which answers it."""
    return not (
        config is None
        or (config.order and not is_writeable(broker_permission))
        or topic in SEND_FORBIDDEN_TOPICS
        or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        or sys_flag & TRANSACTION_MASK == _PREPARED
        or queue_id >= max(config.read_queue_count, config.write_queue_count)
    )


def any_writable_queue(config: TopicConfig, random: Random) -> int:
    """The queue of a send that left the choice to the broker (queueId < 0)."""
    writable = config.write_queue_count
    return random.randrange(writable) if writable > 0 else 0


class BatchPreparer:
    """A batch's checked entries and its store request (both send paths)."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def parts(
        self, topic: str, sys_flag: int, properties: str | None, body: bytes
    ) -> tuple[list[BatchEntry], str]:
        """The checked entries and shared properties of a batch to ``topic`` with the header's
        ``sys_flag`` and ``properties`` (both batch paths).

        Raises:
            RefusedError: the batch cannot be stored (as a Java broker refuses it).
        """
        context = self._context
        if is_retry_topic(topic):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, f"a batch cannot be sent to {topic}")
        if transaction_type(sys_flag) != TRANSACTION_NOT_TYPE:
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be transactional")
        try:
            entries = decode_batch_body(body)
        except ProtocolError as error:
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {error}") from error
        shared = decode_properties(properties) if properties else {}
        shared.pop(PropertyKey.WAIT, None)
        shared.pop(DELIVERED_FROM, None)
        if has_delay(shared):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be delayed")
        if is_transaction_half(shared, 0):
            raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be transactional")
        shared[PropertyKey.CLUSTER] = context.config.broker_cluster_name
        return [clean_entry(entry) for entry in entries], encode_properties(shared)

    def request(
        self,
        connection: Connection,
        topic: str,
        sys_flag: int,
        born_timestamp_ms: int,
        reconsume_times: int | None,
        config: TopicConfig,
        queue_id: int,
        entries: list[BatchEntry],
        extra_properties: str,
    ) -> BatchPutRequest:
        """The store request of a batch whose checked entries and shared properties
        :meth:`parts` gave."""
        if config.topic_filter_type == MULTI_TAG_FILTER:
            sys_flag |= MessageSysFlag.MULTI_TAGS
        return BatchPutRequest(
            topic=topic,
            queue_id=queue_id,
            entries=entries,
            sys_flag=sys_flag,
            born_timestamp_ms=born_timestamp_ms,
            born_host=born_host_of(connection),
            reconsume_times=reconsume_times or 0,
            extra_properties=extra_properties,
        )

"""Raw remoting requests for tests that talk to a Bolide broker over a real socket.

Builders return :class:`RemotingCommand` requests shaped as Java or C++ clients shape them;
:class:`BrokerWire` sends them through a :class:`ClientPool` and decodes common answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bolide.protocol.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import BatchEntry, decode_records, encode_batch_body, encode_properties
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster

TIMEOUT_MS = 10_000
"""Guard on one exchange: fails a hung test instead of blocking it."""


def message_properties(
    tags: str | None = None,
    keys: str | None = None,
    extra: Mapping[str, str] | None = None,
    *,
    wait: bool = True,
) -> str:
    """A producer's properties string (WAIT=true as clients send it)."""
    properties: dict[str, str] = {}
    if tags is not None:
        properties[PropertyKey.TAGS] = tags
    if keys is not None:
        properties[PropertyKey.KEYS] = keys
    if wait:
        properties[PropertyKey.WAIT] = "true"
    properties.update(extra or {})
    return encode_properties(properties)


def send_request(
    topic: str,
    body: bytes,
    *,
    tags: str | None = None,
    keys: str | None = None,
    properties: Mapping[str, str] | None = None,
    queue_id: int = 0,
    code: int = RequestCode.SEND_MESSAGE,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
    default_topic_queue_count: int = 4,
    born_timestamp_ms: int = 1_700_000_000_000,
) -> RemotingCommand:
    """SEND_MESSAGE (v1 names) or SEND_MESSAGE_V2 (one-letter names) for one message."""
    header = SendMessageRequestHeader(
        producer_group="PG_TEST",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=default_topic_queue_count,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=born_timestamp_ms,
        flag=0,
        properties=message_properties(tags, keys, properties),
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
    )
    fields = (
        header.to_ext_fields() if code == RequestCode.SEND_MESSAGE else header.to_v2_ext_fields()
    )
    return RemotingCommand.request(code, fields, body)


def batch_request(
    topic: str,
    bodies: Sequence[bytes],
    *,
    tags: str | None = None,
    queue_id: int = 0,
    code: int = RequestCode.SEND_BATCH_MESSAGE,
    batch_text: str = "true",
    extra: Mapping[str, str] | None = None,
) -> RemotingCommand:
    """A batch send: code 320 with ``m``, or the C++ form (code 10, ``batch`` = ``"1"``)."""
    entries = [
        BatchEntry(
            0,
            body,
            message_properties(
                tags, f"k{index}", {**(extra or {}), PropertyKey.UNIQ_KEY: f"U{index:031d}"}
            ),
        )
        for index, body in enumerate(bodies)
    ]
    header = SendMessageRequestHeader(
        producer_group="PG_TEST",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=0,
        properties=message_properties(),
        batch=True,
    )
    if code == RequestCode.SEND_MESSAGE:
        fields = header.to_ext_fields()
        fields["batch"] = batch_text
    else:
        fields = header.to_v2_ext_fields()
        fields["m"] = batch_text
    return RemotingCommand.request(code, fields, encode_batch_body(entries))


def pull_request(
    topic: str,
    queue_id: int,
    queue_offset: int,
    *,
    group: str = "CG_TEST",
    subscription: str | None = "*",
    sys_flag: int = PullSysFlag.SUBSCRIPTION,
    suspend_timeout_ms: int = 15_000,
    commit_offset: int = 0,
    sub_version: int = 0,
    max_messages: int = 32,
    expression_type: str | None = None,
) -> RemotingCommand:
    """PULL_MESSAGE; by default with the SUBSCRIPTION bit and no SUSPEND bit."""
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=queue_offset,
        max_messages=max_messages,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_ms=suspend_timeout_ms,
        sub_version=sub_version,
        subscription=subscription,
        expression_type=expression_type,
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def heartbeat_request(
    client_id: str,
    *,
    consumer_groups: Mapping[str, Mapping[str, str]] | None = None,
    producer_groups: Sequence[str] = (),
    sub_version: int = 1,
) -> RemotingCommand:
    """HEART_BEAT in Java's form; ``consumer_groups`` maps group -> {topic: expression}."""
    consumers = tuple(
        ConsumerData(
            group,
            subscription_data_set=tuple(
                SubscriptionData.from_expression(topic, expression, sub_version)
                for topic, expression in topics.items()
            ),
        )
        for group, topics in (consumer_groups or {}).items()
    )
    producers = tuple(ProducerData(group) for group in producer_groups)
    body = HeartbeatData(client_id, producers, consumers).to_json()
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=body)


@dataclass
class BrokerWire:
    """Requests to one broker over ``pool``."""

    pool: ClientPool
    address: str
    sent: list[RemotingCommand] = field(default_factory=list)

    async def invoke(
        self, request: RemotingCommand, timeout_ms: int = TIMEOUT_MS
    ) -> RemotingCommand:
        return await self.pool.invoke(self.address, request, timeout_ms)

    async def send(self, topic: str, body: bytes, **options: object) -> RemotingCommand:
        response = await self.invoke(send_request(topic, body, **options))  # type: ignore[arg-type]
        self.sent.append(response)
        return response

    async def pull(
        self, topic: str, queue_id: int, queue_offset: int, **options: object
    ) -> RemotingCommand:
        return await self.invoke(pull_request(topic, queue_id, queue_offset, **options))  # type: ignore[arg-type]


def records(response: RemotingCommand) -> list[MessageExt]:
    """The messages of a pull, view or query response body."""
    return decode_records(response.body)


@contextlib.asynccontextmanager
async def connected(
    root: Path, **cluster_options: Any
) -> AsyncIterator[tuple[Cluster, BrokerWire]]:
    """A started :class:`Cluster` under ``root`` and a wire to its first broker."""
    async with Cluster(root, **cluster_options) as cluster:
        pool = ClientPool()
        try:
            yield cluster, BrokerWire(pool, cluster.brokers[0].address)
        finally:
            await pool.close()

"""Client management requests to a broker: HEART_BEAT (34), UNREGISTER_CLIENT (35),
GET_CONSUMER_LIST_BY_GROUP (38), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42),
CHECK_CLIENT_CONFIG (46)."""

from __future__ import annotations

import orjson

from bolide.client.rpc.call import call, call_oneway
from bolide.protocol.bodies import (
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from bolide.remoting import ClientPool

__all__ = [
    "check_client_config",
    "get_consumer_list_by_group",
    "heartbeat",
    "lock_batch_mq",
    "unlock_batch_mq",
    "unregister_client",
]


async def heartbeat(pool: ClientPool, address: str, data: HeartbeatData, timeout_ms: int) -> int:
    """Register the client's producer and consumer groups with the broker at ``address``;
    returns the broker's wire version (MQVersion ordinal). Raises RemoteError, transport
    errors."""
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=data.to_json())
    response = await call(pool, address, request, timeout_ms)
    return response.version


async def check_client_config(
    pool: ClientPool,
    address: str,
    client_id: str,
    group: str,
    subscription: SubscriptionData,
    timeout_ms: int,
) -> None:
    """Ask the broker whether it can filter by ``subscription`` (a SQL92 selector: property
    filters on, the expression compiles). Raises RemoteError with the broker's remark (where
    the expression is wrong) when it cannot, transport errors."""
    fields = {"clientId": client_id, "group": group}
    body = orjson.dumps(subscription.to_object())
    request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, fields, body)
    await call(pool, address, request, timeout_ms)


async def unregister_client(
    pool: ClientPool,
    address: str,
    client_id: str,
    timeout_ms: int,
    *,
    producer_group: str | None = None,
    consumer_group: str | None = None,
) -> None:
    """Tell the broker a group of this client is gone (a consumer group's members are then
    notified and rebalance). Raises RemoteError, transport errors."""
    header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
    request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext_fields())
    await call(pool, address, request, timeout_ms)


async def get_consumer_list_by_group(
    pool: ClientPool, address: str, group: str, timeout_ms: int
) -> list[str]:
    """The client ids the broker has for ``group``, as it lists them.

    Raises RemoteError (a Java broker answers SYSTEM_ERROR for an unknown or empty group),
    ProtocolError (bad body), transport errors.
    """
    header = GetConsumerListByGroupRequestHeader(group)
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext_fields()
    )
    response = await call(pool, address, request, timeout_ms)
    return list(GetConsumerListByGroupResponseBody.from_json(response.body).consumer_id_list)


async def lock_batch_mq(
    pool: ClientPool, address: str, body: LockBatchRequestBody, timeout_ms: int
) -> frozenset[MessageQueue]:
    """Lock ``body.mq_set`` for ``body.client_id``; returns the queues it now holds (those
    locked by another live client are left out). Raises RemoteError, transport errors."""
    request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.to_json())
    response = await call(pool, address, request, timeout_ms)
    return LockBatchResponseBody.from_json(response.body).lock_ok_mq_set


async def unlock_batch_mq(
    pool: ClientPool,
    address: str,
    body: UnlockBatchRequestBody,
    timeout_ms: int,
    *,
    oneway: bool = False,
) -> None:
    """Release the queues of ``body.mq_set`` held by ``body.client_id``."""
    if oneway:
        request = RemotingCommand.request(
            RequestCode.UNLOCK_BATCH_MQ, body=body.to_json(), oneway=True
        )
        await call_oneway(pool, address, request, timeout_ms)
        return
    request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body.to_json())
    await call(pool, address, request, timeout_ms)

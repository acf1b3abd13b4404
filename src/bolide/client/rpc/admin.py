"""One coroutine per admin request code (the requests of mqadmin and the dashboard): each
takes the pool, the peer's address and a timeout, and raises
:class:`~bolide.base.errors.RemoteError` for an unwanted response code (through
:func:`bolide.client.rpc.call`), :class:`~bolide.base.errors.ProtocolError` for a body it
cannot parse, and the transport's errors. :mod:`bolide.client.admin` builds on them.

Name server: GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206),
DELETE_TOPIC_IN_NAMESRV (216). Broker: 17, 21, 28, 200, 201, 202, 203, 204, 207, 208, 215,
222, 300, 307, 314.
"""

from __future__ import annotations

from bolide.client.rpc.call import call_code
from bolide.protocol.bodies import (
    ClusterInfo,
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    GroupList,
    KVTable,
    MessageQueue,
    ProducerConnection,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicStatsTable,
)
from bolide.protocol.bodies.topic import format_attributes
from bolide.protocol.codes import RequestCode
from bolide.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumerGroupRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from bolide.protocol.system_topics import AUTO_CREATE_TOPIC_KEY_TOPIC
from bolide.remoting import ClientPool

__all__ = [
    "clone_group_offset",
    "create_or_update_group",
    "create_or_update_topic",
    "delete_group",
    "delete_topic_in_broker",
    "delete_topic_in_namesrv",
    "get_all_groups",
    "get_all_topic_config",
    "get_broker_runtime_info",
    "get_cluster_info",
    "get_consume_stats",
    "get_consumer_connections",
    "get_consumer_running_info",
    "get_producer_connections",
    "get_topic_list",
    "get_topic_stats",
    "query_topic_consumers",
    "reset_offset",
]


_request = call_code


# --- name server ---------------------------------------------------------------------------------


async def get_cluster_info(pool: ClientPool, address: str, timeout_ms: int) -> ClusterInfo:
    """Clusters, broker names and broker addresses a name server knows."""
    response = await _request(pool, address, RequestCode.GET_BROKER_CLUSTER_INFO, timeout_ms)
    return ClusterInfo.from_json(response.body)


async def get_topic_list(pool: ClientPool, address: str, timeout_ms: int) -> list[str]:
    """Every topic a name server has a route for."""
    code = RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
    response = await _request(pool, address, code, timeout_ms)
    return list(TopicList.from_json(response.body).topic_list)


async def delete_topic_in_namesrv(
    pool: ClientPool, address: str, topic: str, timeout_ms: int, *, cluster: str | None = None
) -> None:
    """Drop ``topic``'s route (only ``cluster``'s brokers when given) from a name server."""
    fields = DeleteTopicFromNamesrvRequestHeader(topic, cluster).to_ext_fields()
    await _request(pool, address, RequestCode.DELETE_TOPIC_IN_NAMESRV, timeout_ms, fields)


# --- broker: topics ------------------------------------------------------------------------------


async def create_or_update_topic(
    pool: ClientPool, address: str, config: TopicConfig, timeout_ms: int
) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker (it registers the topic with the name servers)."""
    header = CreateTopicRequestHeader(
        topic=config.topic_name,
        default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
        read_queue_count=config.read_queue_count,
        write_queue_count=config.write_queue_count,
        perm=config.perm,
        topic_filter_type=config.topic_filter_type,
        order=config.order,
        topic_sys_flag=config.topic_sys_flag,
        attributes=format_attributes(config.attributes) or None,
    )
    code = RequestCode.UPDATE_AND_CREATE_TOPIC
    await _request(pool, address, code, timeout_ms, header.to_ext_fields())


async def get_all_topic_config(
    pool: ClientPool, address: str, timeout_ms: int
) -> dict[str, TopicConfig]:
    """Every topic's configuration on one broker."""
    response = await _request(pool, address, RequestCode.GET_ALL_TOPIC_CONFIG, timeout_ms)
    return TopicConfigSerializeWrapper.from_json(response.body).topic_config_table


async def delete_topic_in_broker(
    pool: ClientPool, address: str, topic: str, timeout_ms: int
) -> None:
    """DELETE_TOPIC_IN_BROKER: the topic's configuration, queues and offsets on one broker."""
    fields = TopicRequestHeader(topic).to_ext_fields()
    await _request(pool, address, RequestCode.DELETE_TOPIC_IN_BROKER, timeout_ms, fields)


async def get_topic_stats(
    pool: ClientPool, address: str, topic: str, timeout_ms: int
) -> TopicStatsTable:
    """Per queue min/max offset and last store time of ``topic`` on one broker."""
    fields = TopicRequestHeader(topic).to_ext_fields()
    response = await _request(pool, address, RequestCode.GET_TOPIC_STATS_INFO, timeout_ms, fields)
    return TopicStatsTable.from_json(response.body)


async def query_topic_consumers(
    pool: ClientPool, address: str, topic: str, timeout_ms: int
) -> list[str]:
    """The groups consuming ``topic`` on one broker (QUERY_TOPIC_CONSUME_BY_WHO)."""
    fields = TopicRequestHeader(topic).to_ext_fields()
    code = RequestCode.QUERY_TOPIC_CONSUME_BY_WHO
    response = await _request(pool, address, code, timeout_ms, fields)
    return list(GroupList.from_json(response.body).group_list)


async def get_broker_runtime_info(
    pool: ClientPool, address: str, timeout_ms: int
) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO: the broker's counters, every value a string."""
    response = await _request(pool, address, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_ms)
    return KVTable.from_json(response.body).table


# --- broker: groups ------------------------------------------------------------------------------


async def create_or_update_group(
    pool: ClientPool, address: str, config: SubscriptionGroupConfig, timeout_ms: int
) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker."""
    code = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    await _request(pool, address, code, timeout_ms, body=config.to_json())


async def get_all_groups(
    pool: ClientPool, address: str, timeout_ms: int
) -> dict[str, SubscriptionGroupConfig]:
    """Every subscription group's settings on one broker."""
    code = RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    response = await _request(pool, address, code, timeout_ms)
    return SubscriptionGroupWrapper.from_json(response.body).subscription_group_table


async def delete_group(
    pool: ClientPool, address: str, group: str, timeout_ms: int, *, remove_offsets: bool
) -> None:
    """DELETE_SUBSCRIPTIONGROUP on one broker (and the group's offsets when asked)."""
    fields = DeleteSubscriptionGroupRequestHeader(group, remove_offsets).to_ext_fields()
    await _request(pool, address, RequestCode.DELETE_SUBSCRIPTIONGROUP, timeout_ms, fields)


async def get_consumer_connections(
    pool: ClientPool, address: str, group: str, timeout_ms: int
) -> ConsumerConnection:
    """The group's connections on one broker; RemoteError CONSUMER_NOT_ONLINE when none."""
    fields = ConsumerGroupRequestHeader(group).to_ext_fields()
    code = RequestCode.GET_CONSUMER_CONNECTION_LIST
    response = await _request(pool, address, code, timeout_ms, fields)
    return ConsumerConnection.from_json(response.body)


async def get_producer_connections(
    pool: ClientPool, address: str, group: str, timeout_ms: int
) -> ProducerConnection:
    """The producer group's connections on one broker; RemoteError when none."""
    fields = GetProducerConnectionListRequestHeader(group).to_ext_fields()
    code = RequestCode.GET_PRODUCER_CONNECTION_LIST
    response = await _request(pool, address, code, timeout_ms, fields)
    return ProducerConnection.from_json(response.body)


async def get_consume_stats(
    pool: ClientPool, address: str, group: str, timeout_ms: int, *, topic: str | None = None
) -> ConsumeStats:
    """The group's per-queue progress on one broker (of ``topic``, or of all its topics)."""
    fields = GetConsumeStatsRequestHeader(group, topic).to_ext_fields()
    response = await _request(pool, address, RequestCode.GET_CONSUME_STATS, timeout_ms, fields)
    return ConsumeStats.from_json(response.body)


async def get_consumer_running_info(
    pool: ClientPool,
    address: str,
    group: str,
    client_id: str,
    timeout_ms: int,
    *,
    jstack: bool = False,
) -> ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO, forwarded by the broker at ``address`` to the client."""
    fields = GetConsumerRunningInfoRequestHeader(group, client_id, jstack).to_ext_fields()
    code = RequestCode.GET_CONSUMER_RUNNING_INFO
    response = await _request(pool, address, code, timeout_ms, fields)
    return ConsumerRunningInfo.from_json(response.body)


# --- broker: offsets -----------------------------------------------------------------------------


async def reset_offset(
    pool: ClientPool, address: str, header: ResetOffsetRequestHeader, timeout_ms: int
) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET on one broker; returns the new offset per queue."""
    code = RequestCode.INVOKE_BROKER_TO_RESET_OFFSET
    response = await _request(pool, address, code, timeout_ms, header.to_ext_fields())
    return ResetOffsetBody.from_json(response.body).offset_table if response.body else {}


async def clone_group_offset(
    pool: ClientPool, address: str, header: CloneGroupOffsetRequestHeader, timeout_ms: int
) -> None:
    """CLONE_GROUP_OFFSET on one broker."""
    code = RequestCode.CLONE_GROUP_OFFSET
    await _request(pool, address, code, timeout_ms, header.to_ext_fields())

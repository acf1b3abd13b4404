"""Multi-step admin operations under :class:`~bolide.client.admin.AdminClient` (which
delegates to them; they take its session layer): listing brokers and groups, deleting a topic
everywhere, resetting a group's offsets on every broker of a topic."""

from __future__ import annotations

import dataclasses

from bolide.base.errors import (
    BolideError,
    GroupNotFoundError,
    NameServerUnavailableError,
    TopicNotFoundError,
)
from bolide.client.admin.session import (
    ADMIN_PRODUCER_GROUP,
    AdminSession,
    is_code,
    reason,
    with_broker,
)
from bolide.client.admin.views import BrokerSummary, GroupSummary, ResetResult
from bolide.client.rpc import admin as requests
from bolide.protocol.bodies import ConsumerConnection, MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import ResetOffsetRequestHeader
from bolide.protocol.system_topics import is_system_group as is_broker_system_group

__all__ = ["delete_topic", "is_system_group", "list_brokers", "list_groups", "reset_offset"]


def is_system_group(group: str) -> bool:
    """A group every broker has for its own tools (hidden by ``group list``)."""
    return group == ADMIN_PRODUCER_GROUP or is_broker_system_group(group)


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


async def list_brokers(admin: AdminSession) -> list[BrokerSummary]:
    """See :meth:`AdminClient.list_brokers`."""
    info = await admin.cluster_info()
    cluster_of = {
        name: cluster for cluster, names in info.cluster_addr_table.items() for name in names
    }
    places = [
        (cluster_of.get(name, data.cluster), name, broker_id, address)
        for name, data in sorted(info.broker_addr_table.items())
        for broker_id, address in sorted(data.broker_addrs.items())
    ]
    runtimes = await admin.fan_out([admin.broker_runtime_info(address) for *_, address in places])
    summaries = []
    for (cluster, name, broker_id, address), runtime in zip(places, runtimes, strict=True):
        if isinstance(runtime, BolideError):
            summaries.append(
                BrokerSummary(cluster, name, broker_id, address, error=reason(runtime))
            )
            continue
        summaries.append(
            BrokerSummary(
                cluster,
                name,
                broker_id,
                address,
                version=runtime.get("brokerVersionDesc", ""),
                put_today=_int(runtime.get("msgPutTotalTodayNow")),
                get_today=_int(runtime.get("msgGetTotalTodayNow")),
                runtime=runtime.get("runtime", ""),
                role=runtime.get("brokerRole", "SLAVE" if broker_id else "ASYNC_MASTER"),
            )
        )
    by_place = {
        (name, broker_id): runtime
        for (_, name, broker_id, _), runtime in zip(places, runtimes, strict=True)
        if not isinstance(runtime, BolideError)
    }
    return [_with_lag(summary, by_place) for summary in summaries]


def _with_lag(
    summary: BrokerSummary, runtimes: dict[tuple[str, int], dict[str, str]]
) -> BrokerSummary:
    """Fill the replication lag: a slave's from its master's and its own commit-log end, the
    time from the master's view of its slave; a master's from its best slave."""
    own = runtimes.get((summary.broker_name, summary.broker_id))
    master = runtimes.get((summary.broker_name, 0))
    if own is None:
        return summary
    if summary.broker_id == 0:
        if _int(own.get("haConnectionCount")) == 0:
            return summary
        lag_bytes, lag_ms = _int(own.get("haReplicaLagBytes")), _int(own.get("haReplicaLagMs"))
    elif master is not None:
        lag_bytes = max(
            0, _int(master.get("commitLogMaxOffset")) - _int(own.get("commitLogMaxOffset"))
        )
        lag_ms = _int(master.get("haReplicaLagMs")) if lag_bytes else 0
    else:
        lag_bytes, lag_ms = _int(own.get("haReplicaLagBytes")), _int(own.get("haReplicaLagMs"))
    return dataclasses.replace(summary, lag_bytes=lag_bytes, lag_ms=lag_ms)


async def delete_topic(admin: AdminSession, topic: str, cluster: str | None) -> list[str]:
    """See :meth:`AdminClient.delete_topic`."""
    try:
        targets = await admin.topic_masters(topic)
    except TopicNotFoundError:
        if cluster is None:
            raise
        targets = {}
    if cluster is not None:
        members = await admin.master_addresses(cluster=cluster)
        targets = {name: members[name] for name in members if name in targets or not targets}
    for name, result in zip(
        targets,
        await admin.fan_out(
            [
                requests.delete_topic_in_broker(admin.pool, address, topic, admin.timeout_ms)
                for address in targets.values()
            ]
        ),
        strict=True,
    ):
        if isinstance(result, BolideError):
            raise with_broker(result, name, f"deleting topic {topic!r}")
    addresses = admin.namesrv_addresses
    results = await admin.fan_out(
        [
            requests.delete_topic_in_namesrv(
                admin.pool, address, topic, admin.timeout_ms, cluster=cluster
            )
            for address in addresses
        ]
    )
    failed = [
        f"{address}: {reason(result)}"
        for address, result in zip(addresses, results, strict=True)
        if isinstance(result, BolideError)
    ]
    if len(failed) == len(addresses):
        raise NameServerUnavailableError(
            f"topic {topic!r} deleted on the brokers but not on the name servers "
            f"({'; '.join(failed)})"
        )
    return sorted(targets)


async def list_groups(admin: AdminSession, include_system: bool) -> list[GroupSummary]:
    """See :meth:`AdminClient.list_groups`."""
    configs = await admin.group_configs()
    names = sorted(name for name in configs if include_system or not is_system_group(name))
    connections = await admin.fan_out([admin.consumer_connections(name) for name in names])
    summaries = []
    for name, connection in zip(names, connections, strict=True):
        by_broker = configs[name]
        online = connection if isinstance(connection, ConsumerConnection) else None
        summaries.append(
            GroupSummary(
                name,
                next(iter(by_broker.values())),
                tuple(sorted(by_broker)),
                len(online.connection_set) if online else 0,
                online.message_model.name if online else None,
            )
        )
    return summaries


async def reset_offset(
    admin: AdminSession, group: str, topic: str, timestamp_ms: int, force: bool
) -> ResetResult:
    """See :meth:`AdminClient.reset_offset`."""
    masters = await admin.topic_masters(topic)
    header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force)
    results = await admin.fan_out(
        [
            requests.reset_offset(admin.pool, address, header, admin.timeout_ms)
            for address in masters.values()
        ]
    )
    offsets: dict[MessageQueue, int] = {}
    notes: list[str] = []
    unknown = 0
    for name, result in zip(masters, results, strict=True):
        if is_code(result, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
            unknown += 1
            notes.append(f"broker {name} does not know group {group}")
        elif isinstance(result, BolideError):
            raise with_broker(result, name)
        else:
            offsets.update(result)
    if unknown == len(masters):
        raise GroupNotFoundError(f"no broker holding {topic!r} knows the group {group!r}")
    connection = await admin.consumer_connections(group)
    clients = connection.connection_set if connection is not None else ()
    return ResetResult(group, topic, timestamp_ms, offsets, clients, tuple(notes))

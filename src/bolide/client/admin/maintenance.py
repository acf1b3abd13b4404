"""Admin operations over the brokers' store maintenance and two progress queries (see
:mod:`bolide.client.rpc.maintenance` for the requests)."""

from __future__ import annotations

from collections.abc import Iterable

from bolide.base.errors import BolideError
from bolide.client.admin.session import AdminSession
from bolide.client.rpc import maintenance as requests
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import RequestCode
from bolide.protocol.headers import GetConsumerStatusRequestHeader, QueryCorrectionOffsetHeader

__all__ = ["consumer_status", "correction_offsets", "run_maintenance"]

_WHAT = {
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "cleaning expired consume queues",
    RequestCode.CLEAN_UNUSED_TOPIC: "cleaning unused topics",
    RequestCode.DELETE_EXPIRED_COMMITLOG: "deleting expired commit log",
}


async def run_maintenance(
    admin: AdminSession, code: RequestCode, cluster: str | None, brokers: Iterable[str]
) -> dict[str, str]:
    """``code`` (306, 316 or 329) on the given brokers, else every master of ``cluster``,
    else every master; broker name -> its remark. Raises the first broker's failure."""
    targets = await admin.targets(cluster, brokers)
    return await admin._ask_each(targets, requests.run_maintenance, code, _WHAT[code])


async def correction_offsets(
    admin: AdminSession, topic: str, compare_group: str, filter_groups: Iterable[str]
) -> dict[str, dict[int, int]]:
    """Broker name -> queue id -> correction offset, over the brokers holding ``topic``."""
    header = QueryCorrectionOffsetHeader(topic, compare_group, ",".join(filter_groups) or None)
    return await admin._ask_each(
        await admin.topic_masters(topic),
        requests.correction_offsets,
        header,
        f"reading the correction offsets of {topic!r}",
    )


async def consumer_status(
    admin: AdminSession, group: str, topic: str, client_id: str | None
) -> dict[str, dict[MessageQueue, int]]:
    """Client id -> the offsets of ``topic`` it reports, merged over the brokers holding the
    topic. Raises the first failure when no broker answered (a group with no client online
    anywhere: RemoteError SYSTEM_ERROR)."""
    header = GetConsumerStatusRequestHeader(topic, group, client_id)
    masters = await admin.topic_masters(topic)
    results = await admin.fan_out(
        [
            requests.consumer_status(admin.pool, address, header, admin.timeout_ms)
            for address in masters.values()
        ]
    )
    merged: dict[str, dict[MessageQueue, int]] = {}
    failures: list[BolideError] = []
    for result in results:
        if isinstance(result, BolideError):
            failures.append(result)
            continue
        for client, table in result.items():
            merged.setdefault(client, {}).update(table)
    if failures and len(failures) == len(results):
        raise failures[0]
    return merged

"""Consumer-group progress (mqadmin consumerProgress, the dashboard's CONSUME DETAIL), for
:meth:`bolide.client.admin.AdminClient.group_progress`.

1. GET_CONSUME_STATS on every master: per queue the broker (max) offset, the offset the
   group committed there, and the store time of the last consumed message.
2. GET_CONSUMER_CONNECTION_LIST: the clients online now and the group's message model.
3. GET_CONSUMER_RUNNING_INFO to each client (through a broker): the queues it holds, and
   for each the offset it has consumed up to (``mqTable[queue].commitOffset``).

A clustering group gets one row per queue, with the broker's committed offset and the client
owning the queue. A broadcasting group commits nothing to the brokers — each client keeps its
own offsets (RocketMQ users must log in to every machine to see them, issue #3316) — so its
rows are one per client and queue, with the offset that client reports; an offline
broadcasting group shows the brokers' (empty) view, and a note says so.
"""

from __future__ import annotations

import dataclasses

from bolide.base.errors import BolideError, GroupNotFoundError, RemoteError
from bolide.client.admin.session import AdminSession
from bolide.client.admin.views import START_BY_CONSUME_FROM, GroupProgress, QueueProgress
from bolide.client.rpc import admin as requests
from bolide.client.rpc import query_consumer_offset
from bolide.protocol.bodies import (
    ConsumerRunningInfo,
    ConsumeStats,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
)
from bolide.protocol.codes import ResponseCode

__all__ = ["group_progress"]

COMMIT_OFFSET_KEY = "commitOffset"
"""ProcessQueueInfo field (Java and C++) with the offset a client consumed a queue up to."""


async def _broker_stats(
    admin: AdminSession, group: str, topic: str | None, notes: list[str]
) -> tuple[dict[MessageQueue, OffsetWrapper], float, bool]:
    """Merged consume stats, the summed rate, and whether any broker knows the group."""
    masters = await admin.master_addresses()
    results = await admin.fan_out(
        [
            requests.get_consume_stats(admin.pool, address, group, admin.timeout_ms, topic=topic)
            for address in masters.values()
        ]
    )
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    known = False
    for name, result in zip(masters, results, strict=True):
        if isinstance(result, ConsumeStats):
            known = True
            table.update(result.offset_table)
            tps += result.consume_tps
        elif not (
            isinstance(result, RemoteError)
            and result.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        ):
            notes.append(f"broker {name}: {result}")
    return table, tps, known


async def _client_reports(
    admin: AdminSession, group: str, client_ids: list[str], notes: list[str]
) -> dict[str, ConsumerRunningInfo]:
    results = await admin.fan_out(
        [admin.consumer_running_info(group, client_id) for client_id in client_ids]
    )
    reports: dict[str, ConsumerRunningInfo] = {}
    for client_id, result in zip(client_ids, results, strict=True):
        if isinstance(result, BolideError):
            notes.append(f"client {client_id} did not report its queues: {result}")
        else:
            reports[client_id] = result
    return reports


def _commit_offset(info: dict[str, object]) -> int:
    value = info.get(COMMIT_OFFSET_KEY)
    if isinstance(value, int | float | str):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


def _broadcast_rows(
    stats: dict[MessageQueue, OffsetWrapper],
    reports: dict[str, ConsumerRunningInfo],
    topic: str | None,
) -> list[QueueProgress]:
    rows = []
    for client_id, report in sorted(reports.items()):
        for queue, info in report.mq_table.items():
            if topic is not None and queue.topic != topic:
                continue
            broker = stats.get(queue)
            rows.append(
                QueueProgress(
                    queue,
                    broker.broker_offset if broker else 0,
                    max(0, _commit_offset(info)),
                    client_id,
                )
            )
    return rows


async def _new_starts(
    admin: AdminSession, group: str, rows: list[QueueProgress], notes: list[str]
) -> list[QueueProgress]:
    """Rows with nothing committed get where the group starts them: QUERY_CONSUMER_OFFSET,
    the question a starting consumer asks (the broker answers by its newGroupStartRule)."""
    fresh = [row for row in rows if row.consumer_offset == 0 and row.broker_offset > 0]
    if not fresh:
        return rows
    masters = await admin.master_addresses()
    answers = await admin.fan_out(
        [
            query_consumer_offset(
                admin.pool,
                masters.get(row.queue.broker_name, ""),
                group,
                row.queue.topic,
                row.queue.queue_id,
                admin.timeout_ms,
            )
            for row in fresh
        ]
    )
    starts: dict[MessageQueue, int] = {}
    for row, answer in zip(fresh, answers, strict=True):
        if not isinstance(answer, BolideError):
            starts[row.queue] = START_BY_CONSUME_FROM if answer is None else answer
    by_consume_from = sum(1 for start in starts.values() if start == START_BY_CONSUME_FROM)
    if starts:
        notes.append(
            f"{len(starts)} queue(s) have nothing committed: the group starts "
            f"{len(starts) - by_consume_from} at the offset the broker gives (startOffset) and "
            f"{by_consume_from} where its consumers' consumeFromWhere says (LAST_OFFSET: the "
            "broker offset); broker.conf newGroupStartRule decides"
        )
    return [
        dataclasses.replace(row, start_offset=starts[row.queue]) if row.queue in starts else row
        for row in rows
    ]


async def group_progress(admin: AdminSession, group: str, topic: str | None) -> GroupProgress:
    """See the module docstring. Raises GroupNotFoundError when no broker knows ``group``."""
    notes: list[str] = []
    stats, tps, known = await _broker_stats(admin, group, topic, notes)
    connection = await admin.consumer_connections(group)
    # A Java broker answers an unknown group with an empty table, not an error.
    if not known and connection is None and group not in await admin.group_configs():
        raise GroupNotFoundError(
            f"no broker knows the consumer group {group!r}: no subscription group, "
            "no online consumer, no committed offset"
        )
    clients = connection.connection_set if connection is not None else ()
    model = connection.message_model if connection is not None else None
    reports = await _client_reports(admin, group, [client.client_id for client in clients], notes)
    if model is MessageModel.BROADCASTING:
        rows = _broadcast_rows(stats, reports, topic)
    else:
        owners = {
            queue: client_id for client_id, report in reports.items() for queue in report.mq_table
        }
        rows = [
            QueueProgress(
                queue,
                item.broker_offset,
                item.consumer_offset,
                owners.get(queue),
                item.last_timestamp_ms,
            )
            for queue, item in stats.items()
        ]
        if connection is None and rows:
            notes.append(f"group {group} is offline: nobody consumes these queues now")
        rows = await _new_starts(admin, group, rows, notes)
    rows.sort(key=lambda row: (row.queue, row.client_id or ""))
    return GroupProgress(
        group,
        model.name if model is not None else None,
        tuple(clients),
        tuple(rows),
        tps,
        tuple(notes),
    )

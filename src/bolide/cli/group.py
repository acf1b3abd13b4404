"""``bolide group create|update|delete|list|progress|connections|running-info``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bolide.cli.common import (
    AdminCommand,
    BrokerOption,
    ClusterOption,
    admin_options,
    format_time_ms,
)
from bolide.client.admin import START_BY_CONSUME_FROM, AdminClient
from bolide.client.admin.views import connection_to_dict
from bolide.protocol.bodies import ConsumerConnection, ConsumerRunningInfo, SubscriptionGroupConfig

__all__ = ["register"]

app = typer.Typer(help="Consumer groups: settings, progress, clients.", no_args_is_help=True)

GroupArgument = Annotated[str, typer.Argument(help="Consumer group name.")]
RetryMaxOption = Annotated[
    int | None,
    typer.Option("--retry-max-times", min=0, help="Deliveries through %RETRY% before %DLQ%."),
]
RetryQueuesOption = Annotated[
    int | None, typer.Option("--retry-queues", min=0, help="Queues of the group's retry topic.")
]
BroadcastOption = Annotated[
    bool | None,
    typer.Option("--broadcast/--no-broadcast", help="Allow broadcasting consumption."),
]
ConsumeOption = Annotated[
    bool | None, typer.Option("--consume/--no-consume", help="Allow the group to consume.")
]
OrderlyOption = Annotated[
    bool | None, typer.Option("--orderly/--concurrently", help="Mark the group orderly.")
]


def register(root: typer.Typer) -> None:
    """Add the ``group`` group to ``root``."""
    root.add_typer(app, name="group")


def _settings(
    retry_max_times: int | None,
    retry_queues: int | None,
    broadcast: bool | None,
    consume: bool | None,
    orderly: bool | None,
) -> dict[str, Any]:
    """SubscriptionGroupConfig fields the options set."""
    values = {
        "retry_max_times": retry_max_times,
        "retry_queue_count": retry_queues,
        "consume_broadcast_enable": broadcast,
        "consume_enable": consume,
        "consume_orderly_enable": orderly,
    }
    return {key: value for key, value in values.items() if value is not None}


@app.command("create")
@admin_options
def create(
    group: GroupArgument,
    retry_max_times: RetryMaxOption = None,
    retry_queues: RetryQueuesOption = None,
    broadcast: BroadcastOption = None,
    consume: ConsumeOption = None,
    orderly: OrderlyOption = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Create a subscription group (or replace its settings); unset options take RocketMQ's
    defaults (16 retries, 1 retry queue, consume and broadcast allowed)."""
    config = SubscriptionGroupConfig(
        group, **_settings(retry_max_times, retry_queues, broadcast, consume, orderly)
    )
    command.change_brokers(
        lambda admin: admin.create_group(config, cluster=cluster, brokers=broker or ()),
        "group", group, "created on", extra={"config": config.to_object()},
    )  # fmt: skip


@app.command("update")
@admin_options
def update(
    group: GroupArgument,
    retry_max_times: RetryMaxOption = None,
    retry_queues: RetryQueuesOption = None,
    broadcast: BroadcastOption = None,
    consume: ConsumeOption = None,
    orderly: OrderlyOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Change settings of an existing group; the others stay."""
    changes = _settings(retry_max_times, retry_queues, broadcast, consume, orderly)
    if not changes:
        raise typer.BadParameter("nothing to change: give at least one setting")
    command.change_brokers(
        lambda admin: admin.update_group(group, **changes), "group", group, "updated on"
    )


@app.command("delete")
@admin_options
def delete(
    group: GroupArgument,
    keep_offsets: Annotated[
        bool, typer.Option("--keep-offsets", help="Keep the group's committed offsets.")
    ] = False,
    cluster: ClusterOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Delete a subscription group (and its offsets unless --keep-offsets)."""
    command.change_brokers(
        lambda admin: admin.delete_group(group, remove_offsets=not keep_offsets, cluster=cluster),
        "group", group, "deleted from", no_broker="the brokers",
    )  # fmt: skip


@app.command("list")
@admin_options
def list_groups(
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include the brokers' built-in groups.")
    ] = False,
    *,
    command: AdminCommand,
) -> None:
    """Subscription groups, where they are, who is online, their retry settings."""
    output = command.output
    groups = command.run(lambda admin: admin.list_groups(include_system=show_all))
    if output.json_output:
        output.json([group.to_dict() for group in groups])
        return
    output.table(
        None,
        ("group", "online", "model", "retry max", "retry queues", "consume", "orderly", "brokers"),
        [
            (
                item.group,
                item.online_clients,
                item.message_model,
                item.config.retry_max_times,
                item.config.retry_queue_count,
                "yes" if item.config.consume_enable else "no",
                "yes" if item.config.consume_orderly_enable else "no",
                ", ".join(item.brokers),
            )
            for item in groups
        ],
    )


@app.command("progress")
@admin_options
def progress(
    group: GroupArgument,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    *,
    command: AdminCommand,
) -> None:
    """Per queue: broker offset, consumer offset, lag, and the client owning it (for a
    broadcasting group, each client's own offsets)."""
    output = command.output
    result = command.run(lambda admin: admin.group_progress(group, topic=topic))
    if output.json_output:
        output.json(result.to_dict())
        return
    state = (
        f"{result.message_model}, {len(result.clients)} client(s)" if result.online else "offline"
    )
    output.table(
        f"progress of {group} ({state}); total lag {result.total_lag}",
        ("topic", "broker", "queue", "broker offset", "consumer offset", "lag", "client",
         "last consumed", "new start"),
        [
            (
                row.queue.topic,
                row.queue.broker_name,
                row.queue.queue_id,
                row.broker_offset,
                row.consumer_offset,
                row.lag,
                row.client_id,
                format_time_ms(row.last_timestamp_ms),
                _new_start(row.start_offset),
            )
            for row in result.queues
        ],
    )  # fmt: skip
    for note in result.notes:
        output.note(f"note: {note}")


def _new_start(start_offset: int | None) -> str:
    """Where the group starts a queue it has committed nothing on (see QueueProgress)."""
    if start_offset is None:
        return ""
    if start_offset == START_BY_CONSUME_FROM:
        return "consumeFromWhere"
    return str(start_offset)


@app.command("connections")
@admin_options
def connections(group: GroupArgument, *, command: AdminCommand) -> None:
    """The group's online clients (id, address, language, version) and subscriptions."""
    output = command.output

    async def action(admin: AdminClient) -> ConsumerConnection | None:
        found = await admin.consumer_connections(group)
        if found is None:
            await admin.ensure_group(group)
        return found

    found = command.run(action)
    if found is None:
        if output.json_output:
            output.json({"group": group, "online": False, "clients": [], "subscriptions": {}})
        else:
            output.line(f"group {group} is not online: no client of it is connected")
        return
    subscriptions = {topic: data.sub_string for topic, data in found.subscription_table.items()}
    if output.json_output:
        output.json(
            {
                "group": group,
                "online": True,
                "messageModel": found.message_model.name,
                "consumeType": found.consume_type.name,
                "consumeFromWhere": found.consume_from_where.name,
                "clients": [connection_to_dict(client) for client in found.connection_set],
                "subscriptions": subscriptions,
            }
        )
        return
    output.table(
        f"clients of {group} ({found.message_model.name}, {found.consume_type.name})",
        ("client id", "address", "language", "version"),
        [
            (client.client_id, client.client_addr, client.language.name, client.version)
            for client in found.connection_set
        ],
    )
    output.table(None, ("topic", "expression"), sorted(subscriptions.items()))


@app.command("running-info")
@admin_options
def running_info(
    group: GroupArgument,
    client: Annotated[
        str | None, typer.Option("--client", help="Only this client id (default: every one).")
    ] = None,
    *,
    command: AdminCommand,
) -> None:
    """What each client reports: its settings, and per queue its cache and consumed offset."""
    output = command.output

    async def action(admin: AdminClient) -> dict[str, ConsumerRunningInfo | str]:
        if client is not None:
            return {client: await admin.consumer_running_info(group, client)}
        found = await admin.consumer_connections(group)
        if found is None:
            await admin.ensure_group(group)
            return {}
        ids = [item.client_id for item in found.connection_set]
        infos = await admin.fan_out([admin.consumer_running_info(group, each) for each in ids])
        return {
            each: info if isinstance(info, ConsumerRunningInfo) else str(info)
            for each, info in zip(ids, infos, strict=True)
        }

    reports = command.run(action)
    if output.json_output:
        output.json({client_id: _report_dict(info) for client_id, info in reports.items()})
        return
    if not reports:
        output.line(f"group {group} is not online: no client of it is connected")
    for client_id, info in reports.items():
        if isinstance(info, str):
            output.note(f"client {client_id}: {info}")
            continue
        output.table(f"client {client_id}", ("property", "value"), sorted(info.properties.items()))
        output.table(
            None,
            ("topic", "broker", "queue", "cached", "consumed offset", "last pull"),
            [
                (
                    queue.topic,
                    queue.broker_name,
                    queue.queue_id,
                    item.get("cachedMsgCount"),
                    item.get("commitOffset"),
                    format_time_ms(int(item.get("lastPullTimestamp") or 0)),
                )
                for queue, item in sorted(info.mq_table.items())
            ],
        )


def _report_dict(info: ConsumerRunningInfo | str) -> dict[str, Any]:
    if isinstance(info, str):
        return {"error": info}
    return {
        "properties": info.properties,
        "subscriptions": {item.topic: item.sub_string for item in info.subscription_set},
        "queues": [
            {"topic": q.topic, "broker": q.broker_name, "queueId": q.queue_id, **item}
            for q, item in sorted(info.mq_table.items())
        ],
        "status": info.status_table,
    }

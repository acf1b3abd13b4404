"""``bolide topic create|update|delete|list|route|status|consumers``."""

from __future__ import annotations

from typing import Annotated

import typer

from bolide.cli.common import (
    AdminCommand,
    BrokerOption,
    ClusterOption,
    admin_options,
    format_time_ms,
)
from bolide.client.admin import DEFAULT_QUEUE_COUNT, AdminClient
from bolide.client.rpc import admin as admin_rpc
from bolide.protocol.bodies import PERM_INHERIT, PERM_READ, PERM_WRITE
from bolide.protocol.bodies.topic import MESSAGE_TYPE_ATTRIBUTE, MESSAGE_TYPES
from bolide.protocol.system_topics import topic_kind

__all__ = ["register"]

app = typer.Typer(help="Create, change, delete and inspect topics.", no_args_is_help=True)

_PERM_LETTERS = {"r": PERM_READ, "w": PERM_WRITE, "x": PERM_INHERIT}

TopicArgument = Annotated[str, typer.Argument(help="Topic name.")]
PermOption = Annotated[
    str | None,
    typer.Option("--perm", help="Permission: 6 (read+write), 4 (read), 2 (write), or letters rw."),
]


def register(root: typer.Typer) -> None:
    """Add the ``topic`` group to ``root``."""
    root.add_typer(app, name="topic")


def parse_perm(text: str | None) -> int | None:
    """``"6"`` or ``"rw"`` -> 6; raises typer.BadParameter."""
    if text is None:
        return None
    value = text.strip().lower()
    if value.isdigit() and 0 <= int(value) <= 15:
        return int(value)
    if value and all(letter in _PERM_LETTERS for letter in value):
        return sum({_PERM_LETTERS[letter] for letter in value})
    raise typer.BadParameter(f"--perm {text!r}: give 0..15 or letters from r, w, x")


def perm_text(perm: int) -> str:
    """6 -> ``RW-`` (read, write, inherit)."""
    return "".join(letter.upper() if perm & bit else "-" for letter, bit in _PERM_LETTERS.items())


@app.command("create")
@admin_options
def create(
    topic: TopicArgument,
    queues: Annotated[int, typer.Option("--queues", "-q", min=1, help="Read and write queues.")] = (
        DEFAULT_QUEUE_COUNT
    ),
    read_queues: Annotated[int | None, typer.Option("--read-queues", min=1)] = None,
    write_queues: Annotated[int | None, typer.Option("--write-queues", min=1)] = None,
    perm: PermOption = None,
    order: Annotated[bool, typer.Option("--order", help="An ordered topic.")] = False,
    message_type: Annotated[
        str | None,
        typer.Option(
            "--type",
            help="5.x message type (attribute message.type): normal, fifo, delay, transaction "
            "or mixed.",
        ),
    ] = None,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Create a topic (or replace its settings) on every broker, or on those chosen."""
    permission = parse_perm(perm)
    if message_type is not None and message_type.upper() not in MESSAGE_TYPES:
        raise typer.BadParameter(
            f"--type {message_type!r}: give one of {', '.join(t.lower() for t in MESSAGE_TYPES)}"
        )
    attributes = {} if message_type is None else {MESSAGE_TYPE_ATTRIBUTE: message_type.upper()}
    command.change_brokers(
        lambda admin: admin.create_topic(
            topic,
            queue_count=queues,
            read_queue_count=read_queues,
            write_queue_count=write_queues,
            perm=permission if permission is not None else PERM_READ | PERM_WRITE,
            order=order or (message_type is not None and message_type.upper() == "FIFO"),
            cluster=cluster,
            brokers=broker or (),
            attributes=attributes,
        ),
        "topic", topic, "created on",
    )  # fmt: skip


@app.command("update")
@admin_options
def update(
    topic: TopicArgument,
    queues: Annotated[int | None, typer.Option("--queues", "-q", min=1)] = None,
    read_queues: Annotated[int | None, typer.Option("--read-queues", min=1)] = None,
    write_queues: Annotated[int | None, typer.Option("--write-queues", min=1)] = None,
    perm: PermOption = None,
    order: Annotated[bool | None, typer.Option("--order/--no-order")] = None,
    *,
    command: AdminCommand,
) -> None:
    """Change queue counts, permission or order of an existing topic (others stay)."""
    permission = parse_perm(perm)
    command.change_brokers(
        lambda admin: admin.update_topic(
            topic,
            read_queue_count=read_queues if read_queues is not None else queues,
            write_queue_count=write_queues if write_queues is not None else queues,
            perm=permission,
            order=order,
        ),
        "topic", topic, "updated on",
    )  # fmt: skip


@app.command("delete")
@admin_options
def delete(topic: TopicArgument, cluster: ClusterOption = None, *, command: AdminCommand) -> None:
    """Delete a topic (its queues and every group's offsets on it) from brokers and name
    servers."""
    command.change_brokers(
        lambda admin: admin.delete_topic(topic, cluster=cluster),
        "topic", topic, "deleted from", no_broker="no broker",
    )  # fmt: skip


@app.command("list")
@admin_options
def list_topics(
    show_all: Annotated[
        bool, typer.Option("--all", "-a", help="Include retry, dead-letter and system topics.")
    ] = False,
    *,
    command: AdminCommand,
) -> None:
    """Topics the name servers route, with their kind and 5.x message type."""
    output = command.output

    async def action(admin: AdminClient) -> tuple[list[str], set[str], dict[str, str]]:
        info = await admin.cluster_info()
        internal = set(info.cluster_addr_table) | set(info.broker_addr_table)
        internal |= {f"{cluster}_REPLY_TOPIC" for cluster in info.cluster_addr_table}
        types: dict[str, str] = {}
        for address in (await admin.master_addresses()).values():
            table = await admin_rpc.get_all_topic_config(admin.pool, address, admin.timeout_ms)
            types.update({name: config.message_type for name, config in table.items()})
        return await admin.topic_list(), internal, types

    topics, internal, types = command.run(action)
    rows = [(topic, topic_kind(topic, internal), types.get(topic, "")) for topic in topics]
    if not show_all:
        rows = [row for row in rows if row[1] == "normal"]
    if output.json_output:
        output.json([{"topic": t, "kind": kind, "messageType": m} for t, kind, m in rows])
    else:
        output.table(None, ("topic", "kind", "message type"), rows)


@app.command("route")
@admin_options
def route(topic: TopicArgument, *, command: AdminCommand) -> None:
    """Which brokers hold the topic, with how many queues and which permission."""
    output = command.output
    data = command.run(lambda admin: admin.topic_route(topic))
    brokers = {broker.broker_name: broker for broker in data.broker_datas}
    entries = []
    for queue_data in sorted(data.queue_datas, key=lambda item: item.broker_name):
        broker = brokers.get(queue_data.broker_name)
        addresses = (
            {str(key): value for key, value in sorted(broker.broker_addrs.items())}
            if broker
            else {}
        )
        entries.append((queue_data, broker.cluster if broker else "", addresses))
    if output.json_output:
        output.json(
            {
                "topic": topic,
                "orderTopicConf": data.order_topic_conf,
                "brokers": [
                    {
                        "broker": queue_data.broker_name,
                        "cluster": cluster,
                        "addresses": addresses,
                        "readQueues": queue_data.read_queue_count,
                        "writeQueues": queue_data.write_queue_count,
                        "perm": queue_data.perm,
                    }
                    for queue_data, cluster, addresses in entries
                ],
            }
        )
        return
    output.table(
        f"route of {topic}",
        ("broker", "cluster", "addresses (id=host:port)", "read queues", "write queues", "perm"),
        [
            (
                queue_data.broker_name,
                cluster,
                " ".join(f"{key}={value}" for key, value in addresses.items()),
                queue_data.read_queue_count,
                queue_data.write_queue_count,
                perm_text(queue_data.perm),
            )
            for queue_data, cluster, addresses in entries
        ],
    )


@app.command("status")
@admin_options
def status(topic: TopicArgument, *, command: AdminCommand) -> None:
    """Per queue: min and max offset, messages held, time of the last message."""
    output = command.output
    statuses = command.run(lambda admin: admin.topic_status(topic))
    if output.json_output:
        output.json({"topic": topic, "queues": [row.to_dict() for row in statuses]})
        return
    output.table(
        f"status of {topic}",
        ("broker", "queue", "min offset", "max offset", "messages", "last update"),
        [
            (
                row.queue.broker_name,
                row.queue.queue_id,
                row.min_offset,
                row.max_offset,
                row.message_count,
                format_time_ms(row.last_update_timestamp_ms),
            )
            for row in statuses
        ],
    )


@app.command("consumers")
@admin_options
def consumers(topic: TopicArgument, *, command: AdminCommand) -> None:
    """The consumer groups of a topic (subscribed now or holding offsets on it)."""
    output = command.output
    groups = command.run(lambda admin: admin.topic_consumer_groups(topic))
    if output.json_output:
        output.json({"topic": topic, "groups": groups})
    else:
        output.table(f"consumers of {topic}", ("group",), [(group,) for group in groups])

"""``bolide offset reset|clone``: move a consumer group, or copy its progress to another."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from bolide.cli.common import AdminCommand, admin_options, format_time_ms, parse_time_ms
from bolide.client.admin import RESET_TO_EARLIEST, RESET_TO_LATEST, AdminClient

__all__ = ["register"]

app = typer.Typer(help="Reset or clone consumer offsets.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``offset`` group to ``root``."""
    root.add_typer(app, name="offset")


def _describe_target(timestamp_ms: int) -> str:
    if timestamp_ms == RESET_TO_LATEST:
        return "the latest offset (backlog skipped)"
    if timestamp_ms == RESET_TO_EARLIEST:
        return "the earliest offset"
    return f"the first message stored at or after {format_time_ms(timestamp_ms)}"


@app.command("reset")
@admin_options
def reset(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str, typer.Argument(help="Topic whose offsets move.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="earliest, latest, now (skip the backlog), epoch ms, ISO time "
            "(2024-05-01T12:00:00, local unless it has an offset) or a duration ago (10m, 2h).",
        ),
    ],
    force: Annotated[
        bool,
        typer.Option("--force/--no-force", help="--no-force only moves queues backwards."),
    ] = True,
    *,
    command: AdminCommand,
) -> None:
    """Move GROUP on TOPIC to a point in time. Online consumers (Bolide, Java, C++) are told
    at once; an offline group resumes there when it starts."""
    output = command.output
    timestamp_ms = parse_time_ms(to, time.time_ns() // 1_000_000)
    result = command.run(lambda admin: admin.reset_offset(group, topic, timestamp_ms, force=force))
    if output.json_output:
        output.json(result.to_dict())
        return
    output.table(
        f"{group} on {topic} reset to {_describe_target(timestamp_ms)}",
        ("broker", "queue", "new offset"),
        [
            (queue.broker_name, queue.queue_id, offset)
            for queue, offset in sorted(result.offsets.items())
        ],
    )
    if result.online:
        clients = ", ".join(client.client_id for client in result.clients)
        output.line(f"told {len(result.clients)} online consumer(s): {clients}")
    else:
        output.line(f"group {group} is offline: it resumes from these offsets when it starts")
    for note in result.notes:
        output.note(f"note: {note}")


@app.command("clone")
@admin_options
def clone(
    source_group: Annotated[str, typer.Argument(help="Group whose offsets are copied.")],
    destination_group: Annotated[str, typer.Argument(help="Group that gets them.")],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    *,
    command: AdminCommand,
) -> None:
    """Copy a group's committed offsets (of one topic, or all) to another group."""
    output = command.output

    async def action(admin: AdminClient) -> list[str]:
        await admin.ensure_group(source_group)
        return await admin.clone_offsets(source_group, destination_group, topic=topic)

    brokers = command.run(action)
    if output.json_output:
        output.json({"source": source_group, "destination": destination_group, "brokers": brokers})
    else:
        output.line(
            f"offsets of {source_group} copied to {destination_group} on {', '.join(brokers)}"
        )

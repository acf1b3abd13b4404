"""``bolide transaction list|resume``: the undecided transactions of every broker.

Each row is a half message no END_TRANSACTION has decided yet: its real topic and queue, its
producer group and message id, how long ago the broker first stored it, and how often the
broker has asked the producers about it (``transactionCheckMax`` checks, then it is given up
to TRANS_CHECK_MAX_TIME_TOPIC). Below the table, each broker's counters since it started.
"""

from __future__ import annotations

from typing import Annotated

import typer

from bolide.cli.common import (
    AdminCommand,
    BrokerOption,
    ClusterOption,
    Output,
    admin_options,
    format_time_ms,
)
from bolide.protocol.bodies.transaction import HALF_MESSAGE_LIST_MAX_COUNT, HalfMessageList

__all__ = ["register"]

app = typer.Typer(help="Transactional messages: what is still undecided.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``transaction`` group to ``root``."""
    root.add_typer(app, name="transaction")


@app.command("list")
@admin_options
def list_pending(
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="Only this producer group.")
    ] = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic.")] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", min=1, max=HALF_MESSAGE_LIST_MAX_COUNT, help="Oldest N per broker."
        ),
    ] = 100,
    given_up: Annotated[
        bool,
        typer.Option(
            "--given-up", help="The newest messages given up after too many checks instead."
        ),
    ] = False,
    cluster: ClusterOption = None,
    broker: BrokerOption = None,
    *,
    command: AdminCommand,
) -> None:
    """Pending (undecided) transactions, oldest first, with age and check count; with
    --given-up, the newest given up to TRANS_CHECK_MAX_TIME_TOPIC (resume them with
    ``bolide transaction resume OFFSET_MSG_ID``)."""
    output = command.output
    listings = command.run(
        lambda admin: admin.pending_transactions(
            group=group,
            topic=topic,
            max_count=limit,
            given_up=given_up,
            cluster=cluster,
            brokers=broker or (),
        )
    )
    if output.json_output:
        _json(output, listings, given_up)
    elif given_up:
        _given_up_table(output, listings)
    else:
        _pending_table(output, listings)


def _json(output: Output, listings: dict[str, HalfMessageList], given_up: bool) -> None:
    output.json(
        [
            {
                "broker": name,
                "givenUp" if given_up else "pending": listing.pending_count,
                "halfMessages": [info.to_object() for info in listing.half_messages],
                "counters": _counters(listing),
            }
            for name, listing in sorted(listings.items())
        ]
    )


def _pending_table(output: Output, listings: dict[str, HalfMessageList]) -> None:
    rows = [
        (
            name, info.topic, info.queue_id, info.producer_group, info.msg_id,
            _age(info.age_ms), info.check_times, format_time_ms(info.first_store_timestamp_ms),
            info.keys,
        )
        for name, listing in sorted(listings.items())
        for info in listing.half_messages
    ]  # fmt: skip
    output.table(
        None,
        ("broker", "topic", "queue", "producer group", "msg id", "age", "checks", "first stored",
         "keys"),
        rows,
    )  # fmt: skip
    for name, listing in sorted(listings.items()):
        counters = _counters(listing)
        hidden = listing.pending_count - len(listing.half_messages)
        more = f" ({hidden} more not shown)" if hidden > 0 else ""
        output.line(
            f"{name}: {listing.pending_count} pending{more}; since start "
            f"{counters['half']} half, {counters['commit']} committed, "
            f"{counters['rollback']} rolled back, {counters['discard']} given up "
            f"(check every {listing.check_interval_ms} ms after {listing.timeout_ms} ms, "
            f"at most {listing.check_max} checks)"
        )


@app.command("resume")
@admin_options
def resume(
    offset_msg_id: Annotated[
        str, typer.Argument(help="Offset message id of a given-up message (list --given-up).")
    ],
    *,
    command: AdminCommand,
) -> None:
    """Check a given-up transaction again (RocketMQ's resumeCheckHalfMessage): it becomes
    pending with its check count reset, and its producers are asked again."""
    output = command.output
    address = command.run(lambda admin: admin.resume_transaction(offset_msg_id))
    if output.json_output:
        output.json({"offsetMsgId": offset_msg_id, "broker": address, "resumed": True})
    else:
        output.line(f"transaction {offset_msg_id} resumed on {address}: it will be checked again")


def _given_up_table(output: Output, listings: dict[str, HalfMessageList]) -> None:
    rows = [
        (
            name, info.topic, info.queue_id, info.producer_group, info.msg_id,
            info.offset_msg_id, info.check_times, format_time_ms(info.first_store_timestamp_ms),
        )
        for name, listing in sorted(listings.items())
        for info in listing.half_messages
    ]  # fmt: skip
    output.table(
        None,
        ("broker", "topic", "queue", "producer group", "msg id", "offset msg id", "checks",
         "given up"),
        rows,
    )  # fmt: skip
    for name, listing in sorted(listings.items()):
        output.line(f"{name}: {listing.pending_count} given up in TRANS_CHECK_MAX_TIME_TOPIC")


def _counters(listing: HalfMessageList) -> dict[str, int]:
    return {
        "half": listing.half_count,
        "commit": listing.commit_count,
        "rollback": listing.rollback_count,
        "discard": listing.discard_count,
        "checkIntervalMs": listing.check_interval_ms,
        "timeoutMs": listing.timeout_ms,
        "checkMax": listing.check_max,
    }


def _age(age_ms: int) -> str:
    """``"7.1 s"``, ``"3 min 20 s"``, ``"2 h 5 min"``."""
    seconds = max(age_ms, 0) / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"

"""``bolide message send|get|query|tail|resend|trace``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from bolide.base import limits
from bolide.cli.common import (
    AdminCommand,
    ExitCode,
    Output,
    admin_options,
    fail,
    format_time_ms,
    parse_time_ms,
)
from bolide.client.admin import AdminClient, ProgressCallback
from bolide.client.admin.trace import MessageTrace, format_duration_ms, message_trace
from bolide.client.admin.views import ResendOutcome, message_to_dict
from bolide.client.message import Message
from bolide.protocol.message import MessageExt
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC

__all__ = ["register"]

app = typer.Typer(help="Send, find, follow and resend messages.", no_args_is_help=True)

TopicArgument = Annotated[str, typer.Argument(help="Topic.")]
BodyLimitOption = Annotated[
    int,
    typer.Option("--body-limit", min=0, help="Bytes of each body to show (0: none)."),
]
_DEFAULT_BODY_LIMIT_BYTES = 200


def register(root: typer.Typer) -> None:
    """Add the ``message`` group to ``root``."""
    root.add_typer(app, name="message")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _show(output: Output, messages: list[MessageExt], title: str, body_limit: int) -> None:
    if output.json_output:
        output.json([message_to_dict(m, body_limit_bytes=body_limit) for m in messages])
        return
    output.table(
        title,
        ("msg id", "queue", "offset", "stored", "tags", "keys", "body"),
        [
            (
                m.msg_id,
                f"{m.queue_id}",
                m.queue_offset,
                format_time_ms(m.store_timestamp_ms),
                m.tags,
                m.keys,
                m.body[:body_limit].decode("utf-8", "replace"),
            )
            for m in messages
        ],
    )


class _Bar:
    """A progress bar on stderr when a person watches; nothing otherwise."""

    def __init__(self, output: Output, description: str) -> None:
        self._progress = (
            Progress(
                TextColumn(description),
                BarColumn(),
                MofNCompleteColumn(),
                console=output.errors,
                transient=True,
            )
            if output.interactive
            else None
        )
        self._task = self._progress.add_task(description, total=None) if self._progress else None

    def __enter__(self) -> ProgressCallback | None:
        if self._progress is None:
            return None
        self._progress.start()
        progress, task = self._progress, self._task

        def update(done: int, total: int) -> None:
            if task is not None:
                progress.update(task, completed=done, total=total)

        return update

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()


@app.command("send")
@admin_options
def send(
    topic: TopicArgument,
    body: Annotated[str | None, typer.Argument(help="Body text (or use --body-file).")] = None,
    body_file: Annotated[
        Path | None, typer.Option("--body-file", help="Read the body from a file ('-': stdin).")
    ] = None,
    tags: Annotated[str | None, typer.Option("--tags")] = None,
    keys: Annotated[str | None, typer.Option("--keys", help="Keys, space-separated.")] = None,
    prop: Annotated[
        list[str] | None, typer.Option("--property", "-p", help="name=value; repeatable.")
    ] = None,
    delay_level: Annotated[int | None, typer.Option("--delay-level", min=1)] = None,
    *,
    command: AdminCommand,
) -> None:
    """Send one message."""
    output = command.output
    if (body is None) == (body_file is None):
        raise typer.BadParameter("give the body as an argument or with --body-file, not both")
    if body_file is not None:
        data = sys.stdin.buffer.read() if str(body_file) == "-" else body_file.read_bytes()
    else:
        data = (body or "").encode()
    properties = {}
    for item in prop or []:
        name, separator, value = item.partition("=")
        if not separator or not name:
            raise typer.BadParameter(f"--property {item!r}: expected name=value")
        properties[name] = value
    message = Message(topic, data, properties=properties, tags=tags, keys=keys,
                      delay_level=delay_level)  # fmt: skip
    result = command.run(lambda admin: admin.send_message(message))
    queue = result.queue
    if output.json_output:
        output.json(
            {
                "status": result.status.name,
                "msgId": result.msg_id,
                "offsetMsgId": result.offset_msg_id,
                "topic": queue.topic,
                "broker": queue.broker_name,
                "queueId": queue.queue_id,
                "queueOffset": result.queue_offset,
            }
        )
    else:
        output.line(
            f"{result.status.name}: msg id {result.msg_id} (offset id {result.offset_msg_id}) "
            f"in {queue.broker_name} queue {queue.queue_id} at offset {result.queue_offset}"
        )


@app.command("get")
@admin_options
def get(
    msg_id: Annotated[str, typer.Argument(help="Message id (UNIQ_KEY) or offset message id.")],
    topic: Annotated[
        str | None,
        typer.Option("--topic", "-t", help="The topic: needed for a message id (UNIQ_KEY)."),
    ] = None,
    body_limit: BodyLimitOption = 1 << 20,
    *,
    command: AdminCommand,
) -> None:
    """Show one message with its properties, found by id."""
    output = command.output
    messages = command.run(lambda admin: admin.get_message(msg_id, topic=topic))
    if output.json_output:
        output.json([message_to_dict(m, body_limit_bytes=body_limit) for m in messages])
        return
    for message in messages:
        fields = message_to_dict(message, body_limit_bytes=body_limit)
        properties = fields.pop("properties")
        body_text = fields.pop("body")
        fields["bornTimestamp"] = format_time_ms(message.born_timestamp_ms)
        fields["storeTimestamp"] = format_time_ms(message.store_timestamp_ms)
        output.table(None, ("field", "value"), list(fields.items()))
        output.table(None, ("property", "value"), sorted(properties.items()))
        output.line(body_text)


@app.command("query")
@admin_options
def query(
    topic: TopicArgument,
    key: Annotated[str | None, typer.Option("--key", "-k", help="A key (KEYS).")] = None,
    begin: Annotated[
        str | None, typer.Option("--begin", help="Start of the time range (see offset reset).")
    ] = None,
    end: Annotated[str | None, typer.Option("--end", help="End of the time range (now).")] = None,
    max_count: Annotated[
        int | None, typer.Option("--max", min=1, help="Messages at most (key: 64, time: 2000).")
    ] = None,
    body_limit: BodyLimitOption = _DEFAULT_BODY_LIMIT_BYTES,
    *,
    command: AdminCommand,
) -> None:
    """Find messages of TOPIC by key (--key) or stored in a time range (--begin [--end])."""
    output = command.output
    now_ms = _now_ms()
    if (key is None) == (begin is None):
        raise typer.BadParameter("give either --key or --begin")
    begin_ms = parse_time_ms(begin, now_ms) if begin is not None else 0
    end_ms = parse_time_ms(end, now_ms) if end is not None else now_ms + 1
    with _Bar(output, "reading queues") as on_progress:

        async def action(admin: AdminClient) -> list[MessageExt]:
            if key is not None:
                limit = max_count or limits.ADMIN_QUERY_BY_KEY_MAX_MESSAGES
                return await admin.query_by_key(
                    topic, key, begin_ms=begin_ms, end_ms=end_ms, max_count=limit
                )
            limit = max_count or limits.ADMIN_QUERY_BY_TIME_MAX_MESSAGES
            return await admin.query_by_time(
                topic, max(1, begin_ms), end_ms, max_count=limit, on_progress=on_progress
            )

        messages = command.run(action)
    what = (
        f"key {key}"
        if key is not None
        else f"{format_time_ms(begin_ms)} .. {format_time_ms(end_ms)}"
    )
    _show(output, messages, f"{len(messages)} message(s) of {topic}, {what}", body_limit)


@app.command("tail")
@admin_options
def tail(
    topic: TopicArgument,
    start: Annotated[
        str, typer.Option("--from", help="latest (new messages only), earliest, or a time.")
    ] = "latest",
    tags: Annotated[str, typer.Option("--tags", help="Tag expression, e.g. 'a || b'.")] = "*",
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="Stop after this many messages.")
    ] = None,
    body_limit: BodyLimitOption = _DEFAULT_BODY_LIMIT_BYTES,
    *,
    command: AdminCommand,
) -> None:
    """Print messages of TOPIC as they arrive (one JSON object per line with --json); stop
    with Ctrl-C or after --count."""
    output = command.output
    start_ms = parse_time_ms(start, _now_ms())

    async def action(admin: AdminClient) -> int:
        seen = 0
        stream = admin.tail(topic, start_ms=start_ms, expression=tags)
        try:
            async for message in stream:
                _print_tailed(output, message, body_limit)
                seen += 1
                if count is not None and seen >= count:
                    break
        finally:
            await stream.aclose()
        return seen

    try:
        command.run(action)
    except typer.Exit as stop:
        if stop.exit_code != 130:  # Ctrl-C is how a tail normally ends
            raise


def _print_tailed(output: Output, message: MessageExt, body_limit: int) -> None:
    if output.json_output:
        output.json_line(message_to_dict(message, body_limit_bytes=body_limit))
        return
    body = message.body[:body_limit].decode("utf-8", "replace")
    output.line(
        f"{format_time_ms(message.store_timestamp_ms)} q{message.queue_id}@{message.queue_offset} "
        f"{message.msg_id} tags={message.tags or '-'} keys={message.keys or '-'} {body}"
    )


@app.command("resend")
@admin_options
def resend(
    group: Annotated[str, typer.Argument(help="Consumer group whose dead letters go back.")],
    msg_id: Annotated[
        list[str] | None, typer.Option("--msg-id", "-i", help="Only this dead letter; repeatable.")
    ] = None,
    begin: Annotated[str | None, typer.Option("--begin", help="Dead letters stored since.")] = None,
    end: Annotated[str | None, typer.Option("--end", help="... and before (default now).")] = None,
    max_count: Annotated[int, typer.Option("--max", min=1)] = limits.ADMIN_RESEND_MAX_MESSAGES,
    *,
    command: AdminCommand,
) -> None:
    """Send dead letters (%DLQ%GROUP) back to GROUP: its consumers get them again with their
    original topic and a fresh retry count. Without --msg-id, every dead letter in the time
    range (default: all)."""
    output = command.output
    now_ms = _now_ms()
    begin_ms = parse_time_ms(begin, now_ms) if begin is not None else 0
    end_ms = parse_time_ms(end, now_ms) if end is not None else None
    with _Bar(output, "resending") as on_progress:

        async def action(admin: AdminClient) -> list[ResendOutcome]:
            return await admin.resend_dead_letters(
                group,
                msg_ids=msg_id or (),
                begin_ms=max(0, begin_ms),
                end_ms=end_ms,
                max_count=max_count,
                on_progress=on_progress,
            )

        outcomes = command.run(action)
    failed = [outcome for outcome in outcomes if outcome.error is not None]
    if output.json_output:
        output.json({"group": group, "resent": [o.to_dict() for o in outcomes]})
    else:
        output.table(
            f"{len(outcomes) - len(failed)} dead letter(s) of {group} resent",
            ("msg id", "original topic", "new msg id", "error"),
            [(o.msg_id, o.original_topic, o.new_msg_id, o.error) for o in outcomes],
        )
    if failed:
        raise typer.Exit(code=1)


@app.command("trace")
@admin_options
def trace(
    msg_id: Annotated[str, typer.Argument(help="Message id (UNIQ_KEY), as producers show it.")],
    trace_topic: Annotated[
        str, typer.Option("--trace-topic", help="Where the trace records are.")
    ] = DEFAULT_TRACE_TOPIC,
    *,
    command: AdminCommand,
) -> None:
    """Show a message's life from its trace records (written by trace-enabled clients or by a
    broker with traceOnBrokerEnable=true): put, deliveries per group, results, retries, dead
    letter. ``--json``: a list of steps, each with ``type`` (Pub, SubBefore, SubAfter,
    EndTransaction, Recall), ``time`` (ms), ``group``, ``client``, ``status``."""
    output = command.output
    found = command.run(lambda admin: message_trace(admin, msg_id, trace_topic))
    for problem in found.undecodable:
        output.note(f"a trace message that does not decode was skipped: {problem}")
    if not found.steps:
        fail(output, f"no trace records of {msg_id} in {trace_topic}", ExitCode.NOT_FOUND)
    if output.json_output:
        output.json([step.to_json_object() for step in found.steps])
    else:
        _show_trace(output, found)


def _show_trace(output: Output, found: MessageTrace) -> None:
    first_ms = found.steps[0].record.timestamp_ms
    rows = []
    for step in found.steps:
        record = step.record
        after_ms = record.timestamp_ms - first_ms if record.timestamp_ms > 0 else None
        rows.append(
            (
                str(record.type),
                format_time_ms(record.timestamp_ms),
                None if after_ms is None else f"+{format_duration_ms(after_ms)}",
                record.group or None,
                step.client or None,
                step.status,
                step.detail,
            )
        )
    output.table(
        f"trace of {found.msg_id} ({found.trace_topic})",
        ("type", "time", "after", "group", "client", "status", "detail"),
        rows,
    )

"""Broker CPU per single-message send, in process: the raw-mode send path without the sockets.

A real broker (ASYNC flush, files in a temporary directory) in this process; SEND_MESSAGE_V2
requests as ``bolide bench produce --mode raw`` builds them (1 KiB body, UNIQ_KEY + WAIT
properties, queues in turn) are encoded up front and fed to a real Connection over an
in-memory transport, ``--pipeline`` frames per ``data_received`` call (a pipelining client's
read). Timed: frame cut, command decode, dispatch, send handler, store put, answer encoding
and the write. Printed: µs of process CPU per send, with the fast path (the default) and
without it (``Dispatcher.fast_handlers_enabled = False``: the general coroutine path).

    .venv/bin/python bench/send_path.py [--messages 100000] [--pipeline 32]
    .venv/bin/python bench/send_path.py --batch 32   # SEND_BATCH_MESSAGE of 32 (CPU per message)
    .venv/bin/python bench/send_path.py --profile   # cProfile of the fast run, top 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

from bolide.base import compiled
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand, encode_command
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import BatchEntry, encode_batch_body, encode_properties
from bolide.remoting import Connection
from bolide.testing.cluster import Cluster
from bolide.testing.memory_transport import MemoryTransport

TOPIC = "bench-send-path"
QUEUES = 8


def _unique_key(index: int) -> str:
    return f"0A0000010000{index:020X}"


def _batch_frames(count: int, body_bytes: int, batch: int) -> list[bytes]:
    """SEND_BATCH_MESSAGE requests of ``batch`` messages, as ``bolide bench produce --mode raw
    --batch-size`` and the Python producer's natural batching send them."""
    body = os.urandom(body_bytes)
    frames = []
    for request_index, first in enumerate(range(0, count, batch)):
        entries = [
            BatchEntry(0, body, encode_properties({PropertyKey.UNIQ_KEY: _unique_key(index)}))
            for index in range(first, min(first + batch, count))
        ]
        fields = dict(_header_fields())
        fields["e"] = str(request_index % QUEUES)
        fields["g"] = str(1_700_000_000_000 + first)
        fields["i"] = encode_properties({PropertyKey.WAIT: "true"})
        fields["m"] = "true"
        request = RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, fields, encode_batch_body(entries)
        )
        request.opaque = request_index
        frames.append(encode_command(request))
    return frames


def _header_fields() -> dict[str, str]:
    header = SendMessageRequestHeader(
        producer_group="bench-producers",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_count=QUEUES,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=0,
        flag=0,
        reconsume_times=0,
    )
    return header.to_v2_ext_fields()


def _frames(count: int, body_bytes: int) -> list[bytes]:
    base = _header_fields()
    body = os.urandom(body_bytes)
    frames = []
    for index in range(count):
        fields = dict(base)
        fields["e"] = str(index % QUEUES)
        fields["g"] = str(1_700_000_000_000 + index)
        fields["i"] = encode_properties(
            {PropertyKey.UNIQ_KEY: _unique_key(index), PropertyKey.WAIT: "true"}
        )
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, body)
        request.opaque = index
        frames.append(encode_command(request))
    return frames


def _run(
    connection: Connection, chunks: list[bytes], profile: cProfile.Profile | None
) -> tuple[float, float]:
    """(process CPU s, this thread's CPU s) of feeding ``chunks``."""
    started, thread_started = time.process_time(), time.thread_time()
    if profile is not None:
        profile.enable()
    for chunk in chunks:
        connection.data_received(chunk)
    if profile is not None:
        profile.disable()
    return time.process_time() - started, time.thread_time() - thread_started


async def _measure(args: argparse.Namespace) -> None:
    if args.batch > 1:
        frames = _batch_frames(args.messages, args.message_bytes, args.batch)
    else:
        frames = _frames(args.messages, args.message_bytes)
    chunks = [
        b"".join(frames[start : start + args.pipeline])
        for start in range(0, len(frames), args.pipeline)
    ]
    with tempfile.TemporaryDirectory() as root:
        async with Cluster(Path(root), settings={"default_topic_queue_nums": QUEUES}) as cluster:
            broker = cluster.brokers[0]
            dispatcher = broker.server.dispatcher
            transport = MemoryTransport(("127.0.0.1", 40000), ("127.0.0.1", broker.port))
            connection = Connection(dispatcher)
            connection.connection_made(transport)
            _run(connection, chunks[:2], None)  # auto-creates the topic, warms up
            for label, fast in (("fast path", True), ("general path", False), ("fast path", True)):
                dispatcher.fast_handlers_enabled = fast
                answered = dispatcher.fast_answer_count
                profile = cProfile.Profile() if args.profile and fast else None
                seconds, loop_seconds = _run(connection, chunks, profile)
                transport.take()
                await asyncio.sleep(0)
                fast_share = (dispatcher.fast_answer_count - answered) / len(frames)
                print(
                    f"{label:13s} {seconds / args.messages * 1e6:6.2f} us CPU/message"
                    f" ({loop_seconds / args.messages * 1e6:6.2f} on the loop thread)"
                    f"  ({args.messages:,} messages in {len(frames):,} requests,"
                    f" {fast_share:.0%} answered by the fast path)"
                )
                if profile is not None:
                    stats = pstats.Stats(profile).sort_stats("tottime")
                    stats.print_stats(25)
                    stats.print_callees("send_message_at_once|_append_one|append|data_received")
                    args.profile = False
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--message-bytes", type=int, default=1024)
    parser.add_argument("--pipeline", type=int, default=32, help="frames per data_received")
    parser.add_argument("--batch", type=int, default=1, help="messages per request (> 1: batch)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"hot path: {compiled.describe()}; load average {os.getloadavg()}")
    asyncio.run(_measure(args))


if __name__ == "__main__":
    main()

"""Broker CPU per message with broker-side trace off and on (traceOnBrokerEnable).

For each mode, ``bolide standalone`` runs as a child process (port 0, a temporary data
directory, a broker.conf with the key) and this process drives a message's whole life over
raw requests: SEND_MESSAGE_V2 pipelined (``--window`` x 2 connections, 1 KiB bodies with
tags, keys and a UNIQ_KEY), PULL_MESSAGE of every queue by one group, one
UPDATE_CONSUMER_OFFSET per queue. Then it waits until the trace topic stops growing (the trace
service writes once a second; with trace off the same wait is taken, so both modes pay the
same idle time). Reported: the broker process's CPU time (from /proc) per message over the
send phase alone and over the whole life (send + pull + commit + the trace written), and the
trace records stored.

With ``--pop`` the group consumes by POP instead (as 4.x POP consumers and the 5.x proxy do):
POP_MESSAGE of every queue (32 a time, from the first message) and one ACK_MESSAGE per
message, so the trace holds a Pub, a SubBefore (the pop) and a SubAfter (the ack) per message.

    .venv/bin/python bench/trace.py [--messages 20000] [--window 64] [--pop]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from bench.broker import (
    QUEUES,
    RAW_TOPIC,
    START_TIMEOUT_S,
    BrokerProcess,
    Options,
    _create_topic,
    _raw_pull,
    _raw_send,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.offsets import QueueRequestHeader, UpdateConsumerOffsetRequestHeader
from bolide.protocol.headers.pop import (
    POP_CK_PROPERTY,
    AckMessageRequestHeader,
    ConsumeInitMode,
    PopMessageRequestHeader,
)
from bolide.protocol.record import decode_records
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop

SETTLED_POLLS = 3
"""The trace topic counts as written once its max offset held for this many polls..."""
POLL_INTERVAL_S = 1.5
"""... this far apart (the trace service writes once a second)."""


class TracedBroker(BrokerProcess):
    """The bench's standalone, with ``-c broker.conf`` holding the trace key."""

    def __init__(self, data_dir: Path, trace: bool) -> None:
        super().__init__(data_dir, "async")
        self._trace = trace

    async def start(self) -> None:
        conf = self._data_dir.parent / "broker.conf"
        conf.write_text(f"traceOnBrokerEnable={'true' if self._trace else 'false'}\n")
        bolide = str(Path(sys.executable).parent / "bolide")
        self._process = await asyncio.create_subprocess_exec(
            bolide, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
            "--no-metrics", "--no-dashboard", "-c", str(conf),
            "--data-dir", str(self._data_dir), "--flush", "async",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert self._process.stdout is not None
        line = await asyncio.wait_for(self._process.stdout.readline(), START_TIMEOUT_S)
        fields = dict(part.split("=", 1) for part in line.decode().split()[2:])
        self.namesrv, self.broker = fields["namesrv"], fields["broker"]


async def _invoke(
    pool: ClientPool, broker: str, code: int, fields: dict[str, str]
) -> RemotingCommand:
    response = await pool.invoke(broker, RemotingCommand.request(code, fields))
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"request {code} failed: {response.code} {response.remark}")
    return response


POP_GROUP = "bench-poppers"
POP_BATCH = 32
POP_INVISIBLE_MS = 600_000
"""Long enough that nothing comes back during the run."""


async def _raw_pop_and_ack(server: BrokerProcess) -> int:
    """POP every queue to its end and ACK each message; the messages acked."""
    pool = ClientPool()
    await pool.connect(server.broker)
    acked = 0

    async def ack(message_topic: str, queue_id: int, offset: int, handle: str) -> None:
        nonlocal acked
        header = AckMessageRequestHeader(POP_GROUP, message_topic, queue_id, handle, offset)
        await _invoke(pool, server.broker, RequestCode.ACK_MESSAGE, header.to_ext_fields())
        acked += 1

    async def drain(queue_id: int) -> None:
        while True:
            header = PopMessageRequestHeader(
                POP_GROUP, RAW_TOPIC, queue_id, POP_BATCH, POP_INVISIBLE_MS, 0,
                int(time.time() * 1000), ConsumeInitMode.MIN,
            )  # fmt: skip
            request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
            response = await pool.invoke(server.broker, request)
            if response.code != ResponseCode.SUCCESS or not response.body:
                return
            await asyncio.gather(
                *(
                    ack(m.topic, m.queue_id, m.queue_offset, m.properties[POP_CK_PROPERTY])
                    for m in decode_records(response.body)
                )
            )

    try:
        await asyncio.gather(*(drain(queue_id) for queue_id in range(QUEUES)))
    finally:
        await pool.close()
    return acked


async def _commit_and_settle(server: BrokerProcess, trace: bool, *, pulled: bool = True) -> int:
    """Commit every queue's end for the pull group (``pulled``); wait for the trace topic to
    hold still. The trace messages stored (0 with trace off)."""
    pool = ClientPool()
    try:
        for queue_id in range(QUEUES if pulled else 0):
            header = QueueRequestHeader(RAW_TOPIC, queue_id).to_ext_fields()
            end = await _invoke(pool, server.broker, RequestCode.GET_MAX_OFFSET, header)
            commit = UpdateConsumerOffsetRequestHeader(
                "bench-pullers", RAW_TOPIC, queue_id, int(end.ext_fields["offset"])
            )
            await _invoke(pool, server.broker, RequestCode.UPDATE_CONSUMER_OFFSET,
                          commit.to_ext_fields())  # fmt: skip
        seen, held = -1, 0
        while held < SETTLED_POLLS:
            await asyncio.sleep(POLL_INTERVAL_S)
            count = 0
            if trace:
                header = QueueRequestHeader(DEFAULT_TRACE_TOPIC, 0).to_ext_fields()
                answer = await _invoke(pool, server.broker, RequestCode.GET_MAX_OFFSET, header)
                count = int(answer.ext_fields["offset"])
            held = held + 1 if count == seen else 0
            seen = count
        return seen
    finally:
        await pool.close()


async def _one_mode(trace: bool, options: Options, *, pop: bool = False) -> str:
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as directory:
        server = TracedBroker(Path(directory) / "data", trace)
        await server.start()
        try:
            pool = ClientPool()
            await _create_topic(pool, server.broker, RAW_TOPIC)
            await pool.close()
            cpu_before = server.cpu_seconds()
            sent = await _raw_send(server, options, count=options.messages,
                                   window=options.window, connections=2)  # fmt: skip
            if pop:
                acked = await _raw_pop_and_ack(server)
                if acked != sent.messages:
                    raise RuntimeError(f"{acked} of {sent.messages} messages popped and acked")
            else:
                await _raw_pull(server)
            trace_messages = await _commit_and_settle(server, trace, pulled=not pop)
            life_cpu = server.cpu_seconds() - cpu_before
        finally:
            await server.stop()
    send_us = sent.server_cpu_seconds / sent.messages * 1e6
    life_us = life_cpu / sent.messages * 1e6
    mode = ("pop " if pop else "") + ("on" if trace else "off")
    return (f"{mode:<8}{sent.messages:>10,}{sent.messages / sent.seconds:>12,.0f}"
            f"{send_us:>16.1f}{life_us:>16.1f}{trace_messages:>16,}")  # fmt: skip


async def run(options: Options, *, pop: bool = False) -> list[str]:
    return [await _one_mode(trace, options, pop=pop) for trace in (False, True)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--pop", action="store_true", help="consume by POP + ACK, not pull")
    arguments = parser.parse_args(argv)
    options = Options(arguments.messages, arguments.window, 2, 1024, 0, 0, "async", True)
    started = time.perf_counter()
    rows = remoting_loop.run(run(options, pop=arguments.pop))
    print(f"{'trace':<8}{'messages':>10}{'sends/s':>12}{'send µs/msg':>16}{'life µs/msg':>16}"
          f"{'trace msgs':>16}")  # fmt: skip
    for row in rows:
        print(row)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

"""An orderly push consumer in its own process, for the membership test (which stops it with
SIGTERM or kills it with SIGKILL).

``python -m tests.integration.orderly_member NAMESRV GROUP TOPIC INSTANCE SEED`` consumes TOPIC
orderly with short lock and rebalance intervals, and prints one line per event on stdout,
flushed at once so that nothing is lost when it is killed (times: ``time.monotonic_ns()``,
one clock for every process of the machine)::

    READY                                     started
    B <ns> <queue id> <offset>:<body>,...     a listener call begins (bodies are KEY:SEQ)
    E <ns> <queue id> <OK|SUSPEND>            it ends with this answer
    STOPPED                                   shut down after SIGTERM (offsets persisted,
                                              queues unlocked, client unregistered)

The listener is a plain function (it runs on the consumer's thread pool) that does a little
CPU work per batch, so calls last long enough for an overlap between two members to show, and
answers SUSPEND_CURRENT_QUEUE_A_MOMENT now and then (seeded), with a 10 ms suspension, so
in-memory retries happen too.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import sys
import threading
import time

from bolide.client.config import ClientConfig, ConsumeFrom
from bolide.client.consumer.consume_orderly import OrderlyContext
from bolide.client.consumer.listener import OrderlyResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.instance import ClientInstance
from bolide.protocol.message import MessageExt

LOCK_RENEW_INTERVAL_MS = 500
CLIENT_LOCK_MAX_LIVE_MS = 2_000
"""Inside the broker's lock lifetime the test configures (3 s)."""
REBALANCE_INTERVAL_MS = 500
PERSIST_INTERVAL_MS = 500
HEARTBEAT_INTERVAL_MS = 1_000
SUSPEND_PROBABILITY = 0.02
SUSPEND_TIME_MS = 10
WORK_BLOCK = bytes(16 * 1024)
WORK_ROUNDS = 8
"""Hashing 8 x 16 KiB per call: a fraction of a millisecond of work."""

_output = threading.Lock()


def say(line: str) -> None:
    with _output:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


async def main(namesrv: str, group: str, topic: str, instance_name: str, seed: str) -> None:
    chance = random.Random(int(seed))
    config = ClientConfig(
        namesrv_addresses=(namesrv,),
        client_ip="127.0.0.1",
        pid=os.getpid(),
        instance_name=instance_name,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        persist_offsets_interval_ms=PERSIST_INTERVAL_MS,
        rebalance_interval_ms=REBALANCE_INTERVAL_MS,
    )

    def listener(messages: list[MessageExt], context: OrderlyContext) -> OrderlyResult:
        items = ",".join(f"{m.queue_offset}:{m.body.decode()}" for m in messages)
        say(f"B {time.monotonic_ns()} {context.queue_id} {items}")
        for _ in range(WORK_ROUNDS):
            hashlib.sha256(WORK_BLOCK).digest()
        result = OrderlyResult.SUCCESS
        with _output:  # calls of different queues run on several threads
            suspend = chance.random() < SUSPEND_PROBABILITY
        if suspend:
            context.suspend_time_ms = SUSPEND_TIME_MS
            result = OrderlyResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        answer = "OK" if result is OrderlyResult.SUCCESS else "SUSPEND"
        say(f"E {time.monotonic_ns()} {context.queue_id} {answer}")
        return result

    consumer = PushConsumer(
        group,
        instance=ClientInstance(config),
        consume_from=ConsumeFrom.FIRST_OFFSET,
        orderly=True,
        options=ConsumerOptions(
            lock_renew_interval_ms=LOCK_RENEW_INTERVAL_MS,
            client_lock_max_live_ms=CLIENT_LOCK_MAX_LIVE_MS,
        ),
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await consumer.start()
    say("READY")
    await stop.wait()
    await consumer.shutdown()
    say("STOPPED")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))

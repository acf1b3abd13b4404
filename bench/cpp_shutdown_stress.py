"""Cycle real C++ push consumers (rocketmq==0.4.4) through start, consume and shutdown against an
in-process Bolide cluster, to show librocketmq 1.2.3's shutdown abort and the guard the test
suite shuts its C++ clients down with (tests/compat/native_shutdown.py).

Each cycle starts a push consumer of one of three groups (so consumers join groups that have
history), sends four messages, starts a second consumer of the group that asks for a retry of
about a third of what it gets, waits for the first message, sends four more after a random
0-4 s, and shuts the two down in random order, a random 0-2 s apart. Both consumers log at INFO
(librocketmq's log under a temporary HOME). Unguarded, the process can abort ("terminate called
after throwing an instance of 'boost::thread_interrupted'", exit status 134); guarded, it must
not.

    BOLIDE_PURE_PYTHON=1 .venv/bin/python -m bench.cpp_shutdown_stress \\
        [--cycles 200] [--unguarded] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.compat.cpp_clients import (
    Inbox,
    Received,
    destroy_push_consumer,
    new_quiet_push_consumer,
)
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer, send_sync
from tests.compat.native_shutdown import routes_withheld, withhold_cpp_routes_while_shutting_down

from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster

TOPIC = "CPP_SHUTDOWN_STRESS"
QUEUES = 4
GROUPS = 3
MESSAGES_PER_SEND = 4
RETRY_SHARE = 0.3
LONGEST_WAIT_BEFORE_SECOND_SENDS_S = 4.0
LONGEST_WAIT_BEFORE_SHUTDOWN_S = 0.5
LONGEST_WAIT_BETWEEN_SHUTDOWNS_S = 2.0
RECEIVE_TIMEOUT_S = 60.0


def asking_for_retries(
    listener: Callable[[Any], None], chance: random.Random
) -> Callable[[Any], None]:
    """``listener``, raising for about :data:`RETRY_SHARE` of the messages (the wrapper answers
    RECONSUME_LATER for a listener that raises)."""

    def on_message(message: Any) -> None:
        listener(message)
        if chance.random() < RETRY_SHARE:
            raise RuntimeError("asked for a retry")

    return on_message


async def start_consumer(
    cluster: Cluster, group: str, name: str, listener: Callable[[str], Callable[[Any], None]]
) -> Any:
    """A started C++ push consumer of ``group`` on :data:`TOPIC`, logging at INFO."""
    from rocketmq import ffi

    consumer = new_quiet_push_consumer(group, cluster.namesrv_address, instance_name=name)
    ffi.dll.SetPushConsumerLogLevel(consumer._handle, int(ffi._CLogLevel.INFO))
    consumer.subscribe(TOPIC, listener(name))
    await asyncio.to_thread(consumer.start)
    return consumer


async def send(producer: Any, cycle: int, batch: str) -> None:
    for index in range(MESSAGES_PER_SEND):
        await send_sync(producer, make_message(TOPIC, f"{cycle}-{batch}{index}"))


def any_of_cycle(cycle: int) -> Callable[[list[Received]], bool]:
    """Whether a message of ``cycle`` was received."""
    prefix = f"{cycle}-"
    return lambda messages: any(message.body.startswith(prefix) for message in messages)


async def run(cycles: int, chance: random.Random, root: Path) -> None:
    async with Cluster(root) as cluster:
        broker = cluster.brokers[0]
        await broker.context.topics.update_topic_config(TopicConfig(TOPIC, QUEUES, QUEUES))
        await broker.registration.register_once()
        producer = new_quiet_producer("PG_CPP_SHUTDOWN_STRESS", cluster.namesrv_address)
        producer.start()
        inbox = Inbox(asyncio.get_running_loop())
        for cycle in range(cycles):
            started_s = time.monotonic()
            group = f"CG_CPP_SHUTDOWN_STRESS_{cycle % GROUPS}"
            plain = await start_consumer(cluster, group, f"plain-{cycle}", inbox.listener)
            await send(producer, cycle, "a")
            retrying = await start_consumer(
                cluster,
                group,
                f"retrying-{cycle}",
                lambda name: asking_for_retries(inbox.listener(name), chance),
            )
            await inbox.wait_for(any_of_cycle(cycle), RECEIVE_TIMEOUT_S)
            await asyncio.sleep(chance.random() * LONGEST_WAIT_BEFORE_SECOND_SENDS_S)
            await send(producer, cycle, "b")
            await asyncio.sleep(chance.random() * LONGEST_WAIT_BEFORE_SHUTDOWN_S)
            first, second = chance.sample([plain, retrying], 2)
            await asyncio.to_thread(destroy_push_consumer, first)
            await asyncio.sleep(chance.random() * LONGEST_WAIT_BETWEEN_SHUTDOWNS_S)
            await asyncio.to_thread(destroy_push_consumer, second)
            print(f"cycle {cycle} ended after {time.monotonic() - started_s:.1f} s", flush=True)
        await asyncio.to_thread(destroy_producer, producer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--unguarded", action="store_true", help="shut down without withholding C++ routes"
    )
    arguments = parser.parse_args()
    print(" ".join([Path(sys.executable).name, *sys.argv]), flush=True)
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        os.environ["HOME"] = directory  # librocketmq logs under $HOME
        if not arguments.unguarded:
            withhold_cpp_routes_while_shutting_down(patch)
        asyncio.run(run(arguments.cycles, random.Random(arguments.seed), Path(directory)))
    print(
        f"{arguments.cycles} cycles ({2 * arguments.cycles} consumer shutdowns), no abort;"
        f" C++ route queries withheld during shutdowns: {routes_withheld()}",
        flush=True,
    )


if __name__ == "__main__":
    main()

"""Cycle real C++ push consumers (rocketmq==0.4.4) through start, consume and shutdown against an
in-process Bolide cluster, to show librocketmq 1.2.3's shutdown abort and the guard the test
suite shuts its C++ clients down with (tests/compat/native_shutdown.py).

Each cycle starts two push consumers of one group (a third of the cycles' groups are reused, so
consumers join groups that have history), sends eight messages, has one consumer ask for a
retry of about a third of what it gets, waits a random 0-4 s, and shuts both down in random
order. Unguarded, the process aborts after a few dozen cycles ("terminate called after throwing
an instance of 'boost::thread_interrupted'", exit status 134); guarded, every cycle ends.

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
from tests.compat.native_shutdown import withhold_cpp_routes_while_shutting_down

from bolide.protocol.bodies import TopicConfig
from bolide.testing.cluster import Cluster

TOPIC = "CPP_SHUTDOWN_STRESS"
QUEUES = 4
GROUPS = 3
MESSAGES_PER_CYCLE = 8
RETRY_SHARE = 0.3
LONGEST_WAIT_BEFORE_SHUTDOWN_S = 4.0
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
            consumers = []
            for role in ("plain", "retrying"):
                name = f"{role}-{cycle}"
                consumer = new_quiet_push_consumer(
                    group, cluster.namesrv_address, instance_name=name
                )
                listener = inbox.listener(name)
                if role == "retrying":
                    listener = asking_for_retries(listener, chance)
                consumer.subscribe(TOPIC, listener)
                await asyncio.to_thread(consumer.start)
                consumers.append(consumer)
            for index in range(MESSAGES_PER_CYCLE):
                await send_sync(producer, make_message(TOPIC, f"{cycle}-{index}"))
            await inbox.wait_for(any_of_cycle(cycle), RECEIVE_TIMEOUT_S)
            await asyncio.sleep(chance.random() * LONGEST_WAIT_BEFORE_SHUTDOWN_S)
            chance.shuffle(consumers)
            for consumer in consumers:
                await asyncio.to_thread(destroy_push_consumer, consumer)
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
    print(f"{arguments.cycles} cycles, no abort", flush=True)


if __name__ == "__main__":
    main()

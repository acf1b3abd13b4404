"""Rebalance with the real broker: a topic with 8 queues, messages flowing all along, and three
push consumers of one group joining and leaving — two in this process (graceful join and
leave), one in a subprocess that joins and is then killed with SIGKILL (its connections drop
without an unregister).

After each change the test waits until the group's assignment settles: every queue held by
exactly one live member, every live member holding some. It prints how long that took after
the trigger (not asserted: timing is measured, never tested) and, at the end, how many
messages were delivered more than once. It asserts that every message sent was consumed at
least once.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt
from bolide.testing.cluster import Cluster
from tests.integration.client_support import WAIT_S, create_topic

TOPIC = "rebalanced"
GROUP = "g-rebalance"
QUEUE_COUNT = 8
IN_FLIGHT_MAX = 64
"""Messages sent but not yet consumed: the producer waits below it, so messages keep
flowing through every change without piling up."""
REPOSITORY = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)


class Group:
    """What the test knows of the group: deliveries, and each member's held queues."""

    def __init__(self) -> None:
        self.deliveries: Counter[str] = Counter()
        self.held: dict[str, frozenset[int]] = {}
        self.changed = asyncio.Event()
        self.starting: dict[str, float] = {}
        """When a subprocess member said it starts (``time.monotonic()``)."""

    def consumed(self, key: str) -> None:
        self.deliveries[key] += 1
        self.changed.set()

    def holds(self, member: str, queue_ids: frozenset[int]) -> None:
        self.held[member] = queue_ids
        self.changed.set()

    def settled(self, members: set[str]) -> bool:
        """Every queue held by exactly one of ``members``; each of them holds some."""
        owners = Counter(q for member in members for q in self.held.get(member, frozenset()))
        return (
            set(owners) == set(range(QUEUE_COUNT))
            and all(count == 1 for count in owners.values())
            and all(self.held.get(member) for member in members)
        )

    async def wait_for(self, predicate: Callable[[], bool], started: float | None = None) -> float:
        """Wait on events until ``predicate()`` holds; returns the seconds since ``started``
        (a ``time.monotonic()`` reading; default: now)."""
        started = time.monotonic() if started is None else started
        async with asyncio.timeout(WAIT_S):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()
        return time.monotonic() - started


class Member(PushConsumer):
    """An in-process member that reports its held queues to the :class:`Group`."""

    def __init__(self, name: str, namesrv: str, group: Group) -> None:
        super().__init__(
            GROUP, namesrv=namesrv, instance_name=name, consume_from=ConsumeFrom.FIRST_OFFSET
        )
        self.name = name
        self.group_view = group
        self.subscribe(TOPIC)
        self.register_listener(self._listen)

    async def _listen(self, messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            self.group_view.consumed(message.keys or "")
        return ConsumeResult.SUCCESS

    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        super().on_assignment_changed(topic, assigned)
        if topic == TOPIC:
            held = frozenset(
                queue.queue_id for queue in self.process_queues if queue.topic == TOPIC
            )
            self.group_view.holds(self.name, held)


async def produce(producer: Producer, group: Group, stop: asyncio.Event, sent: list[str]) -> None:
    """Send until ``stop``, keeping at most IN_FLIGHT_MAX messages unconsumed."""
    while not stop.is_set():
        if len(sent) - len(group.deliveries) >= IN_FLIGHT_MAX:
            group.changed.clear()
            await group.changed.wait()
            continue
        key = f"m{len(sent)}"
        await producer.send(Message(TOPIC, key.encode(), keys=key))
        sent.append(key)


async def read_process(stream: asyncio.StreamReader, group: Group, name: str) -> None:
    while line := await stream.readline():
        kind, _, rest = line.decode().strip().partition(" ")
        if kind == "MSG":
            group.consumed(rest)
        elif kind == "OWN":
            group.holds(name, frozenset(int(q) for q in rest.split(",") if q))
        elif kind == "STARTING":
            group.starting[name] = time.monotonic()
            group.changed.set()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path / "cluster") as running:
        await create_topic(running, TOPIC, QUEUE_COUNT)
        yield running


async def test_members_join_leave_and_die_without_losing_messages(cluster: Cluster) -> None:
    group, stop = Group(), asyncio.Event()
    sent: list[str] = []
    timings: list[str] = []
    namesrv = cluster.namesrv_address
    member_a, member_b = Member("a", namesrv, group), Member("b", namesrv, group)
    process: asyncio.subprocess.Process | None = None
    async with Producer("rebalance-producers", namesrv=namesrv) as producer:
        producing = asyncio.create_task(produce(producer, group, stop, sent))
        try:
            await member_a.start()
            await group.wait_for(lambda: group.settled({"a"}))

            started = time.monotonic()
            await member_b.start()  # graceful join
            elapsed = await group.wait_for(lambda: group.settled({"a", "b"}), started)
            timings.append(f"join b: {elapsed:.3f} s")

            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.client_consumer_process",
                namesrv,
                GROUP,
                TOPIC,
                "c",
                cwd=REPOSITORY,
                stdout=asyncio.subprocess.PIPE,
            )
            assert process.stdout is not None
            reader = asyncio.create_task(read_process(process.stdout, group, "c"))
            await group.wait_for(lambda: "c" in group.starting)
            elapsed = await group.wait_for(
                lambda: group.settled({"a", "b", "c"}), group.starting["c"]
            )
            timings.append(f"join c (another process): {elapsed:.3f} s")
            assert sorted(len(group.held[m]) for m in "abc") == [2, 3, 3]

            started = time.monotonic()
            process.send_signal(signal.SIGKILL)  # no unregister: the broker sees the drop
            await process.wait()
            await reader
            group.held.pop("c")
            elapsed = await group.wait_for(lambda: group.settled({"a", "b"}), started)
            timings.append(f"kill c: {elapsed:.3f} s")

            started = time.monotonic()
            await member_b.shutdown()  # graceful leave
            group.held.pop("b")
            elapsed = await group.wait_for(lambda: group.settled({"a"}), started)
            timings.append(f"leave b: {elapsed:.3f} s")
        finally:
            stop.set()
            await producing
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
        await group.wait_for(lambda: set(sent) <= set(group.deliveries))
        await member_a.shutdown()
        await member_b.shutdown()
    duplicates = sum(count - 1 for count in group.deliveries.values())
    print(
        f"\nrebalance: {len(sent)} messages sent, {len(group.deliveries)} consumed,"
        f" {duplicates} duplicate deliveries; " + "; ".join(timings)
    )
    assert set(sent) <= set(group.deliveries)  # none lost
    assert set(group.deliveries) <= set(sent)

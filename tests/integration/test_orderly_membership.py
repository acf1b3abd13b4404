"""Orderly consumption through membership changes (issue 7, RocketMQ's orderly consumption).

A topic with 4 queues; 200 sharding keys, each with the sequence 0..N sent in order with
``send(..., sharding_key=key)`` while messages keep flowing. Three slots of orderly push
consumers, each member a subprocess (``tests.integration.orderly_member``), join, leave
(SIGTERM: graceful shutdown) and are killed (SIGKILL: no unlock, no unregister; the broker's
lock on its queues must expire) — at least 20 membership changes, chosen by a seeded random
generator, each made while the group is consuming. The broker's lock lifetime is 3 s, the
members' own lease 2 s, renewed every 0.5 s.

Every listener call is recorded by its member (start and end, ``time.monotonic_ns()``; a
killed member's unfinished call ends when the kill is confirmed). The test checks:

* nothing is lost: every (key, seq) was delivered;
* per key, the sequence seen — in delivery order, re-deliveries removed — is exactly
  0, 1, ..., N: strictly increasing, no gap;
* a member re-delivers a message only after answering SUSPEND for it; other re-deliveries
  come from a new owner restarting at the broker's committed offset (counted and printed);
* per queue, the listener calls of different members never overlap in time;
* per queue and member, offsets advance one by one (a retry repeats, nothing is skipped), and
  a new owner starts at or before the offset after the previous owner's last one.

Timing is printed, never asserted. Bounded by the waits (each at most WAIT_S).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import signal
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.testing.cluster import Cluster
from tests.integration.client_support import create_topic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

TOPIC = "orderly-membership"
GROUP = "g-orderly-membership"
QUEUE_COUNT = 4
KEY_COUNT = 200
SEQUENCE_LENGTH = 30
"""Each key's sequence is 0 .. SEQUENCE_LENGTH - 1."""
TOTAL = KEY_COUNT * SEQUENCE_LENGTH
CHANGES = 22
SEED = 7_2026
SLOTS = 3
BROKER_LOCK_MAX_LIVE_MS = 3_000
IN_FLIGHT_MAX = 600
"""Messages sent but not yet delivered: the producer waits above it, so messages keep
flowing through every change without piling up."""
PROGRESS_PER_CHANGE = 120
"""New deliveries awaited between two changes (a killed member's queues wait for its lock to
expire, so that wait is seconds long)."""
WAIT_S = 60.0
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class Call:
    """One listener call of one member."""

    member: str
    queue_id: int
    start_ns: int
    items: list[tuple[int, str, int]]
    """(queue offset, key, seq) of each message of the batch, in order."""
    end_ns: int | None = None
    answer: str = ""


@dataclass
class Member:
    name: str
    process: asyncio.subprocess.Process
    reader: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    open_calls: dict[int, Call] = field(default_factory=dict)


class Observer:
    """Everything the members reported."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.delivered: set[tuple[str, int]] = set()
        self.changed = asyncio.Event()

    def line(self, member: Member, text: str) -> None:
        kind, _, rest = text.partition(" ")
        if kind == "B":
            at, queue_id, items = rest.split(" ", 2)
            parsed = []
            for item in items.split(","):
                offset, body = item.split(":", 1)
                key, seq = body.split(":")
                parsed.append((int(offset), key, int(seq)))
                self.delivered.add((key, int(seq)))
            call = Call(member.name, int(queue_id), int(at), parsed)
            member.open_calls[call.queue_id] = call
            self.calls.append(call)
        elif kind == "E":
            at, queue_id, answer = rest.split(" ")
            call = member.open_calls.pop(int(queue_id))
            call.end_ns, call.answer = int(at), answer
        elif kind == "READY":
            member.ready.set()
        self.changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


async def read_member(member: Member, observer: Observer) -> None:
    stream = member.process.stdout
    assert stream is not None
    while line := await stream.readline():
        observer.line(member, line.decode().strip())


class Membership:
    """Starts, stops and kills members; records the changes."""

    def __init__(self, namesrv: str, observer: Observer, logs: Path) -> None:
        self.namesrv = namesrv
        self.observer = observer
        self.logs = logs
        self.alive: dict[int, Member] = {}
        self.generation = 0
        self.changes: list[str] = []

    async def join(self, slot: int) -> None:
        self.generation += 1
        name = f"m{slot}-{self.generation}"
        with (self.logs / f"{name}.log").open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.integration.orderly_member",
                self.namesrv,
                GROUP,
                TOPIC,
                name,
                str(SEED + self.generation),
                cwd=REPOSITORY,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        member = Member(name, process)
        member.reader = asyncio.create_task(read_member(member, self.observer))
        self.alive[slot] = member
        async with asyncio.timeout(WAIT_S):
            await member.ready.wait()
        self.changes.append(f"join {name}")

    async def leave(self, slot: int) -> None:
        member = self.alive.pop(slot)
        member.process.send_signal(signal.SIGTERM)
        await self._finish(member)
        self.changes.append(f"leave {member.name}")

    async def kill(self, slot: int) -> None:
        member = self.alive.pop(slot)
        member.process.send_signal(signal.SIGKILL)
        await self._finish(member)
        dead_ns = time.monotonic_ns()
        for call in member.open_calls.values():  # cut short by the kill
            call.end_ns, call.answer = dead_ns, "KILLED"
        member.open_calls.clear()
        self.changes.append(f"kill {member.name}")

    async def _finish(self, member: Member) -> None:
        async with asyncio.timeout(WAIT_S):
            await member.process.wait()
            if member.reader is not None:
                await member.reader

    async def stop_all(self) -> None:
        for slot in list(self.alive):
            await self.leave(slot)


async def produce(producer: Producer, observer: Observer, sent: list[tuple[str, int]]) -> None:
    """Each key's sequence in order (seq s after seq s-1 is stored), all keys side by side."""
    keys = [f"k{index:03d}" for index in range(KEY_COUNT)]
    for seq in range(SEQUENCE_LENGTH):
        await observer.wait_for(lambda: len(sent) - len(observer.delivered) < IN_FLIGHT_MAX)
        await asyncio.gather(
            *(
                producer.send(Message(TOPIC, f"{key}:{seq}".encode(), keys=key), sharding_key=key)
                for key in keys
            )
        )
        sent.extend((key, seq) for key in keys)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    settings = {"rebalance_lock_max_live_ms": BROKER_LOCK_MAX_LIVE_MS}
    async with Cluster(tmp_path / "cluster", settings=settings) as running:
        await create_topic(running, TOPIC, QUEUE_COUNT)
        yield running


async def test_order_holds_through_joins_leaves_and_kills(cluster: Cluster, tmp_path: Path) -> None:
    observer, sent = Observer(), list[tuple[str, int]]()
    membership = Membership(cluster.namesrv_address, observer, tmp_path)
    choose = random.Random(SEED)
    started = time.monotonic()
    async with Producer("orderly-membership-producers", namesrv=cluster.namesrv_address) as p:
        producing = asyncio.create_task(produce(p, observer, sent))
        try:
            await membership.join(0)
            while len(membership.changes) < CHANGES:
                await observer.wait_for(progressed(observer, PROGRESS_PER_CHANGE))
                await change(membership, choose)
            await producing
            if not membership.alive:
                await membership.join(0)
            await observer.wait_for(lambda: set(sent) <= observer.delivered)
        finally:
            producing.cancel()
            await membership.stop_all()
    elapsed = time.monotonic() - started
    redeliveries = check(observer, sent)
    kinds = [change.split()[0] for change in membership.changes]
    print(
        f"\norderly membership: {len(sent)} messages, {len(observer.calls)} listener calls,"
        f" {redeliveries} re-deliveries by a new owner, {len(membership.changes)} changes"
        f" ({kinds.count('join')} joins, {kinds.count('leave')} leaves,"
        f" {kinds.count('kill')} kills) in {elapsed:.1f} s"
    )
    assert len(membership.changes) >= 20
    assert {"join", "leave", "kill"} <= set(kinds)


def progressed(observer: Observer, count: int) -> Callable[[], bool]:
    """A predicate: ``count`` more messages delivered than now (or all of them)."""
    target = min(len(observer.delivered) + count, TOTAL)
    return lambda: len(observer.delivered) >= target


async def change(membership: Membership, choose: random.Random) -> None:
    """One seeded membership change; at least one member stays."""
    free = [slot for slot in range(SLOTS) if slot not in membership.alive]
    alive = sorted(membership.alive)
    options = []
    if free:
        options.append("join")
    if len(alive) > 1:
        options += ["leave", "kill"]
    action = choose.choice(options)
    if action == "join":
        await membership.join(choose.choice(free))
    elif action == "leave":
        await membership.leave(choose.choice(alive))
    else:
        await membership.kill(choose.choice(alive))


def check(observer: Observer, sent: list[tuple[str, int]]) -> int:
    """The assertions of the module docstring; returns the count of re-deliveries by a new
    owner."""
    calls = sorted(observer.calls, key=lambda call: call.start_ns)
    assert all(call.end_ns is not None for call in calls), "a call never ended"
    assert set(sent) <= observer.delivered, "messages lost"
    # Per key: first deliveries in time order are exactly 0..N.
    first_seen: dict[str, list[int]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for call in calls:
        for _, key, seq in call.items:
            if (key, seq) not in seen:
                seen.add((key, seq))
                first_seen[key].append(seq)
    for key, sequence in first_seen.items():
        assert sequence == list(range(SEQUENCE_LENGTH)), f"{key} seen out of order: {sequence}"
    return check_queues(calls)


def check_queues(calls: list[Call]) -> int:
    """Per queue: calls one at a time, contiguous offsets, a member resumes where it stopped
    (a retry repeats the batch), a new owner resumes at or before that point. Returns how
    many messages new owners delivered again."""
    redeliveries = 0
    by_queue: dict[int, list[Call]] = defaultdict(list)
    for call in calls:
        offsets = [offset for offset, _, _ in call.items]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), call
        by_queue[call.queue_id].append(call)
    for queue_id, queue_calls in by_queue.items():
        for previous, call in itertools.pairwise(queue_calls):
            assert previous.end_ns is not None and previous.end_ns <= call.start_ns, (
                f"queue {queue_id}: {call} started while {previous} ran"
            )
            first = call.items[0][0]
            resume = previous.items[-1][0] + 1 if previous.answer == "OK" else previous.items[0][0]
            if call.member == previous.member:
                assert first == resume, f"queue {queue_id}: {previous} then {call}"
            else:
                assert first <= resume, f"queue {queue_id}: gap between {previous} and {call}"
                redeliveries += resume - first
    return redeliveries

"""``bolide bench --mode raw``: the workloads' senders and receivers built straight on the
request layer (:mod:`bolide.client.rpc`: ``send_prepared_v2``, ``pull_raw``), so that the
client spends as little CPU per message as the protocol allows and the figure is closer to
what the broker alone can do.

* A raw sender keeps the SEND_MESSAGE_V2 header fields of its topic ready and changes only the
  queue id, the born timestamp and the properties (a fresh UNIQ_KEY, WAIT=true) per send —
  what a Java producer puts on the wire, without the client's checks and queue selection.
  Queues are taken round robin. ``batch_size`` > 1 sends SEND_BATCH_MESSAGE.
* A raw receiver reads its share of the queues (queue ``i`` goes to receiver
  ``i % consumers``) with one long-polled PULL_MESSAGE in flight per queue, as RocketMQ's push
  consumer does; the offset reached so far rides on the next pull (the commit-offset flag), and
  :meth:`commit` stores the final offsets with UPDATE_CONSUMER_OFFSET. Pulled records are walked
  with their header checks (:func:`read_record_header`) and their bodies handed on as views —
  no MessageExt objects, no properties parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import Sequence

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.bench.runtime import BenchSettings
from bolide.bench.workloads import PRODUCER_GROUP, BodiesCallback, Receiver, Sender
from bolide.client import rpc
from bolide.client.rpc.pull import PullStatus, pull_raw
from bolide.client.rpc.send import send_prepared_v2
from bolide.protocol.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import (
    BatchEntry,
    encode_batch_body,
    encode_properties,
    read_record_header,
)
from bolide.protocol.system_topics import AUTO_CREATE_TOPIC_KEY_TOPIC
from bolide.remoting import ClientPool

__all__ = ["QueueTarget", "RawClients"]

_log = logging.getLogger("bolide.cli.bench")

QueueTarget = tuple[str, int]
"""(broker address, queue id): one queue of the run's topic."""
_PULL_ERROR_PAUSE_S = 0.1
"""After a failed pull, the pause before the next (a broker restarting, a busy broker)."""
_PULL_TIMEOUT_MS = limits.BENCH_RAW_PULL_SUSPEND_MS + limits.REQUEST_TIMEOUT_DEFAULT_MS


class _RawSender:
    def __init__(self, topic: str, targets: Sequence[QueueTarget], index: int) -> None:
        self._pool = ClientPool()
        self._targets = itertools.cycle(targets)
        self._addresses = sorted({address for address, _ in targets})
        self._key_prefix = f"{os.getpid():08X}{index:04X}{time.time_ns() & 0xFFFFFFFF:08X}"
        self._key_counter = itertools.count()
        header = SendMessageRequestHeader(
            producer_group=PRODUCER_GROUP,
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_count=limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT,
            queue_id=0,
            sys_flag=0,
            born_timestamp_ms=0,
            flag=0,
            reconsume_times=0,
        )
        self._fields = header.to_v2_ext_fields()
        self._batch_properties = encode_properties({PropertyKey.WAIT: "true"})

    def _properties(self) -> str:
        key = f"{self._key_prefix}{next(self._key_counter):08X}"
        return encode_properties({PropertyKey.UNIQ_KEY: key, PropertyKey.WAIT: "true"})

    async def prepare(self) -> None:
        for address in self._addresses:
            await self._pool.connect(address)

    async def send(self, bodies: list[bytes]) -> None:
        address, queue_id = next(self._targets)
        fields = dict(self._fields)
        fields["e"] = str(queue_id)  # v2 keys: e queueId, g bornTimestamp, i properties, m batch
        fields["g"] = str(time.time_ns() // 1_000_000)
        if len(bodies) == 1:
            fields["i"] = self._properties()
            body = bodies[0]
        else:
            entries = [BatchEntry(0, b, self._properties()) for b in bodies]
            fields["i"], fields["m"] = self._batch_properties, "true"
            body = encode_batch_body(entries)
        timeout_ms = limits.PRODUCER_SEND_TIMEOUT_MS
        await send_prepared_v2(self._pool, address, fields, body, timeout_ms, batch=len(bodies) > 1)

    async def close(self) -> None:
        await self._pool.close()


class _RawReceiver:
    def __init__(
        self,
        topic: str,
        group: str,
        targets: Sequence[QueueTarget],
        pull_batch: int,
        on_bodies: BodiesCallback,
    ) -> None:
        self._pool = ClientPool()
        self._topic = topic
        self._group = group
        self._targets = list(targets)
        self._pull_batch = pull_batch
        self._on_bodies = on_bodies
        self._offsets: dict[QueueTarget, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for target in self._targets:
            address, queue_id = target
            self._offsets[target] = await rpc.get_min_offset(
                self._pool, address, self._topic, queue_id, limits.REQUEST_TIMEOUT_DEFAULT_MS
            )
            self._tasks.append(loop.create_task(self._pull_loop(target)))

    def owned_queue_count(self) -> int:
        return len(self._tasks)

    def _header(self, queue_id: int, offset: int) -> PullMessageRequestHeader:
        flags = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
        if offset > 0:
            flags |= PullSysFlag.COMMIT_OFFSET
        return PullMessageRequestHeader(
            self._group, self._topic, queue_id, offset, self._pull_batch, int(flags),
            offset, limits.BENCH_RAW_PULL_SUSPEND_MS, 0, "*",
        )  # fmt: skip

    async def _pull_loop(self, target: QueueTarget) -> None:
        address, queue_id = target
        while True:
            offset = self._offsets[target]
            try:
                pulled = await pull_raw(
                    self._pool, address, self._header(queue_id, offset), _PULL_TIMEOUT_MS
                )
            except BolideError as error:
                _log.warning("pull of %s queue %d failed: %s", address, queue_id, error)
                await asyncio.sleep(_PULL_ERROR_PAUSE_S)
                continue
            if pulled.status is PullStatus.FOUND and pulled.body:
                self._on_bodies(_bodies(pulled.body), time.monotonic_ns())
            self._offsets[target] = pulled.next_begin_offset

    async def commit(self) -> None:
        for (address, queue_id), offset in self._offsets.items():
            await rpc.update_consumer_offset(
                self._pool, address, self._group, self._topic, queue_id, offset,
                limits.REQUEST_TIMEOUT_DEFAULT_MS,
            )  # fmt: skip

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, BolideError):
                await task
        await self._pool.close()


def _bodies(pulled: bytes) -> list[memoryview]:
    """The bodies of the records of a pull body, as views (each record's lengths checked).

    Raises:
        ProtocolError: a malformed record.
    """
    view = memoryview(pulled)
    bodies: list[memoryview] = []
    position = 0
    while position < len(view):
        header = read_record_header(view, position)
        bodies.append(view[header.body_offset : header.body_offset + header.body_length])
        position = header.end
    return bodies


class RawClients:
    """Raw senders and receivers over the queues ``targets`` of the run's topic."""

    def __init__(self, targets: Sequence[QueueTarget], settings: BenchSettings) -> None:
        self._targets = list(targets)
        self._settings = settings

    async def open_sender(self, topic: str, index: int) -> Sender:
        # Producers start at different queues, so that they do not all hit queue 0 first.
        shift = index % len(self._targets)
        return _RawSender(topic, self._targets[shift:] + self._targets[:shift], index)

    async def open_receiver(
        self, topic: str, group: str, index: int, on_bodies: BodiesCallback
    ) -> Receiver:
        consumers = self._settings.consumers
        owned = [t for position, t in enumerate(self._targets) if position % consumers == index]
        return _RawReceiver(topic, group, owned, self._settings.pull_batch, on_bodies)

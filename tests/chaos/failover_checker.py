"""The failover chaos harness's checker and seeded fault schedules.

Producers record every acknowledged send (:meth:`Checker.ack`); after the faults heal the
harness reads every queue back (:class:`Stored`) and :meth:`Checker.verify` checks:

* every acknowledged message is present exactly once, at one queue offset (the one its
  acknowledgement named, when it named one);
* per queue, each producer's acknowledged messages keep their send order;
* no two brokers accepted writes for one brokerName in one epoch (controller mode: acks
  carry the broker's address and master epoch; static master/slave: epoch 0, one master).

It also collects, for the report, elections (controller mode) and the unavailability of each
failover: from the fault to the first acknowledged send after it.

Bodies are ``<producer>:<sequence>:<padding>`` so that a stored record names its sender.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass, field

FAULT_KINDS = ("none", "drop", "blackhole", "pause_link", "partition_ha", "sigstop", "sigkill")
"""What a schedule step may do to the master: nothing, reset its clients' link, partition it
from its clients (silent), stall that link, partition it from its slave, SIGSTOP it (resumed
with SIGCONT), or SIGKILL it (restarted)."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One step of a schedule: ``kind`` held for ``hold_sends`` send rounds, after
    ``before_sends`` rounds without a fault."""

    kind: str
    before_sends: int
    hold_sends: int


def schedules(seed: int, count: int, weights: dict[str, int] | None = None) -> list[Fault]:
    """``count`` seeded faults; ``weights`` per kind (default: SIGKILL rare, the rest even)."""
    weights = weights or {
        "none": 2,
        "drop": 3,
        "blackhole": 2,
        "pause_link": 2,
        "partition_ha": 2,
        "sigstop": 2,
    }
    weights.setdefault("sigkill", 1)
    kinds = [kind for kind in FAULT_KINDS if weights.get(kind, 0) > 0]
    rng = random.Random(seed)
    return [
        Fault(
            rng.choices(kinds, [weights[k] for k in kinds])[0],
            before_sends=rng.randint(1, 3),
            hold_sends=rng.randint(1, 2),
        )
        for _ in range(count)
    ]


def body_for(producer: str, sequence: int, padding_bytes: int = 32) -> bytes:
    return f"{producer}:{sequence}:".encode() + b"x" * padding_bytes


def parse_body(body: bytes) -> tuple[str, int] | None:
    parts = body.split(b":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0].decode(), int(parts[1])


@dataclass(frozen=True, slots=True)
class Ack:
    producer: str
    sequence: int
    queue_id: int
    queue_offset: int | None
    broker_name: str
    broker_address: str
    epoch: int
    acked_at: float


@dataclass(frozen=True, slots=True)
class Stored:
    queue_id: int
    queue_offset: int
    body: bytes


@dataclass(slots=True)
class Report:
    acknowledged: int = 0
    read_back: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    split_brain: list[str] = field(default_factory=list)
    elections: int = 0
    failovers: int = 0
    unavailability_ms: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.misplaced or self.out_of_order or self.split_brain
        )

    def percentile_ms(self, fraction: float) -> float:
        values = sorted(self.unavailability_ms)
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(fraction * len(values)))]

    def summary(self) -> str:
        worst = max(self.unavailability_ms, default=0.0)
        return (
            f"acknowledged={self.acknowledged} read_back={self.read_back} "
            f"lost={len(self.lost)} duplicated={len(self.duplicated)} "
            f"misplaced={len(self.misplaced)} out_of_order={len(self.out_of_order)} "
            f"split_brain={len(self.split_brain)} elections={self.elections} "
            f"failovers={self.failovers} unavailability_ms p50={self.percentile_ms(0.5):.0f} "
            f"p99={self.percentile_ms(0.99):.0f} max={worst:.0f}"
        )


class Checker:
    """Collects acknowledgements and faults; :meth:`verify` judges what was read back."""

    def __init__(self) -> None:
        self.acks: dict[tuple[str, int], Ack] = {}
        self.elections = 0
        self._fault_started: float | None = None
        self.unavailability_ms: list[float] = []

    def ack(self, ack: Ack) -> None:
        self.acks[(ack.producer, ack.sequence)] = ack
        if self._fault_started is not None:
            self.unavailability_ms.append((ack.acked_at - self._fault_started) * 1000)
            self._fault_started = None

    def fault_started(self) -> None:
        """A fault that stops writes began (the next ack ends this failover's outage)."""
        if self._fault_started is None:
            self._fault_started = time.monotonic()

    def election(self) -> None:
        self.elections += 1

    def verify(self, stored: list[Stored]) -> Report:
        report = Report(
            acknowledged=len(self.acks),
            elections=self.elections,
            failovers=len(self.unavailability_ms),
            unavailability_ms=list(self.unavailability_ms),
        )
        where: dict[tuple[str, int], list[Stored]] = defaultdict(list)
        for record in stored:
            key = parse_body(record.body)
            if key is not None:
                where[key].append(record)
        for key, ack in sorted(self.acks.items()):
            found = where.get(key, [])
            name = f"{key[0]}:{key[1]}"
            if not found:
                report.lost.append(name)
                continue
            report.read_back += 1
            if len(found) > 1:
                report.duplicated.append(name)
            places = {(r.queue_id, r.queue_offset) for r in found}
            if ack.queue_offset is not None and (ack.queue_id, ack.queue_offset) not in places:
                report.misplaced.append(f"{name} acked at {ack.queue_id}/{ack.queue_offset}")
        report.out_of_order = self._order_violations(where)
        report.split_brain = self._split_brain()
        return report

    def _order_violations(self, where: dict[tuple[str, int], list[Stored]]) -> list[str]:
        by_lane: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for producer, sequence in self.acks:
            for record in where.get((producer, sequence), [])[:1]:
                by_lane[(producer, record.queue_id)].append((sequence, record.queue_offset))
        violations = []
        for (producer, queue_id), pairs in by_lane.items():
            offsets = [offset for _, offset in sorted(pairs)]
            if offsets != sorted(offsets):
                violations.append(f"{producer} on queue {queue_id}")
        return violations

    def _split_brain(self) -> list[str]:
        writers: dict[tuple[str, int], set[str]] = defaultdict(set)
        for ack in self.acks.values():
            writers[(ack.broker_name, ack.epoch)].add(ack.broker_address)
        return [
            f"{name} epoch {epoch}: {sorted(addresses)}"
            for (name, epoch), addresses in sorted(writers.items())
            if len(addresses) > 1
        ]

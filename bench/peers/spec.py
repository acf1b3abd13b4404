"""What every system is asked to do: the three workloads, their parameters and the message body.

The same :class:`WorkloadSpec` drives Bolide (through ``bolide bench``, see README.md beside this
file) and every peer, so a ratio in the comparison table compares like with like.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bolide.bench.runtime import STAMP_BYTES

# The first STAMP_BYTES of every body are the publisher's CLOCK_MONOTONIC reading (int64 ns,
# little-endian); Bolide's bench defines the stamp (StampedBodies, read_stamp_ns), so both
# sides of a comparison stamp alike.
MESSAGE_BYTES_MIN = STAMP_BYTES
"""A body must hold the stamp."""
MESSAGE_BYTES_MAX = 1024 * 1024
"""1 MiB: the smallest maximum message size among the peers (NATS max_payload default)."""


class Workload(enum.StrEnum):
    """The three workloads of issue 10."""

    PRODUCE = "produce"
    """N messages of S bytes from P producers, F unacknowledged sends each; msgs/s and the
    send-to-ack latency."""
    CONSUME = "consume"
    """A backlog of N messages, stored first and not timed, read by C consumers that acknowledge
    every message; msgs/s."""
    E2E = "e2e"
    """Publishes at a fixed rate while C consumers read; publish-to-receive latency."""


class FlushMode(enum.StrEnum):
    """Bolide's two flush modes; each peer maps them to its nearest setting (README.md)."""

    ASYNC = "async"
    """Acknowledged once in the OS page cache (or the peer's nearest weaker setting)."""
    SYNC = "sync"
    """Acknowledged only after fsync (group commit where the peer does it)."""


@dataclass(frozen=True)
class WorkloadSpec:
    """Parameters shared by the three workloads; every system gets the same ones.

    The defaults are FULL's, except ``max_seconds``.

    Attributes:
        message_bytes: body size in bytes, 8 .. 1 MiB (the first 8 bytes are the stamp).
        message_count: messages sent by ``produce`` and the backlog size of ``consume``.
        producers: producer connections, each with its own client.
        in_flight: unacknowledged sends per producer (a sliding window, not a batch).
        consumers: consumer connections in one group (``consume`` and ``e2e``).
        pull_batch: most messages one fetch returns (RocketMQ's pullBatchSize is 32; the peers'
            equivalents: XREADGROUP COUNT, JetStream fetch batch, AMQP prefetch).
        rate_per_s: ``e2e`` publish rate, messages per second, all producers together.
        e2e_seconds: how long ``e2e`` publishes.
        max_seconds: bound of one timed phase of ``produce`` or ``consume`` (and of the
            untimed backlog load); a phase cut short reports ``complete: false``.
    """

    message_bytes: int = 1024
    message_count: int = 200_000
    producers: int = 4
    in_flight: int = 32
    consumers: int = 1
    pull_batch: int = 32
    rate_per_s: int = 2_000
    e2e_seconds: float = 10.0
    max_seconds: float = 20.0

    def __post_init__(self) -> None:
        if not MESSAGE_BYTES_MIN <= self.message_bytes <= MESSAGE_BYTES_MAX:
            raise ValueError(
                f"message_bytes {self.message_bytes} outside"
                f" {MESSAGE_BYTES_MIN}..{MESSAGE_BYTES_MAX}"
            )
        positive = {
            "message_count": self.message_count,
            "producers": self.producers,
            "in_flight": self.in_flight,
            "consumers": self.consumers,
            "pull_batch": self.pull_batch,
            "rate_per_s": self.rate_per_s,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.e2e_seconds <= 0 or self.max_seconds <= 0:
            raise ValueError("e2e_seconds and max_seconds must be positive")


FULL = WorkloadSpec(max_seconds=15.0)
"""The default run of compare.sh: under 10 minutes for Bolide and the three peers, both flush
modes."""
QUICK = WorkloadSpec(message_count=20_000, e2e_seconds=3.0, max_seconds=4.0)
"""compare.sh --quick: under 3 minutes."""


def bolide_arguments(spec: WorkloadSpec, flush: FlushMode) -> list[str]:
    """The options compare.sh passes to ``bolide bench <workload>`` (README.md, the contract)."""
    return [
        "--json",
        *("--flush", str(flush)),
        *("--message-bytes", str(spec.message_bytes)),
        *("--messages", str(spec.message_count)),
        *("--producers", str(spec.producers)),
        *("--in-flight", str(spec.in_flight)),
        *("--consumers", str(spec.consumers)),
        *("--pull-batch", str(spec.pull_batch)),
        *("--rate-per-s", str(spec.rate_per_s)),
        *("--e2e-seconds", f"{spec.e2e_seconds:g}"),
        *("--max-seconds", f"{spec.max_seconds:g}"),
    ]

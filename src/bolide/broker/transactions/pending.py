"""The undecided transactions of a broker and the checker's two consume offsets. Pure.

A transaction is known by its *origin*: the queue offset of its first half record. Each check
re-appends a copy (a new queue offset, the same origin); :class:`PendingHalf` follows the
latest copy, the one a check names and an op record decides.

The checker's progress, kept in consumerOffset.json under CID_RMQ_SYS_TRANS, is where a
restart must start reading to rebuild this table::

    half queue   [ ..decided.. | h0  ......  copies, newer halves ...... ) max
                                 ^ half offset = min(latest copy of each pending transaction)
    op queue     [ ..ops of halves below h0.. | o0 ... ops that still matter ... ) max
                                                ^ op offset = first op deciding a half >= h0

Everything below both offsets is settled; everything above is read again after a restart.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from dataclasses import dataclass, field

from bolide.base import limits
from bolide.broker.transactions.records import HalfRecord

__all__ = ["PendingHalf", "PendingTable"]


@dataclass(slots=True)
class PendingHalf:
    """An undecided transaction. ``first_store_ms`` (broker clock) is when its first half was
    stored: its age, and so when it is checked, counts from there. ``lock`` serialises the
    end of the transaction with its checks."""

    record: HalfRecord
    first_store_ms: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def origin(self) -> int:
        return self.record.origin_queue_offset

    def age_ms(self, now_ms: int) -> int:
        return now_ms - self.first_store_ms

    def due(self, now_ms: int, timeout_ms: int) -> bool:
        """Whether a check is due: older than its CHECK_IMMUNITY_TIME_IN_SECONDS, or than
        ``timeout_ms`` (transactionTimeOut) when it has none."""
        immunity_ms = self.record.immunity_ms
        return self.age_ms(now_ms) >= (timeout_ms if immunity_ms is None else immunity_ms)


class PendingTable:
    """Origin -> :class:`PendingHalf`, plus the op records the op offset depends on.

    ``op_memory_max_count`` bounds the remembered ops (see TRANSACTION_OP_TRACKED_MAX_COUNT).
    """

    def __init__(
        self, *, op_memory_max_count: int = limits.TRANSACTION_OP_TRACKED_MAX_COUNT
    ) -> None:
        self._pending: dict[int, PendingHalf] = {}
        self._ops: collections.deque[tuple[int, int]] = collections.deque()
        self._op_memory_max_count = op_memory_max_count

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[PendingHalf]:
        """Pending transactions, oldest (smallest origin) first."""
        return iter(sorted(self._pending.values(), key=lambda pending: pending.origin))

    def get(self, origin: int) -> PendingHalf | None:
        return self._pending.get(origin)

    def add(self, pending: PendingHalf) -> None:
        self._pending[pending.origin] = pending

    def remove(self, pending: PendingHalf) -> bool:
        """Forget ``pending`` (decided or given up); False when it was not (or no longer) here."""
        if self._pending.get(pending.origin) is not pending:
            return False
        del self._pending[pending.origin]
        return True

    def is_current(self, pending: PendingHalf) -> bool:
        """Whether ``pending`` is still the undecided transaction of its origin."""
        return self._pending.get(pending.origin) is pending

    def record_op(self, op_queue_offset: int, half_queue_offset: int) -> None:
        """Remember that op ``op_queue_offset`` decides the half at ``half_queue_offset``."""
        if len(self._ops) >= self._op_memory_max_count:
            self._ops.popleft()
        self._ops.append((op_queue_offset, half_queue_offset))

    def half_offset(self, half_max_offset: int) -> int:
        """The half queue's consume offset: the oldest latest copy still undecided, or the
        queue's end when nothing is pending."""
        if not self._pending:
            return half_max_offset
        return min(pending.record.queue_offset for pending in self._pending.values())

    def op_offset(self, op_max_offset: int, half_offset: int) -> int:
        """The op queue's consume offset: the first remembered op deciding a half at or above
        ``half_offset`` (ops below it are forgotten), or the op queue's end."""
        ops = self._ops
        while ops and ops[0][1] < half_offset:
            ops.popleft()
        return ops[0][0] if ops else op_max_offset

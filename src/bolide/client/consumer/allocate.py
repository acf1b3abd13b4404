"""Queue allocation strategies: which of a topic's queues one consumer of a group takes.

Every consumer of a group runs the same strategy over the same inputs (the topic's subscribe
queues and the group's client ids, as the broker lists them) and takes its own share; no one
coordinates. So each strategy is a pure function of its inputs: the inputs are sorted first,
which makes the answer independent of the order they arrive in, and every queue goes to
exactly one client id of the list.

* :class:`AllocateAveragely` — Java's default (AllocateMessageQueueAveragely): contiguous
  ranges, the first ``n % k`` consumers one queue more. 8 queues / 3 consumers: 3, 3, 2.
* :class:`AllocateAveragelyByCircle` — round robin: consumer ``i`` takes queues ``i, i+k, ...``.
* :class:`AllocateConsistentHash` — a hash ring with virtual nodes (Java's MD5 ring layout);
  few queues move when consumers come and go, but shares are uneven.
* :class:`AllocateByConfig` — a fixed list of queues, configured per consumer.
* :class:`AllocateSticky` — balanced rendezvous hashing: shares as even as averagely's, while
  a join or leave moves fewer queues. Each (queue, consumer) pair has a fixed score; pairs
  are taken best first while the consumer is under its quota, so a member that leaves frees
  its queues, which mostly go to their next-best members, and the others mostly keep theirs.
  On random joins and leaves (tests/client/test_allocate.py) it moves about 1.3x the fewest
  queues any balanced assignment could move, against 1.8x for averagely.

  It has no memory of earlier assignments, on purpose. Moving exactly the fewest queues needs
  the previous assignment of the whole group, and members that joined at different times
  would remember different ones, with no coordinator to settle it (clients allocate locally,
  docs/protocol.md §2.5). A memoryless rule cannot be exactly minimal either: when n members share
  n queues (one each), minimal moves would pin every member to one fixed queue across all the
  groups it can be in, and n + 1 candidate members cannot all have a queue of their own.
  Agreement comes first.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Collection, Iterable
from typing import Protocol

from bolide.base.errors import ConfigError
from bolide.protocol.bodies import MessageQueue

__all__ = [
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateByConfig",
    "AllocateConsistentHash",
    "AllocateSticky",
    "AllocateStrategy",
    "allocate_all",
]

_log = logging.getLogger("bolide.client.allocate")

CONSISTENT_HASH_VIRTUAL_NODES_COUNT = 10
"""Points per consumer on the hash ring (Java's default virtualNodeCnt)."""


class AllocateStrategy(Protocol):
    """What the rebalance calls, once per subscribed topic."""

    @property
    def name(self) -> str:
        """The strategy's name (reported in running info)."""
        ...

    def allocate(
        self,
        consumer_group: str,
        current_client_id: str,
        queues: Collection[MessageQueue],
        client_ids: Collection[str],
    ) -> list[MessageQueue]:
        """The queues of ``queues`` that ``current_client_id`` consumes, sorted.

        Empty when ``current_client_id`` is not among ``client_ids`` (the broker has not seen
        its heartbeat yet) or when there are no queues.
        """
        ...


def _sorted_inputs(
    current_client_id: str, queues: Collection[MessageQueue], client_ids: Collection[str]
) -> tuple[list[MessageQueue], list[str], int] | None:
    """Sorted, de-duplicated inputs and the current consumer's index, or None when it has
    no share (not listed, or nothing to share)."""
    sorted_queues = sorted(set(queues))
    sorted_ids = sorted(set(client_ids))
    if current_client_id not in sorted_ids:
        _log.info("client %s is not in the consumer list %s yet", current_client_id, sorted_ids)
        return None
    if not sorted_queues:
        return None
    return sorted_queues, sorted_ids, sorted_ids.index(current_client_id)


class _ShareOfSortedInputs:
    """A strategy computed on sorted, de-duplicated inputs: :meth:`share` gives the current
    consumer's queues, called only when it is listed and there are queues."""

    def allocate(
        self,
        consumer_group: str,
        current_client_id: str,
        queues: Collection[MessageQueue],
        client_ids: Collection[str],
    ) -> list[MessageQueue]:
        inputs = _sorted_inputs(current_client_id, queues, client_ids)
        if inputs is None:
            return []
        sorted_queues, sorted_ids, index = inputs
        return self.share(sorted_queues, sorted_ids, index)

    def share(
        self, sorted_queues: list[MessageQueue], sorted_ids: list[str], index: int
    ) -> list[MessageQueue]:
        """The queues of ``sorted_ids[index]``, sorted (both lists non-empty)."""
        raise NotImplementedError


class AllocateAveragely(_ShareOfSortedInputs):
    """Contiguous ranges; the first ``len(queues) % len(ids)`` consumers get one more."""

    name = "AVG"

    def share(
        self, sorted_queues: list[MessageQueue], sorted_ids: list[str], index: int
    ) -> list[MessageQueue]:
        queue_count, id_count = len(sorted_queues), len(sorted_ids)
        remainder = queue_count % id_count
        takes_extra = remainder > 0 and index < remainder
        if queue_count <= id_count:
            share = 1
        else:
            share = queue_count // id_count + (1 if takes_extra else 0)
        start = index * share if takes_extra else index * share + remainder
        count = min(share, queue_count - start)
        return [sorted_queues[(start + i) % queue_count] for i in range(max(0, count))]


class AllocateAveragelyByCircle(_ShareOfSortedInputs):
    """Round robin: consumer ``i`` of ``k`` takes queues ``i, i + k, i + 2k, ...``."""

    name = "AVG_BY_CIRCLE"

    def share(
        self, sorted_queues: list[MessageQueue], sorted_ids: list[str], index: int
    ) -> list[MessageQueue]:
        return sorted_queues[index :: len(sorted_ids)]


def _md5_ring_hash(key: str) -> int:
    """The first four bytes of the key's MD5, big-endian, as Java's ring hashes its keys."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4])


def _queue_ring_key(queue: MessageQueue) -> str:
    """The text Java's MessageQueue.toString gives, the key the ring hashes for a queue."""
    return (
        f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name},"
        f" queueId={queue.queue_id}]"
    )


class AllocateConsistentHash(_ShareOfSortedInputs):
    """A hash ring: each consumer has ``virtual_nodes_count`` points (key ``"<id>-<i>"``); a
    queue belongs to the first point at or after its own hash, wrapping around.

    Raises:
        ConfigError: ``virtual_nodes_count`` is not positive.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_nodes_count: int = CONSISTENT_HASH_VIRTUAL_NODES_COUNT) -> None:
        if virtual_nodes_count <= 0:
            raise ConfigError(f"virtual nodes must be positive, not {virtual_nodes_count}")
        self._virtual_nodes_count = virtual_nodes_count

    def share(
        self, sorted_queues: list[MessageQueue], sorted_ids: list[str], index: int
    ) -> list[MessageQueue]:
        current_client_id = sorted_ids[index]
        ring = sorted(
            (_md5_ring_hash(f"{client_id}-{replica}"), client_id)
            for client_id in sorted_ids
            for replica in range(self._virtual_nodes_count)
        )
        points = [point for point, _ in ring]
        result: list[MessageQueue] = []
        for queue in sorted_queues:
            position = bisect.bisect_left(points, _md5_ring_hash(_queue_ring_key(queue)))
            owner = ring[position % len(ring)][1]
            if owner == current_client_id:
                result.append(queue)
        return result


class AllocateByConfig:
    """Always the configured queues (those of them the topic currently has)."""

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self._queues = frozenset(queues)

    def allocate(
        self,
        consumer_group: str,
        current_client_id: str,
        queues: Collection[MessageQueue],
        client_ids: Collection[str],
    ) -> list[MessageQueue]:
        return sorted(queue for queue in set(queues) if queue in self._queues)


def _rendezvous_score(queue: MessageQueue, client_id: str) -> int:
    """A fixed pseudo-random score of the pair: BLAKE2b is stable across runs and platforms."""
    key = f"{client_id}\x00{queue.topic}\x00{queue.broker_name}\x00{queue.queue_id}"
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest())


def sticky_assignment(
    queues: Collection[MessageQueue], client_ids: Collection[str]
) -> dict[MessageQueue, str]:
    """The whole group's assignment under :class:`AllocateSticky`: queue -> client id.

    Quotas: ``n // k`` queues each, and ``n % k`` consumers one more. Pairs are visited best
    score first (ties: client id, then queue); a pair is taken when its queue is still free
    and its consumer may take one more — a consumer reaching the larger quota uses one of the
    ``n % k`` extra places. Every queue ends with exactly one consumer.
    """
    sorted_queues = sorted(set(queues))
    sorted_ids = sorted(set(client_ids))
    if not sorted_queues or not sorted_ids:
        return {}
    base, extra = divmod(len(sorted_queues), len(sorted_ids))
    loads = dict.fromkeys(sorted_ids, 0)
    pairs = sorted(
        ((-_rendezvous_score(q, c), c, q) for q in sorted_queues for c in sorted_ids),
    )
    owners: dict[MessageQueue, str] = {}
    for _, client_id, queue in pairs:
        if queue in owners:
            continue
        load = loads[client_id]
        if load < base:
            loads[client_id] = load + 1
        elif load == base and extra > 0:
            extra -= 1
            loads[client_id] = load + 1
        else:
            continue
        owners[queue] = client_id
        if len(owners) == len(sorted_queues):
            break
    return owners


class AllocateSticky(_ShareOfSortedInputs):
    """Balanced rendezvous hashing (see the module docstring and :func:`sticky_assignment`)."""

    name = "STICKY"

    def share(
        self, sorted_queues: list[MessageQueue], sorted_ids: list[str], index: int
    ) -> list[MessageQueue]:
        owners = sticky_assignment(sorted_queues, sorted_ids)
        return sorted(queue for queue, owner in owners.items() if owner == sorted_ids[index])


def allocate_all(
    strategy: AllocateStrategy,
    consumer_group: str,
    queues: Collection[MessageQueue],
    client_ids: Collection[str],
) -> dict[str, list[MessageQueue]]:
    """Every consumer's share, as each would compute it for itself (tests, admin views)."""
    return {
        client_id: strategy.allocate(consumer_group, client_id, queues, client_ids)
        for client_id in sorted(set(client_ids))
    }

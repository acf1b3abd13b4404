"""Each send of a natural batch gets its own :class:`SendResult` (``auto_batch``).

The broker answers a batch with the first message's queue offset and every message's offset
message id, ``,``-joined; the batch is stored contiguously, so message ``i`` is at the first
offset plus ``i``. :func:`settle_batch` hands every waiting send its result.

It runs once per message of every batch, so it is a twin: this pure-Python module is the
reference, ``_results.pyx`` the compiled one (same answers:
tests/client/test_results_twins.py); both build each result without the frozen dataclass's
``__init__``, whose ``object.__setattr__`` per field costs more than the rest of the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final, Protocol

from bolide.base import compiled
from bolide.base.errors import ProtocolError
from bolide.client.message import SendResult, SendStatus
from bolide.protocol.bodies import MessageQueue

__all__ = ["COMPILED_NAMES", "Settled", "settle_batch"]


class Settled(Protocol):
    """A send waiting for its batch: its future and its UNIQ_KEY (``prepared.msg_id``)."""

    @property
    def future(self) -> asyncio.Future[SendResult]: ...

    @property
    def msg_id(self) -> str: ...


_new_result = object.__new__
_SET_FIELDS: Final = tuple(
    SendResult.__dict__[name].__set__
    for name in (
        "status",
        "msg_id",
        "offset_msg_id",
        "queue",
        "queue_offset",
        "transaction_id",
        "region_id",
        "recall_handle",
    )
)
"""The slots' own setters, in SendResult's field order (a frozen class refuses setattr)."""
(
    _set_status,
    _set_msg_id,
    _set_offset_msg_id,
    _set_queue,
    _set_queue_offset,
    _set_transaction_id,
    _set_region_id,
    _set_recall_handle,
) = _SET_FIELDS


def settle_batch(
    group: Sequence[Settled],
    offset_msg_ids: str,
    status: SendStatus,
    queue: MessageQueue,
    first_queue_offset: int,
    transaction_id: str | None,
    region_id: str | None,
) -> None:
    """Set the result of every send of ``group`` (in batch order) whose future is not done:
    its own UNIQ_KEY, the ``i``-th of ``offset_msg_ids``, ``first_queue_offset + i``, and the
    batch's status, queue, transaction id and region.

    Raises:
        ProtocolError: the broker listed a different number of offset ids than ``group``
            holds (the messages were stored; no future was set).
    """
    offset_ids = offset_msg_ids.split(",")
    if len(offset_ids) != len(group):
        raise ProtocolError(
            f"the broker answered a batch of {len(group)} messages with"
            f" {len(offset_ids)} message ids; the messages were stored"
        )
    queue_offset = first_queue_offset
    for index, waiting in enumerate(group):
        future = waiting.future
        if not future.done():
            result = _new_result(SendResult)
            _set_status(result, status)
            _set_msg_id(result, waiting.msg_id)
            _set_offset_msg_id(result, offset_ids[index])
            _set_queue(result, queue)
            _set_queue_offset(result, queue_offset)
            _set_transaction_id(result, transaction_id)
            _set_region_id(result, region_id)
            _set_recall_handle(result, None)  # a batch is never a timer message
            future.set_result(result)
        queue_offset += 1


COMPILED_NAMES: Final = ("settle_batch",)
"""The functions ``_results.pyx`` also provides, with the same signatures and answers."""

compiled.install(globals(), "bolide.client.producer._compiled", COMPILED_NAMES)

"""PULL_MESSAGE (11): the request, the four pull statuses, decoding the found messages.

Response code -> status (docs/protocol.md §2.4)::

    SUCCESS (0)                  FOUND           messages decoded from the body
    PULL_NOT_FOUND (19)          NO_NEW_MSG      caught up (after the long poll, if any)
    PULL_RETRY_IMMEDIATELY (20)  NO_MATCHED_MSG  entries scanned, none matched the filter
    PULL_OFFSET_MOVED (21)       OFFSET_ILLEGAL  the offset is outside the queue
    anything else                RemoteError

Every status carries nextBeginOffset, minOffset, maxOffset and suggestWhichBrokerId. As the
Java client does, found messages get the MIN_OFFSET / MAX_OFFSET properties (the queue's
bounds at pull time, used for lag), and a tag re-filter is offered because brokers compare
only tag hashes.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass, field

from bolide.client.rpc.call import call
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from bolide.protocol.message import MessageExt, PropertyKey
from bolide.protocol.record import decode_pulled_records
from bolide.remoting import ClientPool

__all__ = [
    "PULL_STATUS_BY_CODE",
    "PullResult",
    "PullStatus",
    "RawPull",
    "filter_by_tags",
    "pull_message",
    "pull_raw",
]


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's answer. ``next_begin_offset`` is where the next pull of the queue starts;
    ``min_offset``/``max_offset`` the queue's bounds (max exclusive)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    messages: list[MessageExt] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RawPull:
    """A pull's answer with its body left as the broker sent it (a run of stored records,
    maybe empty): for readers that decode records themselves (Spark's rows, the raw bench)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes


async def pull_raw(
    pool: ClientPool, address: str, header: PullMessageRequestHeader, timeout_ms: int
) -> RawPull:
    """Pull from the broker at ``address`` without decoding the records; ``timeout_ms`` must
    exceed the long-poll hold (``header.suspend_timeout_ms``) when the SUSPEND flag is set.
    Raises as :func:`pull_message`, less the record errors."""
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms, accept=PULL_STATUS_BY_CODE.keys())
    fields = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    return RawPull(
        PULL_STATUS_BY_CODE[ResponseCode(response.code)],
        fields.next_begin_offset,
        fields.min_offset,
        fields.max_offset,
        fields.suggest_which_broker_id,
        response.body,
    )


async def pull_message(
    pool: ClientPool, address: str, header: PullMessageRequestHeader, timeout_ms: int
) -> PullResult:
    """Pull from the broker at ``address``; ``timeout_ms`` must exceed the long-poll hold
    (``header.suspend_timeout_ms``) when the SUSPEND flag is set.

    Raises:
        RemoteError: codes other than the four statuses (SUBSCRIPTION_NOT_EXIST, ...).
        ProtocolError: a missing response header or a malformed message record.
        ConnectionClosedError, RequestTimeoutError: transport.
    """
    raw = await pull_raw(pool, address, header, timeout_ms)
    messages: list[MessageExt] = []
    if raw.status is PullStatus.FOUND and raw.body:
        # One record that does not decode is handed over flagged (body_error), never the
        # whole pull refused: a refused pull would be retried at the same offset forever.
        messages = decode_pulled_records(raw.body)
        min_text, max_text = str(raw.min_offset), str(raw.max_offset)
        for message in messages:
            message.properties[PropertyKey.MIN_OFFSET] = min_text
            message.properties[PropertyKey.MAX_OFFSET] = max_text
    return PullResult(
        raw.status,
        raw.next_begin_offset,
        raw.min_offset,
        raw.max_offset,
        raw.suggest_which_broker_id,
        messages,
    )


def filter_by_tags(messages: list[MessageExt], tags: Collection[str]) -> list[MessageExt]:
    """Keep the messages whose TAGS is one of ``tags``; all of them when ``tags`` is empty
    (a ``*`` subscription)."""
    if not tags:
        return messages
    return [message for message in messages if message.tags in tags]

"""Producer requests: SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), and the consumer's
CONSUMER_SEND_MSG_BACK (36).

Bolide sends the one-letter v2 header, as the Java client does by default (sendSmartMsg);
every 4.x broker reads it. A batch goes as code 320 with ``m`` = ``"true"``.
"""

from __future__ import annotations

from bolide.client.message import SendResult, SendStatus
from bolide.client.rpc.call import call, call_oneway
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from bolide.protocol.headers.fields import frozen_constructor
from bolide.protocol.headers.recall import RecallMessageRequestHeader, RecallMessageResponseHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import NAME_VALUE_SEPARATOR
from bolide.remoting import ClientPool

__all__ = [
    "SEND_ACCEPTED_CODES",
    "recall_message",
    "send_message",
    "send_message_answer",
    "send_message_back",
    "send_message_oneway",
    "send_prepared_v2",
]

_REPLY_TYPE_PAIR = f"{PropertyKey.MSG_TYPE}{NAME_VALUE_SEPARATOR}reply"
"""MSG_TYPE=reply in a properties string: the message is a reply (bolide.client.reply)."""

SEND_ACCEPTED_CODES = (
    ResponseCode.SUCCESS,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
)
"""Codes that mean "stored" (the last three: stored, not yet flushed or replicated)."""


def _send_request(
    header: SendMessageRequestHeader, body: bytes, *, oneway: bool
) -> RemotingCommand:
    code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
    if not header.batch and _REPLY_TYPE_PAIR in (header.properties or ""):
        code = RequestCode.SEND_REPLY_MESSAGE_V2  # a request-reply answer, as Java sends it
    return RemotingCommand.request(code, header.to_v2_ext_fields(), body, oneway=oneway)


async def send_message(
    pool: ClientPool,
    address: str,
    broker_name: str,
    header: SendMessageRequestHeader,
    body: bytes,
    msg_id: str,
    timeout_ms: int,
) -> SendResult:
    """Send one message (or a batch, ``header.batch``) to the broker at ``address``.

    ``body`` is already compressed or batch-encoded; ``msg_id`` (the UNIQ_KEY, or the
    comma-joined keys of a batch) is copied into the result.

    Raises:
        RemoteError: a code other than those of SEND_ACCEPTED_CODES (TOPIC_NOT_EXIST,
            MESSAGE_ILLEGAL, NO_PERMISSION, SYSTEM_BUSY...).
        ProtocolError: the response header lacks msgId/queueId/queueOffset.
        ConnectionClosedError, RequestTimeoutError: transport.
    """
    request = _send_request(header, body, oneway=False)
    response = await call(pool, address, request, timeout_ms, accept=SEND_ACCEPTED_CODES)
    status = SendStatus.from_response_code(response.code) or SendStatus.SEND_OK
    fields = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
    return _new_send_result(  # SendResult's fields, in declaration order
        status,
        msg_id,
        fields.msg_id,
        _new_queue(header.topic, broker_name, fields.queue_id),
        fields.queue_offset,
        fields.transaction_id,
        fields.msg_region,
        fields.recall_handle,
    )


_new_send_result = frozen_constructor(SendResult)
_new_queue = frozen_constructor(MessageQueue)
"""Frozen results built without the frozen ``__init__``'s setattr per field (one per send)."""


async def send_message_oneway(
    pool: ClientPool,
    address: str,
    header: SendMessageRequestHeader,
    body: bytes,
    timeout_ms: int,
) -> None:
    """Send without waiting for the broker: nothing says whether it was stored.

    Raises ConnectionClosedError / RequestTimeoutError when it cannot even be written.
    """
    await call_oneway(pool, address, _send_request(header, body, oneway=True), timeout_ms)


async def send_message_answer(
    pool: ClientPool,
    address: str,
    header: SendMessageRequestHeader,
    body: bytes,
    timeout_ms: int,
) -> tuple[int, SendMessageResponseHeader]:
    """SEND_MESSAGE_V2 of one message, for a caller that reports the broker's own answer (the
    5.x proxy): the response code (one of SEND_ACCEPTED_CODES) and the decoded answer header.

    Raises RemoteError for any other code, ProtocolError for an answer header without
    msgId/queueId/queueOffset, transport errors.
    """
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body)
    response = await call(pool, address, request, timeout_ms, accept=SEND_ACCEPTED_CODES)
    return response.code, SendMessageResponseHeader.from_ext_fields(response.ext_fields)


async def recall_message(
    pool: ClientPool, address: str, header: RecallMessageRequestHeader, timeout_ms: int
) -> RecallMessageResponseHeader:
    """RECALL_MESSAGE (370): cancel a timer message before its delivery time; the answer
    names the recalled message. Raises RemoteError (MESSAGE_ILLEGAL for a bad or stale
    handle), transport errors."""
    request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return RecallMessageResponseHeader.from_ext_fields(response.ext_fields)


async def send_prepared_v2(
    pool: ClientPool,
    address: str,
    fields: dict[str, str],
    body: bytes,
    timeout_ms: int,
    *,
    batch: bool,
) -> None:
    """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE when ``batch``) from v2 header fields the caller
    keeps ready and changes per send (the raw bench: no header object per message).

    Raises RemoteError for any code but SUCCESS (a stored but unflushed or unreplicated send
    counts as a failure there), transport errors.
    """
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    await call(pool, address, RemotingCommand.request(code, fields, body), timeout_ms)


async def send_message_back(
    pool: ClientPool, address: str, header: ConsumerSendMsgBackRequestHeader, timeout_ms: int
) -> None:
    """CONSUMER_SEND_MSG_BACK: have the broker re-deliver the consumed message at commit-log
    offset ``header.commit_log_offset`` through ``%RETRY%<group>`` (or the DLQ).

    Raises RemoteError (e.g. SYSTEM_ERROR when the message is not found), transport errors.
    """
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    await call(pool, address, request, timeout_ms)

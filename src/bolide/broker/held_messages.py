"""The messages the broker holds, read back and written again.

* :func:`read_message`: a stored message read back by its commit-log offset (a send-back's
  original, a POP delivery, a transaction's half).
* :func:`put_copy`: the put storing a message again elsewhere — a retry or dead-letter copy
  (retry.py, pop/retry.py), a delayed or timer message's delivery (delivery.py), a
  transaction's commit, renewal, discard or resume (transactions/records.py).
* :func:`record_copy`: a stored record re-encoded for a client with a new topic, queue,
  properties or reconsume count (a POP delivery's handle, a transaction check's body).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bolide.base.errors import ProtocolError
from bolide.protocol.message import MessageExt
from bolide.protocol.record import decode_record, encode_properties, encode_record
from bolide.store.api import MessageStore, PutRequest

__all__ = ["put_copy", "read_message", "record_copy"]


def read_message(
    store: MessageStore,
    commit_log_offset: int,
    *,
    log: logging.Logger | None = None,
    reader: str = "",
) -> MessageExt | None:
    """The message stored at ``commit_log_offset``, its body as stored (not decompressed);
    None when the store no longer holds it or it cannot be decoded (then logged as an error
    on ``log``, naming the ``reader``, when a log is given)."""
    record = store.read_record(commit_log_offset)
    if record is None:
        return None
    try:
        message, _ = decode_record(record, decompress=False)
    except ProtocolError as error:
        if log is not None:
            log.error("%s: record at %d unreadable: %s", reader, commit_log_offset, error)
        return None
    return message


def put_copy(
    message: MessageExt,
    topic: str,
    queue_id: int,
    properties: Mapping[str, str] | str,
    *,
    reconsume_times: int | None = None,
) -> PutRequest:
    """The put storing ``message`` again on ``topic``/``queue_id`` with ``properties`` (a
    properties string, or a mapping the store encodes): body as stored (still compressed if
    it was), flag, sysFlag, born time and born host kept; ``reconsume_times`` None keeps the
    message's."""
    return PutRequest(
        topic=topic,
        queue_id=queue_id,
        body=message.body,
        flag=message.flag,
        properties=properties,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=message.born_host,
        reconsume_times=message.reconsume_times if reconsume_times is None else reconsume_times,
    )


def record_copy(
    message: MessageExt,
    *,
    topic: str,
    queue_id: int,
    properties: Mapping[str, str],
    reconsume_times: int,
) -> bytes:
    """``message``'s stored record re-encoded with ``topic``, ``queue_id``, ``properties`` and
    ``reconsume_times``; every other field (offsets, times, hosts, body and its CRC) as stored.

    Raises:
        ProtocolError: the record cannot be encoded (a host that is no IP literal, a topic or
            properties over their size).
    """
    return encode_record(
        topic=topic.encode("utf-8"),
        body=message.body,
        flag=message.flag,
        properties=encode_properties(properties).encode("utf-8"),
        queue_id=queue_id,
        queue_offset=message.queue_offset,
        commit_log_offset=message.commit_log_offset,
        sys_flag=message.sys_flag,
        born_timestamp_ms=message.born_timestamp_ms,
        born_host=message.born_host,
        store_timestamp_ms=message.store_timestamp_ms,
        store_host=message.store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=message.prepared_transaction_offset,
        body_crc=message.body_crc,
    )

"""Writing prepared records straight into a mapped commit-log segment (the send path).

The stored record is RocketMQ's layout, drawn and written in one place,
:mod:`bolide.protocol.wire` (``write_records``, compiled in ``_wire_c.pyx``; the memory store
uses the codec's ``encode_record`` and the differential tests hold the two to the same bytes).
A put's records are written end to end into the mapping in one call; the first record's
TOTALSIZE goes last, so a process killed in the middle of the copy leaves a length of zero
where the put began (the area was zero before), which recovery reads as the end of the data:
a torn put — single or batch — is never mistaken for a whole one.
"""

from __future__ import annotations

from collections.abc import Sequence

from bolide.protocol.wire import write_records
from bolide.store.records import PreparedRecord


class RecordWriter:
    """Writes the records of one put for a store whose host is ``store_ip``:``store_port``."""

    __slots__ = ("_store_ip", "_store_port")

    def __init__(self, store_ip: bytes, store_port: int) -> None:
        self._store_ip = store_ip
        self._store_port = store_port

    def write(
        self,
        view: memoryview,
        position: int,
        records: Sequence[PreparedRecord],
        topic_tail: bytes,
        queue_id: int,
        first_queue_offset: int | None,
        commit_log_offset: int,
        sys_flag: int,
        born_timestamp_ms: int,
        born_ip: bytes,
        born_port: int,
        store_timestamp_ms: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> int:
        """Write ``records`` end to end at ``view[position:]`` (room reserved by the caller,
        fields checked by RecordBuilder, so nothing here can fail); returns the end position.

        ``commit_log_offset`` is the log offset of ``position``; queue offsets count up from
        ``first_queue_offset`` (None: the records get no consume-queue entry, queue offset 0);
        ``topic_tail`` is the topic length byte and the topic (TopicFacts.tail_prefix). The
        BORNHOST_V6 / STOREHOST_V6 bits of ``sys_flag`` are set from the hosts.
        """
        return write_records(
            view, position, records, topic_tail, queue_id, first_queue_offset,
            commit_log_offset, sys_flag, born_timestamp_ms, born_ip, born_port,
            store_timestamp_ms, self._store_ip, self._store_port, reconsume_times,
            prepared_transaction_offset,
        )  # fmt: skip

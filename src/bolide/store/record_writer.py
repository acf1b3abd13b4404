"""Writing prepared records straight into a mapped commit-log segment (the send path).

The stored record is RocketMQ's layout (docs/protocol.md §3.1, drawn in full beside the reference
encoder in protocol/message_codec.py; the memory store uses that encoder and the differential
tests hold the two to the same bytes). A put's records are joined in one buffer and copied
into the mapping with one slice assignment; each record is:

```
   1. one precompiled struct.pack of the fixed part, TOTALSIZE = 0 for the first record
   +-----------+-------+-------+---------+------+-------------+----------------+---------+
   | TOTALSIZE | MAGIC | BODY  | QUEUEID | FLAG | QUEUEOFFSET | PHYSICALOFFSET | SYSFLAG |
   | int32     | int32 | CRC   | int32   | int32| int64       | int64          | int32   |
   +-----------+-------+-------+---------+------+-------------+----------------+---------+
   | BORNTIMESTAMP | BORNHOST ip(4|16)+port | STORETIMESTAMP | STOREHOST ip(4|16)+port   |
   | int64         |                        | int64          |                           |
   +---------------+------------------------+----------------+---------------------------+
   | RECONSUMETIMES | PREPARED TRANSACTION OFFSET | BODY length n |   88 bytes with IPv4
   | int32          | int64                       | int32         |   hosts, +12 per IPv6
   +----------------+-----------------------------+---------------+
   2. BODY (n bytes)          3. topic length (1 byte) + TOPIC   (one cached bytes object)
   4. PROPERTIES length (uint16) + PROPERTIES
   then, after the copy: TOTALSIZE of the first record, packed into the mapping
```

The first record's TOTALSIZE goes last, so a process killed in the middle of the copy
leaves a length of zero where the put began (the area was zero before), which recovery reads
as the end of the data: a torn put — single or batch — is never mistaken for a whole one.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from bolide.base.errors import invariant
from bolide.protocol.message import MESSAGE_MAGIC_CODE, MessageSysFlag
from bolide.protocol.message_codec import RECORD_FIXED_BYTES
from bolide.store.records import PreparedRecord


def _fixed_part(born_v6: bool, store_v6: bool) -> struct.Struct:
    born_ip = "16s" if born_v6 else "4s"
    store_ip = "16s" if store_v6 else "4s"
    return struct.Struct(f">iiiiiqqiq{born_ip}iq{store_ip}iiqi")


_BORNHOST_V6: Final = int(MessageSysFlag.BORNHOST_V6)
_STOREHOST_V6: Final = int(MessageSysFlag.STOREHOST_V6)
_HOST_BITS: Final = _BORNHOST_V6 | _STOREHOST_V6
_FIXED_BY_HOSTS: Final = (
    _fixed_part(False, False),
    _fixed_part(True, False),
    _fixed_part(False, True),
    _fixed_part(True, True),
)
"""Indexed by (sysFlag >> 4) & 3: bit 0 is BORNHOST_V6, bit 1 STOREHOST_V6."""
_INT32: Final = struct.Struct(">i")
_UINT16: Final = struct.Struct(">H")
invariant(_FIXED_BY_HOSTS[0].size == RECORD_FIXED_BYTES, "record layout as the codec's")
invariant(_BORNHOST_V6 >> 4 == 1 and _STOREHOST_V6 >> 4 == 2, "host bits index the layouts")


class RecordWriter:
    """Writes the records of one put for a store whose host is ``store_ip``:``store_port``."""

    __slots__ = ("_store_bits", "_store_ip", "_store_port")

    def __init__(self, store_ip: bytes, store_port: int) -> None:
        self._store_ip = store_ip
        self._store_port = store_port
        self._store_bits = _STOREHOST_V6 if len(store_ip) == 16 else 0

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
        sys_flag = (sys_flag & ~_HOST_BITS) | self._store_bits
        if len(born_ip) == 16:
            sys_flag |= _BORNHOST_V6
        pack = _FIXED_BY_HOSTS[(sys_flag >> 4) & 3].pack
        pack_length = _UINT16.pack
        store_ip, store_port = self._store_ip, self._store_port
        queue_offset = 0 if first_queue_offset is None else first_queue_offset
        queue_step = 0 if first_queue_offset is None else 1
        pieces: list[bytes | bytearray | memoryview] = []
        total_size = 0
        for record in records:
            body = record.body
            properties = record.properties_bytes
            pieces += (
                pack(
                    record.size if total_size else 0, MESSAGE_MAGIC_CODE, record.body_crc,
                    queue_id, record.flag, queue_offset, commit_log_offset, sys_flag,
                    born_timestamp_ms, born_ip, born_port, store_timestamp_ms, store_ip,
                    store_port, reconsume_times, prepared_transaction_offset, len(body),
                ),
                body,
                topic_tail,
                pack_length(len(properties)),
                properties,
            )  # fmt: skip
            total_size += record.size
            commit_log_offset += record.size
            queue_offset += queue_step
        data = b"".join(pieces)
        end = position + total_size
        if len(data) != total_size:
            invariant(False, f"records of {total_size} bytes encoded as {len(data)}")
        view[position:end] = data  # one copy into the mapping per put
        _INT32.pack_into(view, position, records[0].size)
        return end

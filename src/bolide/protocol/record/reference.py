"""The reference record encoder: one whole record from its fields, checked.

The store's put path writes records with :func:`~bolide.protocol.record.layout.write_records`
(compiled, no checks: its caller checked). This encoder is the slow, checked one the other
writers use: the memory store, POP's revive and retry records, the transaction service's
half and operation records, and the broker's re-encoding for zlib-only clients
(:func:`~bolide.protocol.record.messages.readable_by_zlib_only_client`); the tests build
their records with it. Import it from :mod:`bolide.protocol.record`, the record's one door.
"""

from __future__ import annotations

import struct
from typing import Final

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.address import SocketAddress, pack_ip
from bolide.protocol.record.layout import (
    FIXED_PART_BY_HOSTS,
    MESSAGE_MAGIC_CODE,
    SYS_FLAG_BORNHOST_V6,
    SYS_FLAG_STOREHOST_V6,
)

_UINT16: Final = struct.Struct(">H")
_ONE_BYTE: Final = tuple(bytes((length,)) for length in range(256))
_HOST_BITS: Final = SYS_FLAG_BORNHOST_V6 | SYS_FLAG_STOREHOST_V6


def _prepare(
    topic: bytes,
    body: bytes | bytearray | memoryview,
    properties: bytes,
    sys_flag: int,
    born_host: SocketAddress,
    store_host: SocketAddress,
) -> tuple[struct.Struct, int, bytes, bytes, int]:
    """(fixed struct, sys flag with the host bits, born ip, store ip, record size)."""
    if len(topic) > limits.RECORD_TOPIC_MAX_BYTES:
        raise ProtocolError(
            f"topic of {len(topic)} bytes exceeds {limits.RECORD_TOPIC_MAX_BYTES} bytes"
        )
    if len(properties) > limits.MESSAGE_PROPERTIES_MAX_BYTES:
        raise ProtocolError(
            f"properties of {len(properties)} bytes exceed "
            f"{limits.MESSAGE_PROPERTIES_MAX_BYTES} bytes"
        )
    born_ip = pack_ip(born_host[0])
    store_ip = pack_ip(store_host[0])
    # The v6 bits must describe the hosts actually written, whatever the caller passed.
    sys_flag &= ~_HOST_BITS
    if len(born_ip) == 16:
        sys_flag |= SYS_FLAG_BORNHOST_V6
    if len(store_ip) == 16:
        sys_flag |= SYS_FLAG_STOREHOST_V6
    fixed = FIXED_PART_BY_HOSTS[(sys_flag >> 4) & 3]
    total_size = fixed.size + len(body) + 1 + len(topic) + 2 + len(properties)
    return fixed, sys_flag, born_ip, store_ip, total_size


def encode_record(
    *,
    topic: bytes,
    body: bytes | bytearray | memoryview,
    flag: int,
    properties: bytes,
    queue_id: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: SocketAddress,
    store_timestamp_ms: int,
    store_host: SocketAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int,
) -> bytes:
    """One stored record in the layout drawn in :mod:`~bolide.protocol.record.layout`;
    ``topic`` and ``properties`` are UTF-8.

    The BORNHOST_V6 / STOREHOST_V6 bits of ``sys_flag`` are set from the hosts (an ip with
    ``:`` is IPv6). ``body_crc`` is written as given: see :func:`body_crc`.

    Raises:
        ProtocolError: topic over 127 bytes, properties over 32767 bytes, a host that is not an
            IP literal, or a number outside its field (int32 / int64).
    """
    fixed, sys_flag, born_ip, store_ip, total_size = _prepare(
        topic, body, properties, sys_flag, born_host, store_host
    )
    try:
        head = fixed.pack(
            total_size,
            MESSAGE_MAGIC_CODE,
            body_crc,
            queue_id,
            flag,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp_ms,
            born_ip,
            born_host[1],
            store_timestamp_ms,
            store_ip,
            store_host[1],
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
    except struct.error as error:
        raise ProtocolError(f"record field out of range: {error}") from error
    return b"".join(
        (
            head,
            body,
            _ONE_BYTE[len(topic)],
            topic,
            _UINT16.pack(len(properties)),
            properties,
        )
    )

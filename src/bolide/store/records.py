"""Turning a put request into encoded records: the validation and encoding both stores share.

Everything here happens before a store writes a byte, so a refusal (:class:`RejectedError`)
leaves no trace. The checks, in order: queue id range, topic (storable as a directory name,
at most 127 UTF-8 bytes), body size (max_message_size_bytes), properties (parseable, at most
32767 bytes, not ending in NUL), then the record must fit a commit-log segment.
"""

from __future__ import annotations

from collections.abc import Mapping

from bolide.base import limits
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.message import (
    SocketAddress,
    decode_properties,
    encode_properties,
    is_ipv6_host,
    join_properties,
    pack_ip,
)
from bolide.protocol.message_codec import (
    IPV6_HOST_EXTRA_BYTES,
    RECORD_OVERHEAD_BYTES,
    body_crc,
    encode_record,
)
from bolide.protocol.msgid import offset_message_id
from bolide.store.api import BatchPutRequest, PutRequest, PutStatus
from bolide.store.consume_queue import topic_is_storable
from bolide.store.dispatch import index_hashes

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _check_fields(
    sys_flag: int,
    born_timestamp_ms: int,
    born_host: SocketAddress,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> None:
    """The numeric fields fit their record fields and the born host is an IP literal, so
    encoding cannot fail after a store has reserved room."""
    if not (
        _INT32_MIN <= sys_flag <= _INT32_MAX
        and _INT32_MIN <= reconsume_times <= _INT32_MAX
        and _INT64_MIN <= born_timestamp_ms <= _INT64_MAX
        and _INT64_MIN <= prepared_transaction_offset <= _INT64_MAX
        and 0 <= born_host[1] <= 0xFFFF
    ):
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "a message field is out of range")
    try:
        pack_ip(born_host[0])
    except ProtocolError as error:
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error


class RejectedError(Exception):
    """A put refused before anything was written; carries the status to answer."""

    def __init__(self, status: PutStatus, remark: str) -> None:
        super().__init__(remark)
        self.status = status
        self.remark = remark


class PreparedRecord:
    """One record of a put, validated: its stored fields, size and index hashes."""

    __slots__ = ("body", "flag", "hashes", "properties", "properties_bytes", "size")

    def __init__(
        self,
        body: bytes | bytearray | memoryview,
        flag: int,
        properties: Mapping[str, str],
        properties_bytes: bytes,
        size: int,
        hashes: list[int],
    ) -> None:
        self.body = body
        self.flag = flag
        self.properties = properties
        self.properties_bytes = properties_bytes
        self.size = size
        self.hashes = hashes


class RecordBuilder:
    """Validates and encodes the records of put requests for one store."""

    def __init__(
        self,
        *,
        store_host: SocketAddress,
        max_message_size_bytes: int,
        segment_bytes: int,
        index_max_entries: int,
    ) -> None:
        self.store_host = store_host
        self._store_v6 = is_ipv6_host(store_host[0])
        self._message_id_prefix = offset_message_id(store_host, 0)[:-16]
        self._max_message_size_bytes = max_message_size_bytes
        self._segment_bytes = segment_bytes
        self._index_max_entries = index_max_entries
        self._topic_bytes: dict[str, bytes] = {}

    def single(self, request: PutRequest) -> tuple[bytes, list[PreparedRecord]]:
        """(encoded topic, [record]) of a single put.

        Raises:
            RejectedError: the request breaks a rule (module docstring).
        """
        self._check_queue_id(request.queue_id)
        _check_fields(
            request.sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            request.reconsume_times,
            request.prepared_transaction_offset,
        )
        topic_bytes = self._encoded_topic(request.topic)
        record = self._record(
            request.topic,
            topic_bytes,
            request.body,
            request.flag,
            request.properties,
            request.born_host,
        )
        self._check_fits([record])
        return topic_bytes, [record]

    def batch(self, request: BatchPutRequest) -> tuple[bytes, list[PreparedRecord]]:
        """(encoded topic, records) of a batch, one record per entry.

        Raises:
            RejectedError: empty or too many entries, or any entry breaks a rule.
        """
        self._check_queue_id(request.queue_id)
        if not request.entries:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "empty batch")
        if len(request.entries) > limits.BATCH_MESSAGES_MAX_COUNT:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "batch holds too many messages")
        _check_fields(
            request.sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            request.reconsume_times,
            0,
        )
        topic_bytes = self._encoded_topic(request.topic)
        records = [
            self._record(
                request.topic,
                topic_bytes,
                entry.body,
                entry.flag,
                join_properties(entry.properties, request.extra_properties),
                request.born_host,
            )
            for entry in request.entries
        ]
        self._check_fits(records)
        return topic_bytes, records

    def _check_queue_id(self, queue_id: int) -> None:
        if not 0 <= queue_id < limits.STORE_QUEUE_IDS_MAX_COUNT:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"queue id {queue_id} out of range")

    def _check_fits(self, records: list[PreparedRecord]) -> None:
        total_size = sum(record.size for record in records)
        if total_size + limits.COMMIT_LOG_BLANK_MIN_BYTES > self._segment_bytes:
            raise RejectedError(
                PutStatus.MESSAGE_ILLEGAL,
                f"{total_size} bytes of records do not fit a commit-log segment",
            )

    def _encoded_topic(self, topic: str) -> bytes:
        encoded = self._topic_bytes.get(topic)
        if encoded is not None:
            return encoded
        if not topic_is_storable(topic):
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"topic {topic!r} cannot be stored")
        encoded = topic.encode("utf-8", "surrogatepass")
        if len(encoded) > limits.RECORD_TOPIC_MAX_BYTES:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "topic longer than 127 bytes")
        if len(self._topic_bytes) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
            self._topic_bytes[topic] = encoded
        return encoded

    def forget_topic(self, topic: str) -> None:
        self._topic_bytes.pop(topic, None)

    def _record(
        self,
        topic: str,
        topic_bytes: bytes,
        body: bytes | bytearray | memoryview,
        flag: int,
        properties: Mapping[str, str] | str,
        born_host: SocketAddress,
    ) -> PreparedRecord:
        if not _INT32_MIN <= flag <= _INT32_MAX:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"flag {flag} is not an int32")
        if len(body) > self._max_message_size_bytes:
            raise RejectedError(
                PutStatus.MESSAGE_ILLEGAL,
                f"body of {len(body)} bytes exceeds {self._max_message_size_bytes}",
            )
        parsed: Mapping[str, str]
        try:
            if isinstance(properties, str):
                text, parsed = properties, decode_properties(properties)
            else:
                text, parsed = encode_properties(properties), properties
        except ProtocolError as error:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error
        properties_bytes = text.encode("utf-8", "surrogatepass")
        if properties_bytes.endswith(b"\0"):
            # Recovery reads a record ending in a zero byte as a torn tail (see recovery.py).
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "properties end with a NUL character")
        if len(properties_bytes) > limits.MESSAGE_PROPERTIES_MAX_BYTES:
            raise RejectedError(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties of {len(properties_bytes)} bytes exceed "
                f"{limits.MESSAGE_PROPERTIES_MAX_BYTES}",
            )
        size = (
            RECORD_OVERHEAD_BYTES
            + len(body)
            + len(topic_bytes)
            + len(properties_bytes)
            + IPV6_HOST_EXTRA_BYTES * (self._store_v6 + is_ipv6_host(born_host[0]))
        )
        hashes = index_hashes(topic, parsed, self._index_max_entries)
        return PreparedRecord(body, flag, parsed, properties_bytes, size, hashes)

    def encode_all(
        self,
        records: list[PreparedRecord],
        *,
        topic_bytes: bytes,
        queue_id: int,
        first_queue_offset: int | None,
        base_offset: int,
        sys_flag: int,
        born_timestamp_ms: int,
        born_host: SocketAddress,
        store_timestamp_ms: int,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> list[bytes]:
        """The records laid end to end from ``base_offset``; queue offsets count up from
        ``first_queue_offset`` (None: no consume-queue entry, queue offset 0).

        Raises:
            RejectedError: a field is out of range or a host is not an IP literal.
        """
        encoded: list[bytes] = []
        offset = base_offset
        try:
            for number, record in enumerate(records):
                data = encode_record(
                    topic=topic_bytes,
                    body=record.body,
                    flag=record.flag,
                    properties=record.properties_bytes,
                    queue_id=queue_id,
                    queue_offset=0 if first_queue_offset is None else first_queue_offset + number,
                    commit_log_offset=offset,
                    sys_flag=sys_flag,
                    born_timestamp_ms=born_timestamp_ms,
                    born_host=born_host,
                    store_timestamp_ms=store_timestamp_ms,
                    store_host=self.store_host,
                    reconsume_times=reconsume_times,
                    prepared_transaction_offset=prepared_transaction_offset,
                    body_crc=body_crc(record.body),
                )
                invariant(len(data) == record.size, "record size computed as encoded")
                encoded.append(data)
                offset += record.size
        except ProtocolError as error:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error
        return encoded

    def message_id(self, commit_log_offset: int) -> str:
        """The offset message id of the record at ``commit_log_offset`` on this store host."""
        return f"{self._message_id_prefix}{commit_log_offset:016X}"

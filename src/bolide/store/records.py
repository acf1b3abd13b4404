"""Turning a put request into validated records: the checks and facts both stores share.

Everything here happens before a store writes a byte, so a refusal (:class:`RejectedError`)
leaves no trace. The checks, in order: queue id range, the numeric fields and the born host
(int32 / int64 / port / IP literal), topic (storable as a directory name, valid UTF-8, at
most 127 bytes), body size (max_message_size_bytes), properties (valid UTF-8, at most 32767
bytes, not ending in NUL), then the records must fit a commit-log segment.

This is the send path (docs/architecture.md, "Sending and storing"): the properties string is not
parsed into a dict; the
four properties the store reads (TAGS, KEYS, UNIQ_KEY, DELAY) are picked out of it with
string searches that give what :func:`~bolide.protocol.message.decode_properties` would.
Per-topic facts (encoded name, index hash seed) and validated born hosts are cached.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

from bolide.base import compiled, limits
from bolide.base.errors import ProtocolError, invariant
from bolide.protocol.address import SocketAddress, pack_ip
from bolide.protocol.message import tags_code
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import (
    IPV6_HOST_EXTRA_BYTES,
    RECORD_OVERHEAD_BYTES,
    BatchEntry,
    encode_properties,
    encode_record,
    join_properties,
    store_properties,
)
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import BatchPutRequest, PutRequest, PutStatus
from bolide.store.consume_queue import topic_is_storable
from bolide.store.dispatch import index_hashes
from bolide.store.index_file import index_key_seed

_FIELDS: struct.Struct = struct.Struct(">iiqqH")
"""sys flag, reconsume times, born timestamp, prepared transaction offset, born port: packing
them checks every range at once (struct.error when one does not fit its record field)."""


class RejectedError(Exception):
    """A put refused before anything was written; carries the status to answer."""

    def __init__(self, status: PutStatus, remark: str) -> None:
        super().__init__(remark)
        self.status = status
        self.remark = remark


class TopicFacts:
    """What the store derives once per topic: its UTF-8 name, the record bytes that follow a
    body up to the properties length (``len(topic)`` + topic), and the index hash seed."""

    __slots__ = ("encoded", "is_schedule", "key_seed", "name", "tail_prefix")

    def __init__(self, name: str, encoded: bytes) -> None:
        self.name = name
        self.encoded = encoded
        self.tail_prefix = bytes((len(encoded),)) + encoded
        self.key_seed = index_key_seed(name)
        self.is_schedule = name == SCHEDULE_TOPIC


class PreparedRecord:
    """One record of a put, validated: its stored fields, size, body CRC, the properties the
    store reads (``tags``, ``delay``: raw text or None) and its index hashes."""

    __slots__ = (
        "body",
        "body_crc",
        "delay",
        "flag",
        "hashes",
        "properties_bytes",
        "size",
        "tags",
        "tags_code",
    )

    def __init__(
        self,
        body: bytes | bytearray | memoryview,
        flag: int,
        properties_bytes: bytes,
        size: int,
        tags: str | None,
        tags_code: int,
        delay: str | None,
        hashes: list[int],
    ) -> None:
        self.body = body
        self.flag = flag
        self.properties_bytes = properties_bytes
        self.size = size
        self.tags = tags
        self.tags_code = tags_code
        """Java's hash of TAGS (0 without); SCHEDULE_TOPIC_XXXX records use the delivery
        time instead, which needs the store time (dispatch.queue_tags_code)."""
        self.delay = delay
        self.hashes = hashes
        self.body_crc = zlib.crc32(body) & 0x7FFFFFFF


class RecordBuilder:
    """Validates the records of put requests for one store."""

    def __init__(
        self,
        *,
        store_host: SocketAddress,
        max_message_size_bytes: int,
        segment_bytes: int,
        index_max_entries: int,
    ) -> None:
        self.store_host = store_host
        self.store_ip = pack_ip(store_host[0])
        self._store_extra_bytes = IPV6_HOST_EXTRA_BYTES if len(self.store_ip) == 16 else 0
        self.message_id_prefix = offset_message_id(store_host, 0)[:-16]
        self._max_message_size_bytes = max_message_size_bytes
        self._segment_bytes = segment_bytes
        self._index_max_entries = index_max_entries
        self._topics: dict[str, TopicFacts] = {}
        self._born_ips: dict[str, bytes] = {}
        self._tags_codes: dict[str, int] = {}

    def single(self, request: PutRequest) -> tuple[TopicFacts, PreparedRecord, bytes]:
        """(topic facts, record, packed born ip) of a single put.

        Raises:
            RejectedError: the request breaks a rule (module docstring).
        """
        if not 0 <= request.queue_id < limits.STORE_QUEUE_IDS_MAX_COUNT:
            raise _bad_queue_id(request.queue_id)
        born_ip = self.check_fields(
            request.sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            request.reconsume_times,
            request.prepared_transaction_offset,
        )
        topic = self.topic(request.topic)
        record = self._record(
            topic, request.body, request.flag, request.properties, request.born_host
        )
        if record.size + limits.COMMIT_LOG_BLANK_MIN_BYTES > self._segment_bytes:
            raise _too_big(record.size)
        return topic, record, born_ip

    def batch(self, request: BatchPutRequest) -> tuple[TopicFacts, list[PreparedRecord], bytes]:
        """(topic facts, records, packed born ip) of a batch, one record per entry.

        Raises:
            RejectedError: empty or too many entries, or any entry breaks a rule.
        """
        if not 0 <= request.queue_id < limits.STORE_QUEUE_IDS_MAX_COUNT:
            raise _bad_queue_id(request.queue_id)
        if not request.entries:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "empty batch")
        if len(request.entries) > limits.BATCH_MESSAGES_MAX_COUNT:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "batch holds too many messages")
        born_ip = self.check_fields(
            request.sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            request.reconsume_times,
            0,
        )
        topic = self.topic(request.topic)
        extra_bytes = self._store_extra_bytes
        if ":" in request.born_host[0]:
            extra_bytes += IPV6_HOST_EXTRA_BYTES
        records = build_records(
            topic, request.entries, request.extra_properties, extra_bytes,
            self._max_message_size_bytes, self._index_max_entries, self._tags_codes,
        )  # fmt: skip
        total_size = sum([record.size for record in records])
        if total_size + limits.COMMIT_LOG_BLANK_MIN_BYTES > self._segment_bytes:
            raise _too_big(total_size)
        return topic, records, born_ip

    def check_fields(
        self,
        sys_flag: int,
        born_timestamp_ms: int,
        born_host: SocketAddress,
        reconsume_times: int,
        prepared_transaction_offset: int,
    ) -> bytes:
        """The packed born ip, after checking that the numeric fields fit their record fields
        and the born host is an IP literal, so writing cannot fail after room is reserved.

        Raises:
            RejectedError: MESSAGE_ILLEGAL.
        """
        try:
            _FIELDS.pack(
                sys_flag,
                reconsume_times,
                born_timestamp_ms,
                prepared_transaction_offset,
                born_host[1],
            )
        except (struct.error, TypeError) as error:
            raise RejectedError(
                PutStatus.MESSAGE_ILLEGAL, "a message field is out of range"
            ) from error
        host = born_host[0]
        packed = self._born_ips.get(host)
        if packed is None:
            try:
                packed = pack_ip(host)
            except ProtocolError as error:
                raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error
            if len(self._born_ips) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
                self._born_ips[host] = packed
        return packed

    def topic(self, topic: str) -> TopicFacts:
        """The cached facts of ``topic``.

        Raises:
            RejectedError: MESSAGE_ILLEGAL when the topic cannot be stored.
        """
        facts = self._topics.get(topic)
        if facts is not None:
            return facts
        if not topic_is_storable(topic):
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"topic {topic!r} cannot be stored")
        try:
            encoded = topic.encode("utf-8")
        except UnicodeEncodeError as error:
            raise _not_utf8("topic") from error
        if len(encoded) > limits.RECORD_TOPIC_MAX_BYTES:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "topic longer than 127 bytes")
        facts = TopicFacts(topic, encoded)
        if len(self._topics) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
            self._topics[topic] = facts
        return facts

    def forget_topic(self, topic: str) -> None:
        self._topics.pop(topic, None)

    def _record(
        self,
        topic: TopicFacts,
        body: bytes | bytearray | memoryview,
        flag: int,
        properties: Mapping[str, str] | str,
        born_host: SocketAddress,
    ) -> PreparedRecord:
        if isinstance(properties, str):
            text = properties
        else:
            try:
                text = encode_properties(properties)
            except ProtocolError as error:
                raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error
        extra = self._store_extra_bytes
        if ":" in born_host[0]:
            extra += IPV6_HOST_EXTRA_BYTES
        return build_record(
            topic, body, flag, text, extra, self._max_message_size_bytes,
            self._index_max_entries, self._tags_codes,
        )  # fmt: skip

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
        """The records laid end to end from ``base_offset`` through the codec's reference
        encoder (the memory store; the file store writes in place with ``wire.write_records``);
        queue offsets count up from ``first_queue_offset`` (None: no consume-queue entry,
        queue offset 0).

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
                    body_crc=record.body_crc,
                )
                invariant(len(data) == record.size, "record size computed as encoded")
                encoded.append(data)
                offset += record.size
        except ProtocolError as error:
            raise RejectedError(PutStatus.MESSAGE_ILLEGAL, str(error)) from error
        return encoded

    def message_id(self, commit_log_offset: int) -> str:
        """The offset message id of the record at ``commit_log_offset`` on this store host."""
        return f"{self.message_id_prefix}{commit_log_offset:016X}"


def build_record(
    topic: TopicFacts,
    body: bytes | bytearray | memoryview,
    flag: int,
    text: str,
    extra_bytes: int,
    max_body_bytes: int,
    index_max_entries: int,
    tags_codes: dict[str, int],
) -> PreparedRecord:
    """The validated record of one message of ``topic`` whose properties string is ``text``
    (checks in the module docstring's order, from the flag on); ``extra_bytes`` are the IPv6
    hosts' extra record bytes, ``tags_codes`` the builder's bounded memo of tag hashes.
    Compiled in ``_records.pyx``.

    Raises:
        RejectedError: the message breaks a rule.
    """
    if not -0x80000000 <= flag <= 0x7FFFFFFF:
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, f"flag {flag} is not an int32")
    if len(body) > max_body_bytes:
        raise RejectedError(
            PutStatus.MESSAGE_ILLEGAL, f"body of {len(body)} bytes exceeds {max_body_bytes}"
        )
    try:
        properties_bytes = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise _not_utf8("properties") from error
    if properties_bytes.endswith(b"\0"):
        # Recovery reads a record ending in a zero byte as a torn tail (see recovery.py).
        raise RejectedError(PutStatus.MESSAGE_ILLEGAL, "properties end with a NUL character")
    if len(properties_bytes) > limits.MESSAGE_PROPERTIES_MAX_BYTES:
        raise RejectedError(
            PutStatus.PROPERTIES_SIZE_EXCEEDED,
            f"properties of {len(properties_bytes)} bytes exceed "
            f"{limits.MESSAGE_PROPERTIES_MAX_BYTES}",
        )
    tags, keys, unique_key, delay = store_properties(text)
    size = RECORD_OVERHEAD_BYTES + len(body) + len(topic.encoded) + len(properties_bytes)
    if keys or not unique_key:
        hashes = index_hashes(topic.key_seed, keys, unique_key, index_max_entries)
    else:  # index_hashes' common case, inline: one UNIQ_KEY (max entries >= 2 by config)
        hashes = [zlib.crc32(unique_key.encode("utf-8"), topic.key_seed)]
    code = 0
    if tags:
        cached = tags_codes.get(tags)
        if cached is None:
            code = tags_code(tags)  # loops in Python per character: memoized, bounded
            if len(tags_codes) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
                tags_codes[tags] = code
        else:
            code = cached
    return PreparedRecord(
        body,
        flag,
        properties_bytes,
        size + extra_bytes,
        tags,
        code,
        delay if topic.is_schedule else None,
        hashes,
    )


def build_records(
    topic: TopicFacts,
    entries: Sequence[BatchEntry],
    extra_properties: str,
    extra_bytes: int,
    max_body_bytes: int,
    index_max_entries: int,
    tags_codes: dict[str, int],
) -> list[PreparedRecord]:
    """:func:`build_record` of each entry of a batch, ``extra_properties`` joined to its
    properties string. Compiled in ``_records.pyx``.

    Raises:
        RejectedError: an entry breaks a rule.
    """
    records = []
    for entry in entries:
        text = join_properties(entry.properties, extra_properties)
        args = (extra_bytes, max_body_bytes, index_max_entries, tags_codes)
        records.append(build_record(topic, entry.body, entry.flag, text, *args))
    return records


def _bad_queue_id(queue_id: int) -> RejectedError:
    return RejectedError(PutStatus.MESSAGE_ILLEGAL, f"queue id {queue_id} out of range")


def _not_utf8(what: str) -> RejectedError:
    # A lone surrogate would be stored, then every reader (consumers, recovery) would refuse
    # the record: recovery would cut the log there, acknowledged records after it included.
    return RejectedError(PutStatus.MESSAGE_ILLEGAL, f"{what} cannot be encoded as UTF-8")


def _too_big(total_size: int) -> RejectedError:
    return RejectedError(
        PutStatus.MESSAGE_ILLEGAL, f"{total_size} bytes of records do not fit a commit-log segment"
    )


# The compiled twins (bolide/store/_records.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(
    globals(), "bolide.store._compiled", ("PreparedRecord", "build_record", "build_records")
)

"""A slave's side of the commit log: bytes copied from a master, at the master's offsets.

The master streams raw commit-log bytes (broker/ha) cut at arbitrary points, never across a
segment end. The replica keeps the tail of a record that has not fully arrived in memory and
writes only whole records, each at the offset the master stored it:

```
stream:   ...| rec A (whole) | rec B (whole) | rec C (first part) |      <- one frame
                                             ^ log end (max_offset)   ^ end_offset
                                               rec C waits in memory until its last byte
```

So the log on disk always ends on a record boundary, as on a master: the queue flush and the
checkpoint never point inside a record, and a slave killed mid-transfer recovers exactly as a
master does, then asks the master for everything after its last whole record.

Every record is checked before it is written (magic, lengths, the PHYSICALOFFSET field equal to
where it goes, the body CRC): a stream out of step or garbage raises ReplicaOffsetError and
nothing of it is written. Written records get their consume-queue and index entries the way
recovery rebuilds them (same helpers, dispatch.py), and the arrival listeners hear of them, so
long-polling pulls on the slave are answered as soon as a message is copied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from bolide.base import limits
from bolide.base.errors import ProtocolError, ReplicaOffsetError
from bolide.protocol.record import (
    BLANK_MAGIC_CODE,
    DELAY_MARK,
    KEYS_MARK,
    MESSAGE_MAGIC_CODE,
    PROPERTY_SEPARATOR,
    RECORD_PREFIX,
    TAGS_MARK,
    UNIQ_KEY_MARK,
    RecordHeader,
    body_crc,
    property_value,
    read_record_header,
)
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import ArrivalListener
from bolide.store.commit_log import CommitLog
from bolide.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from bolide.store.dispatch import gets_queue_entry, index_hashes, queue_tags_code
from bolide.store.index_file import KeyIndex, index_key_seed

__all__ = ["ReplicaWriter"]

_log = logging.getLogger("bolide.store.replica")

_PREFIX: Final = RECORD_PREFIX


class ReplicaWriter:
    """Appends replicated bytes to one store's commit log and dispatches whole records.

    ``listeners`` and ``dirty_queues`` are the store's (the appender's) own: arrivals wake
    long polls, dirty queues are flushed by the store's queue flush.
    """

    def __init__(
        self,
        *,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: KeyIndex,
        delay_levels_ms: tuple[int, ...],
        listeners: list[ArrivalListener],
        dirty_queues: Callable[[], set[ConsumeQueue]],
    ) -> None:
        self._commit_log = commit_log
        self._queues = queues
        self._index = index
        self._delay_levels_ms = delay_levels_ms
        self._listeners = listeners
        self._dirty_queues = dirty_queues
        self._pending = b""
        self._tags_codes: dict[str, int] = {}
        self._key_seeds: dict[str, int] = {}
        self.records_copied = 0
        self.bytes_copied = 0

    @property
    def end_offset(self) -> int:
        """Where the next replicated byte goes: the log's end plus a partial record held."""
        return self._commit_log.max_offset + len(self._pending)

    def _may_start_at(self, offset: int) -> bool:
        """An empty log takes its first bytes at any segment start (a new slave copies from
        the master's last segment, not from 0)."""
        log = self._commit_log
        return not log.segments and not self._pending and offset % log.segment_bytes == 0

    def in_step(self, offset: int) -> bool:
        """Whether bytes (or a heartbeat) at ``offset`` continue this log."""
        return offset == self.end_offset or self._may_start_at(offset)

    def forget_pending(self) -> None:
        """Drop a partial record (the stream broke; the master sends it again from the log's
        end, which is what a reconnecting slave reports)."""
        self._pending = b""

    def append(self, offset: int, data: bytes | memoryview) -> int:
        """Take ``data``, which the master holds at ``offset``; returns :attr:`end_offset`.

        Raises:
            ReplicaOffsetError: ``offset`` is not :attr:`end_offset`, or a record is unsound;
                the records before the bad one are written, the rest is dropped.
            DiskFullError, StoreIOError: a record could not be written (nor any after it).
        """
        if offset != self.end_offset and not self._may_start_at(offset):
            raise ReplicaOffsetError(
                f"master sent bytes at {offset}, this log continues at {self.end_offset}"
            )
        record_offset = offset - len(self._pending)  # where the buffer's first record goes
        buffer = self._pending + bytes(data) if self._pending else bytes(data)
        self._pending = b""
        view = memoryview(buffer)
        cursor = 0
        try:
            while len(buffer) - cursor >= limits.COMMIT_LOG_BLANK_MIN_BYTES:
                total_size, magic = _PREFIX.unpack_from(buffer, cursor)
                if magic not in (MESSAGE_MAGIC_CODE, BLANK_MAGIC_CODE) or not (
                    limits.COMMIT_LOG_BLANK_MIN_BYTES
                    <= total_size
                    <= self._commit_log.segment_bytes
                ):
                    raise ReplicaOffsetError(
                        f"no record at {record_offset}: size {total_size}, magic {magic:#x}"
                    )
                if len(buffer) - cursor < total_size:
                    break
                record = view[cursor : cursor + total_size]
                self._write(record_offset, record, magic == BLANK_MAGIC_CODE)
                cursor += total_size
                record_offset += total_size
        except BaseException:
            self._pending = b""
            raise
        self._pending = buffer[cursor:]
        self.bytes_copied += len(data)
        return self.end_offset

    def _write(self, offset: int, record: memoryview, blank: bool) -> None:
        commit_log = self._commit_log
        if blank:
            commit_log.append_copied(offset, record, blank=True)
            return
        try:
            header = read_record_header(record)
            properties = str(
                record[
                    header.properties_offset : header.properties_offset + header.properties_length
                ],
                "utf-8",
            )
        except (ProtocolError, UnicodeDecodeError) as error:
            raise ReplicaOffsetError(f"unreadable record at {offset}: {error}") from error
        if header.commit_log_offset != offset:
            raise ReplicaOffsetError(
                f"record for {header.commit_log_offset} arrived at {offset}: stream out of step"
            )
        body = record[header.body_offset : header.body_offset + header.body_length]
        if body_crc(body) != header.body_crc:
            raise ReplicaOffsetError(f"body CRC mismatch in the record at {offset}")
        commit_log.append_copied(offset, record, blank=False)
        self.records_copied += 1
        self._dispatch(header, offset, PROPERTY_SEPARATOR + properties)

    def _dispatch(self, header: RecordHeader, offset: int, padded_properties: str) -> None:
        """Consume-queue and index entries of a copied record, as recovery makes them."""
        topic = header.topic
        if gets_queue_entry(header.sys_flag):
            queue = self._queues.get_or_create(topic, header.queue_id)
            if header.queue_offset >= queue.max_offset:
                self._queue_entry(queue, header, offset, padded_properties)
        key_seed = self._key_seeds.get(topic)
        if key_seed is None:
            key_seed = index_key_seed(topic)
            if len(self._key_seeds) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
                self._key_seeds[topic] = key_seed
        keys = (
            property_value(padded_properties, KEYS_MARK) if KEYS_MARK in padded_properties else None
        )
        unique_key = property_value(padded_properties, UNIQ_KEY_MARK)
        hashes = index_hashes(key_seed, keys, unique_key, self._index.max_entries)
        if hashes:
            self._index.prepare_one(offset, len(hashes))
            self._index.add_record(offset, header.store_timestamp_ms, hashes)

    def _queue_entry(
        self, queue: ConsumeQueue, header: RecordHeader, offset: int, padded_properties: str
    ) -> None:
        if header.queue_offset > queue.max_offset:
            if queue.max_offset == queue.min_offset:
                queue.restart_at(header.queue_offset)  # a slave that started mid-log
            else:
                _log.error(
                    "replica queue %s/%d misses entries %d..%d",
                    header.topic,
                    header.queue_id,
                    queue.max_offset,
                    header.queue_offset - 1,
                )
        tags_code = queue_tags_code(
            header.topic,
            property_value(padded_properties, TAGS_MARK),
            property_value(padded_properties, DELAY_MARK)
            if header.topic == SCHEDULE_TOPIC
            else None,
            header.store_timestamp_ms,
            self._delay_levels_ms,
            self._tags_codes,
        )
        if queue.max_offset + 1 > queue.room_end_offset:
            queue.prepare_append(1)
        queue.append(offset, header.total_size, tags_code)
        self._dirty_queues().add(queue)
        for listener in self._listeners:
            try:
                listener(header.topic, header.queue_id, queue.max_offset, tags_code)
            except Exception:
                _log.exception("arrival listener failed")

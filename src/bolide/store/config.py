"""Store settings and the layout of the store directory (docs/protocol.md §4.4).

```
<store_path_root_dir>/
    commitlog/<20-digit start offset>              commit-log segments
    consumequeue/<topic>/<queue id>/<20-digit>     consume-queue files (start byte offset)
    index/<20-digit first commit-log offset>       key index files
    checkpoint                                     flushed points (checkpoint.py)
    abort                                          present while a store runs
    config/{topics,subscriptionGroup,consumerOffset,delayOffset}.json   (config_files.py)
```
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from bolide.base import limits
from bolide.base.errors import ConfigError

"""Delayed messages wait here; their consume-queue tags code is the delivery time."""

_INT32_MAX = 2**31 - 1
_SECOND_MS = 1_000
_MINUTE_MS = 60 * _SECOND_MS
_HOUR_MS = 60 * _MINUTE_MS

DEFAULT_DELAY_LEVELS_MS: tuple[int, ...] = (
    *(second * _SECOND_MS for second in (1, 5, 10, 30)),
    *(minute * _MINUTE_MS for minute in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30)),
    *(hour * _HOUR_MS for hour in (1, 2)),
)
"""RocketMQ's messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"."""


DEFAULT_DELETE_WHEN_HOURS = frozenset({4})
"""RocketMQ's deleteWhen "04": expired segments go at 04:00 local time."""


class FlushDiskType(enum.Enum):
    """When a put counts as stored (RocketMQ's flushDiskType)."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    """A put returns once the record is in the page cache; a background loop fsyncs."""
    SYNC_FLUSH = "SYNC_FLUSH"
    """A put returns after the fsync that covers it (group commit)."""


def parse_delete_when(text: str) -> frozenset[int]:
    """Parse RocketMQ's deleteWhen, hours of the day separated by ``;`` (``"04"``, ``"02;14"``).

    Raises:
        ConfigError: empty, not a number, or outside 0..23.
    """
    hours: set[int] = set()
    for piece in text.split(";"):
        piece = piece.strip()
        if not piece.isdigit() or not 0 <= int(piece) <= 23:
            raise ConfigError(f"deleteWhen must be hours 0..23 separated by ';', not {text!r}")
        hours.add(int(piece))
    return frozenset(hours)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Settings of one store. Defaults are RocketMQ 4.9's; tests shrink the sizes.

    ``store_path_root_dir`` is the ``store`` directory itself (storePathRootDir).
    """

    store_path_root_dir: Path
    commit_log_segment_bytes: int = limits.COMMIT_LOG_SEGMENT_BYTES
    consume_queue_file_entries: int = limits.CONSUME_QUEUE_FILE_ENTRIES
    index_hash_slots: int = limits.INDEX_HASH_SLOTS
    index_file_max_entries: int = limits.INDEX_FILE_MAX_ENTRIES
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log_ms: int = limits.FLUSH_INTERVAL_COMMIT_LOG_MS
    flush_interval_consume_queue_ms: int = limits.FLUSH_INTERVAL_CONSUME_QUEUE_MS
    sync_flush_timeout_ms: int = limits.SYNC_FLUSH_TIMEOUT_MS
    file_reserved_time_ms: int = limits.FILE_RESERVED_TIME_MS
    delete_when_hours: frozenset[int] = DEFAULT_DELETE_WHEN_HOURS
    disk_max_used_space_ratio_percent: int = limits.DISK_MAX_USED_SPACE_RATIO_PERCENT
    disk_space_clean_forcibly_ratio_percent: int = limits.DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT
    clean_file_forcibly_enable: bool = True
    retention_check_interval_ms: int = limits.RETENTION_CHECK_INTERVAL_MS
    max_message_size_bytes: int = limits.MESSAGE_BODY_MAX_BYTES
    message_delay_levels_ms: tuple[int, ...] = field(default=DEFAULT_DELAY_LEVELS_MS)

    def validate(self) -> None:
        """Check every setting against its bounds.

        Raises:
            ConfigError: a setting is out of range.
        """
        _require(
            limits.COMMIT_LOG_SEGMENT_MIN_BYTES
            <= self.commit_log_segment_bytes
            <= _INT32_MAX,  # the blank marker's TOTALSIZE is an int32
            "commit_log_segment_bytes",
            self.commit_log_segment_bytes,
        )
        _require(
            2 <= self.consume_queue_file_entries <= limits.CONSUME_QUEUE_FILE_ENTRIES * 10,
            "consume_queue_file_entries",
            self.consume_queue_file_entries,
        )
        _require(
            1 <= self.index_hash_slots <= limits.INDEX_HASH_SLOTS * 4,
            "index_hash_slots",
            self.index_hash_slots,
        )
        _require(
            2 <= self.index_file_max_entries <= limits.INDEX_FILE_MAX_ENTRIES * 4,
            "index_file_max_entries",
            self.index_file_max_entries,
        )
        for name in (
            "flush_interval_commit_log_ms",
            "flush_interval_consume_queue_ms",
            "sync_flush_timeout_ms",
            "retention_check_interval_ms",
            "max_message_size_bytes",
        ):
            _require(getattr(self, name) > 0, name, getattr(self, name))
        _require(self.file_reserved_time_ms >= 0, "file_reserved_time_ms", 0)
        _require(
            0 < self.disk_max_used_space_ratio_percent < 100,
            "disk_max_used_space_ratio_percent",
            self.disk_max_used_space_ratio_percent,
        )
        _require(
            0 < self.disk_space_clean_forcibly_ratio_percent < 100,
            "disk_space_clean_forcibly_ratio_percent",
            self.disk_space_clean_forcibly_ratio_percent,
        )
        _require(
            all(0 <= hour <= 23 for hour in self.delete_when_hours),
            "delete_when_hours",
            sorted(self.delete_when_hours),
        )
        _require(
            0 < len(self.message_delay_levels_ms) <= limits.DELAY_LEVELS_MAX_COUNT
            and all(delay > 0 for delay in self.message_delay_levels_ms),
            "message_delay_levels_ms",
            self.message_delay_levels_ms,
        )

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def config_dir(self) -> Path:
        return self.store_path_root_dir / "config"


def _require(condition: bool, name: str, value: object) -> None:
    if not condition:
        raise ConfigError(f"store setting {name} out of range: {value!r}")


def segment_file_name(start_offset: int) -> str:
    """The 20-digit, zero-padded name of a file that starts at ``start_offset``."""
    return f"{start_offset:020d}"


def parse_segment_file_name(name: str) -> int | None:
    """The start offset a 20-digit file name stands for; None for any other name."""
    if len(name) == 20 and name.isdigit():
        return int(name)
    return None

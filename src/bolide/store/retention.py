"""Which commit-log segments to delete: a pure decision over segment ages and disk use.

The rule is RocketMQ's CleanCommitLogService. Segments go oldest first, never the one being
written, at most ``max_segments_per_run`` a run:

* **expired** — its newest record is older than ``file_reserved_time_ms``. Checked at the hours
  of ``delete_when_hours`` (deleteWhen, default 04:00 local time), at an admin's request, and at
  any hour once the disk is fuller than ``disk_max_used_space_ratio_percent``
  (diskMaxUsedSpaceRatio, 75);
* **disk pressure** — the disk is fuller than ``disk_space_clean_forcibly_ratio_percent``
  (diskSpaceCleanForciblyRatio, 85) and ``clean_file_forcibly_enable`` is on: the oldest
  segments go whatever their age, until the projected use falls to that ratio.

A segment's newest record is taken as the first record of the segment after it (records are
appended in time order), which a restart can read back without scanning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bolide.base import limits
from bolide.store.config import StoreConfig
from bolide.store.file_ops import DiskUsage


@dataclass(frozen=True, slots=True)
class SegmentAge:
    """One commit-log segment as retention sees it."""

    start_offset: int
    disk_bytes: int
    """Bytes deleting it frees."""
    newest_store_timestamp_ms: int
    """Store time of its newest record (upper bound); -1 when unknown (never expires)."""


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    file_reserved_time_ms: int
    delete_when_hours: frozenset[int]
    disk_max_used_space_ratio_percent: int
    max_segments_per_run: int
    disk_space_clean_forcibly_ratio_percent: int = limits.DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT
    clean_file_forcibly_enable: bool = True


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    delete_count: int
    """How many of the oldest segments to delete."""
    reason: str
    """"expired", "disk pressure", both joined by " + ", or "" when nothing goes."""


def plan_retention(
    segments: Sequence[SegmentAge],
    *,
    now_ms: int,
    hour_of_day: int,
    disk: DiskUsage | None,
    policy: RetentionPolicy,
    manual: bool = False,
) -> RetentionDecision:
    """Decide how many of the oldest ``segments`` (oldest first) to delete now.

    ``disk`` None means disk use is unknown (no pressure assumed). ``manual`` (an admin's
    DELETE_EXPIRED_COMMITLOG) checks ages now whatever the hour. At most
    ``policy.max_segments_per_run`` segments and never the last one.
    """
    candidates = segments[: max(0, len(segments) - 1)][: policy.max_segments_per_run]
    if not candidates:
        return RetentionDecision(0, "")
    pressure = disk is not None and disk.used_percent > policy.disk_max_used_space_ratio_percent
    expired = 0
    if manual or pressure or hour_of_day in policy.delete_when_hours:
        for segment in candidates:
            newest = segment.newest_store_timestamp_ms
            if newest < 0 or now_ms - newest <= policy.file_reserved_time_ms:
                break
            expired += 1
    by_pressure = 0
    forcibly_percent = policy.disk_space_clean_forcibly_ratio_percent
    if (
        policy.clean_file_forcibly_enable
        and disk is not None
        and disk.used_percent > forcibly_percent
    ):
        used = disk.used_bytes
        limit_bytes = disk.total_bytes * forcibly_percent / 100
        for segment in candidates:
            if used <= limit_bytes:
                break
            used -= segment.disk_bytes
            by_pressure += 1
    reasons = [
        name for name, count in (("expired", expired), ("disk pressure", by_pressure)) if count
    ]
    return RetentionDecision(max(expired, by_pressure), " + ".join(reasons))


def local_hour_of_day(now_ms: int) -> int:
    """The hour (0..23, local time zone) of ``now_ms``: deleteWhen is local time, as in
    RocketMQ."""
    return time.localtime(now_ms / 1000).tm_hour


def policy_of(config: StoreConfig) -> RetentionPolicy:
    return RetentionPolicy(
        file_reserved_time_ms=config.file_reserved_time_ms,
        delete_when_hours=config.delete_when_hours,
        disk_max_used_space_ratio_percent=config.disk_max_used_space_ratio_percent,
        max_segments_per_run=limits.RETENTION_DELETE_SEGMENTS_MAX_COUNT,
        disk_space_clean_forcibly_ratio_percent=config.disk_space_clean_forcibly_ratio_percent,
        clean_file_forcibly_enable=config.clean_file_forcibly_enable,
    )


def segment_ages(
    segments: Sequence[tuple[int, int]], first_store_timestamp: Callable[[int], int]
) -> list[SegmentAge]:
    """Ages of ``segments`` = [(start offset, disk bytes)], oldest first: each one's newest
    record is dated by the first record of the next (``first_store_timestamp(start)``, -1
    unknown); the last one has no date (it is being written)."""
    return [
        SegmentAge(
            start_offset=start,
            disk_bytes=disk_bytes,
            newest_store_timestamp_ms=(
                first_store_timestamp(segments[number + 1][0]) if number + 1 < len(segments) else -1
            ),
        )
        for number, (start, disk_bytes) in enumerate(segments)
    ]


def decide(
    config: StoreConfig,
    segments: Sequence[tuple[int, int]],
    first_store_timestamp: Callable[[int], int],
    now_ms: int,
    disk: DiskUsage | None,
    manual: bool = False,
) -> RetentionDecision:
    """:func:`plan_retention` for a store's settings, at local hour of ``now_ms``."""
    return plan_retention(
        segment_ages(segments, first_store_timestamp),
        now_ms=now_ms,
        hour_of_day=local_hour_of_day(now_ms),
        disk=disk,
        policy=policy_of(config),
        manual=manual,
    )

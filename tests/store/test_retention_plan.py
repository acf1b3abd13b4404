from __future__ import annotations

import os
from dataclasses import replace

import pytest

from bolide.store.file_ops import DiskUsage, disk_usage_of
from bolide.store.retention import RetentionPolicy, SegmentAge, plan_retention

HOUR_MS = 3_600_000
POLICY = RetentionPolicy(
    file_reserved_time_ms=72 * HOUR_MS,
    delete_when_hours=frozenset({4}),
    disk_max_used_space_ratio_percent=75,
    max_segments_per_run=10,
)


def _segments(*newest_hours_ago: float, now_ms: int) -> list[SegmentAge]:
    return [
        SegmentAge(i * 100, 100, -1 if age < 0 else int(now_ms - age * HOUR_MS))
        for i, age in enumerate(newest_hours_ago)
    ]


def test_expired_prefix_goes_at_the_delete_hour_only() -> None:
    now = 1_000 * HOUR_MS
    segments = _segments(100, 80, 50, 90, -1, now_ms=now)
    calm = DiskUsage(1000, 100)
    assert (
        plan_retention(segments, now_ms=now, hour_of_day=4, disk=calm, policy=POLICY).delete_count
        == 2
    )
    assert (
        plan_retention(segments, now_ms=now, hour_of_day=5, disk=calm, policy=POLICY).delete_count
        == 0
    )


def test_the_last_segment_never_goes() -> None:
    now = 1_000 * HOUR_MS
    segments = _segments(100, 100, now_ms=now)
    decision = plan_retention(segments, now_ms=now, hour_of_day=4, disk=None, policy=POLICY)
    assert (decision.delete_count, decision.reason) == (1, "expired")
    assert (
        plan_retention(
            segments[:1], now_ms=now, hour_of_day=4, disk=None, policy=POLICY
        ).delete_count
        == 0
    )


def test_disk_pressure_deletes_young_segments_at_any_hour() -> None:
    # Above diskSpaceCleanForciblyRatio (85 %) the oldest go until the use is back at 85 %.
    now = 1_000 * HOUR_MS
    segments = _segments(1, 1, 1, 1, 1, now_ms=now)
    decision = plan_retention(
        segments, now_ms=now, hour_of_day=13, disk=DiskUsage(1000, 960), policy=POLICY
    )
    assert (decision.delete_count, decision.reason) == (2, "disk pressure")
    for used in (750, 800, 850):
        calm = plan_retention(
            segments, now_ms=now, hour_of_day=13, disk=DiskUsage(1000, used), policy=POLICY
        )
        assert calm.delete_count == 0, used
    unforced = replace(POLICY, clean_file_forcibly_enable=False)
    decision = plan_retention(
        segments, now_ms=now, hour_of_day=13, disk=DiskUsage(1000, 960), policy=unforced
    )
    assert decision.delete_count == 0


def test_a_disk_above_max_used_ratio_deletes_expired_segments_at_any_hour() -> None:
    # Between diskMaxUsedSpaceRatio (75 %) and 85 % RocketMQ deletes by age outside deleteWhen,
    # but nothing younger than fileReservedTime.
    now = 1_000 * HOUR_MS
    segments = _segments(100, 80, 50, 90, -1, now_ms=now)
    filling = DiskUsage(1000, 800)
    decision = plan_retention(segments, now_ms=now, hour_of_day=13, disk=filling, policy=POLICY)
    assert (decision.delete_count, decision.reason) == (2, "expired")
    calm = DiskUsage(1000, 700)
    assert (
        plan_retention(segments, now_ms=now, hour_of_day=13, disk=calm, policy=POLICY).delete_count
        == 0
    )


def test_one_run_is_bounded() -> None:
    now = 1_000 * HOUR_MS
    segments = _segments(*([200] * 30), now_ms=now)
    decision = plan_retention(segments, now_ms=now, hour_of_day=4, disk=None, policy=POLICY)
    assert decision.delete_count == 10


def _statvfs(*, blocks: int, free: int, available: int) -> os.statvfs_result:
    # (bsize, frsize, blocks, bfree, bavail, files, ffree, favail, flag, namemax)
    return os.statvfs_result((4096, 4096, blocks, free, available, 0, 0, 0, 0, 255))


@pytest.mark.parametrize(
    ("blocks", "free", "available", "percent"),
    [
        # Root's reserve is in neither part, as df counts it: 80 used of 80 + 15.
        (100, 20, 15, 100 * 80 / 95),
        # A thin disk that says 270 but can take only 79 more, 30 used (seen on this project's
        # machines): 28 %, as df and RocketMQ say, not the 71 % that size minus room gives.
        (270, 240, 79, 100 * 30 / 109),
        (100, 100, 100, 0.0),
    ],
)
def test_disk_use_is_counted_as_rocketmq_and_df_count_it(
    blocks: int, free: int, available: int, percent: float
) -> None:
    usage = disk_usage_of(_statvfs(blocks=blocks, free=free, available=available))
    assert usage.used_percent == pytest.approx(percent)
    assert usage.used_bytes == (blocks - free) * 4096

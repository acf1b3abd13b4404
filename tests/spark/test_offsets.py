"""The pure parts of the source: options, offset documents, trigger limits, batch planning."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.protocol.bodies import MessageQueue
from bolide.spark.offsets import (
    QueueBounds,
    QueueRange,
    from_spark_offset,
    plan_batch,
    plan_ranges,
    resolve_offsets,
    split_limit,
    split_ranges,
    to_spark_offset,
)
from bolide.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    parse_duration_ms,
    parse_read_options,
    parse_write_options,
)

Q0 = MessageQueue("t", "b", 0)
Q1 = MessageQueue("t", "b", 1)
Q2 = MessageQueue("t", "b", 2)


def test_read_options_defaults_differ_for_batch_and_streaming() -> None:
    raw = {"namesrv": "127.0.0.1:9876", "topic": " a , b,a "}
    streaming = parse_read_options(raw, streaming=True)
    batch = parse_read_options(raw, streaming=False)
    assert streaming.topics == ("a", "b")
    assert streaming.starting == OffsetSpec(LATEST)
    assert batch.starting == OffsetSpec(EARLIEST)
    assert batch.ending == OffsetSpec(LATEST)
    assert batch.pull_batch_size == limits.SPARK_PULL_BATCH_DEFAULT_MESSAGES
    assert batch.fail_on_data_loss is True
    assert batch.tags == "*" and batch.tag_set == frozenset()
    assert batch.max_trigger_delay_ms == limits.SPARK_MAX_TRIGGER_DELAY_DEFAULT_MS
    assert batch.pull_group == "bolide-spark-reader"


def test_read_options_arrive_lower_cased_from_spark() -> None:
    options = parse_read_options(
        {
            "namesrv": "h:1",
            "topic": "t",
            "startingoffsets": '{"t": {"b": {"0": 5, "1": -2}}}',
            "maxoffsetspertrigger": "100",
            "minmessagespertrigger": "10",
            "maxtriggerdelay": "30s",
            "pullbatchsize": "16",
            "failondataloss": "False",
            "tags": "A || B ||A",
            "group": "g",
        },
        streaming=True,
    )
    assert options.starting.offsets == {Q0: 5, Q1: EARLIEST}
    assert options.starting.offset_for(Q2) == LATEST
    batch = {"namesrv": "h:1", "topic": "t", "endingoffsets": '{"t": {"b": {"0": 9}}}'}
    assert parse_read_options(batch, streaming=False).ending.offsets == {Q0: 9}
    assert options.max_messages_per_trigger == 100
    assert options.min_messages_per_trigger == 10
    assert options.max_trigger_delay_ms == 30_000
    assert options.pull_batch_size == 16
    assert options.fail_on_data_loss is False
    assert options.tag_set == frozenset({"A", "B"})
    assert options.pull_group == "g"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t"}, "namesrv is required"),
        ({"namesrv": "h:1"}, "topic is required"),
        ({"namesrv": "h:1", "topic": "t", "startingOffsets": "{bad"}, "valid JSON"),
        ({"namesrv": "h:1", "topic": "t", "startingOffsets": '{"u": {"b": {"0": 1}}}'}, "names"),
        ({"namesrv": "h:1", "topic": "t", "startingOffsets": '{"t": {"b": {"x": 1}}}'}, "queue"),
        ({"namesrv": "h:1", "topic": "t", "startingOffsets": '{"t": {"b": {"0": -3}}}'}, "-2"),
        ({"namesrv": "h:1", "topic": "t", "endingOffsets": "earliest"}, "cannot be earliest"),
        ({"namesrv": "h:1", "topic": "t", "endingOffsets": '{"t": {"b": {"0": -2}}}'}, "-2"),
        ({"namesrv": "h:1", "topic": "t", "maxMessagesPerTrigger": "0"}, "at least 1"),
        ({"namesrv": "h:1", "topic": "t", "maxMessagesPerTrigger": "x"}, "integer"),
        (
            {
                "namesrv": "h:1",
                "topic": "t",
                "maxMessagesPerTrigger": "5",
                "minMessagesPerTrigger": "6",
            },
            "must not exceed",
        ),
        ({"namesrv": "h:1", "topic": "t", "pullBatchSize": "5000"}, "at most"),
        ({"namesrv": "h:1", "topic": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({"namesrv": "h:1", "topic": "t", "maxTriggerDelay": "soon"}, "duration"),
        ({"namesrv": "h:1", "topic": "t", "tags": "||"}, "no tag"),
        ({"namesrv": "h:1", "subscribePattern": "orders-("}, "not a valid regex"),
        ({"namesrv": "h:1", "topic": "t", "subscribePattern": "t.*"}, "not both"),
        ({"namesrv": "h:1", "topic": "t", "minPartitions": "0"}, "minPartitions must be at"),
        ({"namesrv": "h:1", "topic": "t", "maxRecordsPerPartition": "x"}, "an integer"),
        (
            {"namesrv": "h:1", "topic": "t", "startingOffsetsByTimestamp": '{"t":{"b":{"0":-1}}}'},
            "ms since the epoch",
        ),
        (
            {"namesrv": "h:1", "subscribePattern": "t.*", "startingOffsetsByTimestamp": '{"u":{}}'},
            "names no queue",
        ),
        (
            {"namesrv": "h:1", "subscribePattern": "t.*", "endingOffsetsByTimestamp": "{}"},
            "names no queue",
        ),
        (
            {"namesrv": "h:1", "subscribePattern": "t.*", "endingOffsetsByTimestamp": '{"u":'},
            "endingOffsetsByTimestamp is not valid JSON",
        ),
        (
            {"namesrv": "h:1", "subscribePattern": "t.*", "startingOffsets": '{"u":{"b":{"0":1}}}'},
            "subscribePattern option does not",
        ),
    ],
)
def test_bad_read_options_are_config_errors(options: dict[str, str], message: str) -> None:
    streaming = not any(name.startswith("ending") for name in options)
    with pytest.raises(ConfigError, match=message):
        parse_read_options(options, streaming=streaming)


def test_kafka_style_options_are_parsed() -> None:
    options = parse_read_options(
        {"namesrv": "h:1", "subscribepattern": "t|u-.*", "minpartitions": "6",
         "maxrecordsperpartition": "100",
         "startingoffsets": '{"t": {"b": {"0": 5}}}',
         "startingoffsetsbytimestamp": '{"t": {"b": {"1": 1700000000000}}}',
         "endingoffsetsbytimestamp": '{"u-1": {"b": {"0": 1700000009000}}}'},
        streaming=False,
    )  # fmt: skip
    assert options.topics == () and options.topic_pattern == "t|u-.*"
    assert options.covers("t") and options.covers("u-1") and not options.covers("tt")
    assert (options.min_partitions, options.max_records_per_partition) == (6, 100)
    assert options.starting.offset_for(Q0) == 5 and options.starting.timestamp_for(Q0) is None
    assert options.starting.timestamp_for(Q1) == 1_700_000_000_000
    assert options.ending.timestamp_for(MessageQueue("u-1", "b", 0)) == 1_700_000_009_000
    for name in ("endingOffsets", "endingOffsetsByTimestamp"):
        with pytest.raises(ConfigError, match=f"option {name} applies to batch reads only"):
            parse_read_options({"namesrv": "h:1", "topic": "t", name: "latest"}, streaming=True)


def test_write_options() -> None:
    options = parse_write_options({"namesrv": "h:1", "sendtimeoutms": "500"})
    assert (options.topic, options.group, options.send_timeout_ms) == (
        None,
        "bolide-spark-writer",
        500,
    )
    with pytest.raises(ConfigError, match="namesrv"):
        parse_write_options({"topic": "t"})


def test_durations() -> None:
    assert [parse_duration_ms(text, "d") for text in ("250", "250ms", "2s", "3m", "1h")] == [
        250,
        250,
        2_000,
        180_000,
        3_600_000,
    ]


def test_spark_offsets_round_trip_with_string_keys_in_sorted_order() -> None:
    offsets = {Q1: 7, Q0: 3, MessageQueue("a", "z", 10): 1}
    document = to_spark_offset(offsets)
    assert list(document) == ["a", "t"]
    assert document["t"] == {"b": {"0": 3, "1": 7}}
    assert from_spark_offset(document) == offsets
    with pytest.raises(ConfigError):
        from_spark_offset({"t": {"b": {"0": -1}}})


backlogs = st.dictionaries(
    st.builds(MessageQueue, st.just("t"), st.sampled_from(["a", "b"]), st.integers(0, 20)),
    st.integers(0, 10_000),
    max_size=30,
)


@given(backlogs, st.integers(1, 50_000), st.integers(0, 100))
def test_split_limit_respects_the_cap_and_starves_no_queue(
    backlog: dict[MessageQueue, int], limit: int, rotation: int
) -> None:
    takes = split_limit(backlog, limit, rotation)
    active = [queue for queue, count in backlog.items() if count > 0]
    assert sum(takes.values()) == min(limit, sum(backlog.values()))
    assert all(0 < takes[queue] <= backlog[queue] for queue in takes)
    if limit >= len(active):
        assert set(takes) == set(active), "a queue with a backlog got nothing"


def test_split_limit_is_proportional() -> None:
    takes = split_limit({Q0: 1_000, Q1: 100, Q2: 0}, 110)
    assert takes == {Q0: 100, Q1: 10}
    assert split_limit({Q0: 5, Q1: 5, Q2: 5}, 2, rotation=1) == {Q1: 1, Q2: 1}
    assert split_limit({Q0: 5, Q1: 5, Q2: 5}, 2, rotation=2) == {Q2: 1, Q0: 1}


def test_resolve_offsets() -> None:
    bounds = {Q0: QueueBounds(5, 10), Q1: QueueBounds(0, 3)}
    assert resolve_offsets(OffsetSpec(EARLIEST), bounds) == {Q0: 5, Q1: 0}
    assert resolve_offsets(OffsetSpec(LATEST, {Q0: 7}), bounds) == {Q0: 7, Q1: 3}
    by_time = OffsetSpec(LATEST, {}, timestamp_ms=1)
    assert resolve_offsets(by_time, bounds, {Q0: 6, Q1: 1}) == {Q0: 6, Q1: 1}


def test_plan_batch_rules() -> None:
    bounds = {Q0: QueueBounds(0, 50), Q1: QueueBounds(20, 30), Q2: QueueBounds(0, 4)}
    start = {Q0: 10, Q1: 5, MessageQueue("t", "gone", 0): 8}
    plan = plan_batch(start, bounds)
    # Q2 is new: it enters at its min offset with nothing read; Q1 lost 5..19.
    assert plan.end == {Q0: 50, Q1: 30, Q2: 0}
    assert len(plan.losses) == 2
    assert "t/gone/0 no longer exists" in plan.losses[0]
    assert "5..19 were deleted" in plan.losses[1]
    assert plan.backlog == 50
    capped = plan_batch({Q0: 10, Q1: 20, Q2: 0}, bounds, max_rows=11)
    assert sum(capped.end[q] - s for q, s in {Q0: 10, Q1: 20, Q2: 0}.items()) == 11
    available_now = plan_batch({Q0: 10, Q1: 20}, bounds, caps={Q0: 12})
    assert available_now.end == {Q0: 12, Q1: 20, Q2: 0}
    past_end = plan_batch({Q2: 9}, {Q2: QueueBounds(0, 4)})
    assert past_end.end == {Q2: 4} and "past the queue's end" in past_end.losses[0]


def test_plan_ranges_skips_new_and_empty_queues() -> None:
    ranges = plan_ranges({Q0: 3, Q1: 5}, {Q0: 9, Q1: 5, Q2: 0})
    assert ranges == [QueueRange(Q0, 3, 9)]
    assert ranges[0].size == 6


def _range(queue: MessageQueue, start: int, end: int) -> QueueRange:
    return QueueRange(queue, start, end)


def test_split_ranges_leaves_ranges_alone_unless_asked() -> None:
    ranges = [_range(Q0, 0, 100), _range(Q1, 5, 5), _range(Q2, 0, 10)]
    assert split_ranges(ranges) == [ranges[0], ranges[2]]
    assert split_ranges(ranges, min_partitions=2, max_records=100) == [ranges[0], ranges[2]]


def test_min_partitions_splits_large_ranges_in_proportion() -> None:
    # Q2's share of 4 parts rounds to 1: it stays whole; Q0 and Q1 share the other 3.
    ranges = [_range(Q0, 0, 600), _range(Q1, 100, 400), _range(Q2, 0, 50)]
    split = split_ranges(ranges, min_partitions=4)
    assert [(r.queue, r.start_offset, r.end_offset) for r in split] == [
        (Q0, 0, 300),
        (Q0, 300, 600),
        (Q1, 100, 400),
        (Q2, 0, 50),
    ]
    many = split_ranges([_range(Q0, 0, 10)], min_partitions=4)
    assert [r.size for r in many] == [2, 2, 3, 3]
    assert split_ranges([_range(Q0, 0, 2)], min_partitions=5) == [
        _range(Q0, 0, 1),
        _range(Q0, 1, 2),
    ]


def test_max_records_per_partition_caps_every_range() -> None:
    ranges = [_range(Q0, 0, 250), _range(Q1, 0, 99)]
    split = split_ranges(ranges, max_records=100)
    assert [(r.queue, r.size) for r in split] == [(Q0, 83), (Q0, 83), (Q0, 84), (Q1, 99)]
    assert split[0].start_offset == 0 and split[2].end_offset == 250
    both = split_ranges(ranges, min_partitions=8, max_records=100)
    assert sum(r.size for r in both) == 349 and max(r.size for r in both) <= 100
    assert len(both) >= 8 - 1

"""ConsumerOptions: its defaults are base/limits' (and the consumers', unchanged), each range
check refuses by name, a consumer refuses the other kind's knobs and the old keywords, and
both consumers act on what the options say (against an in-process cluster)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

import bolide
from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateStrategy,
)
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.options import (
    LITE_PULL_ONLY_OPTIONS,
    PUSH_ONLY_OPTIONS,
    ConsumerOptions,
)
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

NAMESRV = "127.0.0.1:9876"  # never contacted: the consumers below are only constructed
TOPIC = "Tuned"
WAIT_S = 30.0


# ---- defaults ------------------------------------------------------------------------------


DEFAULTS: dict[str, Any] = {
    "allocate_strategy": None,  # averagely
    "pull_batch_size": None,  # each consumer's own default
    "pull_threshold_messages": limits.PROCESS_QUEUE_MAX_MESSAGES,
    "pull_threshold_bytes": limits.PROCESS_QUEUE_MAX_BYTES,
    "max_span_offsets": limits.PROCESS_QUEUE_MAX_SPAN_OFFSETS,
    "offset_base_directory": None,  # ~/.bolide
    "consume_thread_max": limits.CONSUME_THREAD_MAX_COUNT,
    "consume_batch_max_size": limits.CONSUME_BATCH_MAX_MESSAGES,
    "max_reconsume_times": -1,
    "consume_timeout_ms": limits.CONSUME_TIMEOUT_MS,
    "suspend_time_ms": limits.ORDERLY_SUSPEND_DEFAULT_MS,
    "lock_renew_interval_ms": limits.CLIENT_LOCK_RENEW_INTERVAL_MS,
    "client_lock_max_live_ms": limits.CLIENT_LOCK_MAX_LIVE_MS,
    "poll_timeout_ms": limits.LITE_PULL_POLL_TIMEOUT_MS,
    "auto_commit": True,
    "auto_commit_interval_ms": limits.LITE_PULL_AUTO_COMMIT_INTERVAL_MS,
    "cache_max_messages": limits.LITE_PULL_CACHE_MAX_MESSAGES,
}
"""Every option's default, as base/limits names it."""


def test_defaults_are_the_limits() -> None:
    assert dataclasses.asdict(ConsumerOptions()) == DEFAULTS


def test_consumers_without_options_keep_their_defaults() -> None:
    push = PushConsumer("G", NAMESRV)
    assert push.options == ConsumerOptions()
    assert isinstance(push.allocate_strategy, AllocateAveragely)
    assert push.pull_settings.batch_size == limits.PULL_BATCH_SIZE_MESSAGES
    assert push.pull_settings.max_cached_messages == limits.PROCESS_QUEUE_MAX_MESSAGES
    assert push.pull_settings.max_cached_bytes == limits.PROCESS_QUEUE_MAX_BYTES
    assert push.pull_settings.max_span_offsets == limits.PROCESS_QUEUE_MAX_SPAN_OFFSETS
    assert push.consume_thread_max == limits.CONSUME_THREAD_MAX_COUNT
    assert push.consume_batch_max_size == limits.CONSUME_BATCH_MAX_MESSAGES
    assert push.max_reconsume_times == limits.RECONSUME_DEFAULT_MAX_TIMES
    assert push.orderly_max_reconsume_times is None
    assert push.consume_timeout_ms == limits.CONSUME_TIMEOUT_MS
    assert push.offset_base_directory == Path.home() / ".bolide"
    lite = PullConsumer("G", NAMESRV)
    assert isinstance(lite.allocate_strategy, AllocateAveragely)
    assert lite.pull_settings.batch_size == limits.LITE_PULL_BATCH_SIZE_MESSAGES
    assert lite.pull_settings.suspend_timeout_ms == limits.LITE_PULL_SUSPEND_TIMEOUT_MS
    assert lite.pull_settings.max_span_offsets == limits.PROCESS_QUEUE_MAX_SPAN_OFFSETS
    assert lite.poll_timeout_ms == limits.LITE_PULL_POLL_TIMEOUT_MS
    assert lite.auto_commit is True
    assert lite.auto_commit_interval_ms == limits.LITE_PULL_AUTO_COMMIT_INTERVAL_MS
    assert lite.cache_max_messages == limits.LITE_PULL_CACHE_MAX_MESSAGES
    assert lite.offset_base_directory == Path.home() / ".bolide"


# ---- range checks --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("pull_batch_size", 0),
        ("pull_batch_size", limits.CONSUME_BATCH_LIMIT_MESSAGES + 1),
        ("consume_thread_max", 0),
        ("consume_thread_max", limits.CONSUME_THREAD_LIMIT_COUNT + 1),
        ("consume_batch_max_size", 0),
        ("consume_batch_max_size", limits.CONSUME_BATCH_LIMIT_MESSAGES + 1),
        ("max_reconsume_times", -2),
        ("pull_threshold_messages", 0),
        ("pull_threshold_bytes", -1),
        ("max_span_offsets", 0),
        ("consume_timeout_ms", 0),
        ("poll_timeout_ms", 0),
        ("auto_commit_interval_ms", -5),
        ("cache_max_messages", 0),
        ("suspend_time_ms", limits.ORDERLY_SUSPEND_MIN_MS - 1),
        ("suspend_time_ms", limits.ORDERLY_SUSPEND_MAX_MS + 1),
        ("lock_renew_interval_ms", 0),
        ("lock_renew_interval_ms", limits.CLIENT_LOCK_MAX_LIVE_MS),
    ],
)
def test_a_value_out_of_range_is_refused_by_name(name: str, value: int) -> None:
    keywords: dict[str, Any] = {name: value}
    with pytest.raises(ConfigError, match=f"^{name} must be .*{value}"):
        ConsumerOptions(**keywords)


def test_a_lock_life_not_above_its_renewal_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"under client_lock_max_live_ms, not 20000 .* 20000"):
        ConsumerOptions(client_lock_max_live_ms=limits.CLIENT_LOCK_RENEW_INTERVAL_MS)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("pull_batch_size", 1),
        ("pull_batch_size", limits.CONSUME_BATCH_LIMIT_MESSAGES),
        ("consume_thread_max", 1),
        ("consume_thread_max", limits.CONSUME_THREAD_LIMIT_COUNT),
        ("consume_batch_max_size", limits.CONSUME_BATCH_LIMIT_MESSAGES),
        ("max_reconsume_times", 0),
        ("suspend_time_ms", limits.ORDERLY_SUSPEND_MIN_MS),
        ("suspend_time_ms", limits.ORDERLY_SUSPEND_MAX_MS),
        ("lock_renew_interval_ms", limits.CLIENT_LOCK_MAX_LIVE_MS - 1),
        ("pull_threshold_bytes", 1),
    ],
)
def test_the_edges_of_each_range_are_accepted(name: str, value: int) -> None:
    keywords: dict[str, Any] = {name: value}
    assert getattr(ConsumerOptions(**keywords), name) == value


def test_options_are_frozen_and_shareable() -> None:
    options = ConsumerOptions(pull_batch_size=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.pull_batch_size = 9  # type: ignore[misc]
    first = PushConsumer("A", NAMESRV, options=options)
    second = PullConsumer("B", NAMESRV, options=options)
    assert first.pull_settings.batch_size == second.pull_settings.batch_size == 8


# ---- refusals ------------------------------------------------------------------------------


def test_each_consumer_refuses_the_other_kinds_knobs_by_name() -> None:
    with pytest.raises(
        ConfigError, match=r"lite pull consumer .* consume_thread_max, suspend_time_ms$"
    ):
        PullConsumer(
            "G", NAMESRV, options=ConsumerOptions(consume_thread_max=4, suspend_time_ms=50)
        )
    with pytest.raises(ConfigError, match=r"push consumer .* auto_commit$"):
        PushConsumer("G", NAMESRV, options=ConsumerOptions(auto_commit=False))
    # set to their defaults they change nothing, so they pass
    PullConsumer("G", NAMESRV, options=ConsumerOptions(consume_thread_max=20))
    PushConsumer("G", NAMESRV, options=ConsumerOptions(auto_commit=True))


def test_every_knob_belongs_to_a_consumer_that_uses_it() -> None:
    names = {field.name for field in dataclasses.fields(ConsumerOptions)}
    assert names >= PUSH_ONLY_OPTIONS and names >= LITE_PULL_ONLY_OPTIONS
    assert not PUSH_ONLY_OPTIONS & LITE_PULL_ONLY_OPTIONS


@pytest.mark.parametrize(
    "consumer", [PushConsumer, PullConsumer, bolide.PushConsumer, bolide.PullConsumer]
)
def test_a_knob_as_a_keyword_is_no_longer_accepted(consumer: Any) -> None:
    with pytest.raises(TypeError, match="pull_batch_size"):
        consumer("G", NAMESRV, pull_batch_size=8)


def test_the_package_exports_the_options() -> None:
    assert bolide.ConsumerOptions is bolide.aio.ConsumerOptions is ConsumerOptions


# ---- what each consumer makes of them ------------------------------------------------------


SHARED_KNOBS: dict[str, Any] = {
    "pull_batch_size": 7,
    "pull_threshold_messages": 11,
    "pull_threshold_bytes": 12,
    "max_span_offsets": 13,
}
"""Values of the knobs both consumers use, each unlike its default."""


def _assert_shared_knobs_taken(
    consumer: PushConsumer | PullConsumer, strategy: AllocateStrategy, directory: Path
) -> None:
    assert consumer.allocate_strategy is strategy
    settings = consumer.pull_settings
    assert (settings.batch_size, settings.max_cached_messages) == (7, 11)
    assert (settings.max_cached_bytes, settings.max_span_offsets) == (12, 13)
    assert consumer.offset_base_directory == directory


def test_the_push_consumer_takes_every_knob_it_uses(tmp_path: Path) -> None:
    strategy = AllocateAveragelyByCircle()
    options = ConsumerOptions(
        allocate_strategy=strategy,
        offset_base_directory=tmp_path,
        consume_thread_max=3,
        consume_batch_max_size=4,
        max_reconsume_times=5,
        consume_timeout_ms=6_000,
        suspend_time_ms=50,
        lock_renew_interval_ms=1_000,
        client_lock_max_live_ms=2_000,
        **SHARED_KNOBS,
    )
    push = PushConsumer("G", NAMESRV, orderly=True, options=options)
    _assert_shared_knobs_taken(push, strategy, tmp_path)
    assert (push.consume_thread_max, push.consume_batch_max_size) == (3, 4)
    assert (push.max_reconsume_times, push.orderly_max_reconsume_times) == (5, 5)
    assert push.consume_timeout_ms == 6_000
    assert (push.suspend_time_ms, push.lock_renew_interval_ms) == (50, 1_000)
    assert push.client_lock_max_live_ms == 2_000
    properties = push.running_info().properties
    assert properties["consumeMessageBatchMaxSize"] == "4"
    assert properties["pullBatchSize"] == "7"


def test_the_lite_pull_consumer_takes_every_knob_it_uses(tmp_path: Path) -> None:
    strategy = AllocateAveragelyByCircle()
    options = ConsumerOptions(
        allocate_strategy=strategy,
        offset_base_directory=tmp_path,
        poll_timeout_ms=100,
        auto_commit=False,
        auto_commit_interval_ms=200,
        cache_max_messages=300,
        **SHARED_KNOBS,
    )
    lite = PullConsumer("G", NAMESRV, options=options)
    _assert_shared_knobs_taken(lite, strategy, tmp_path)
    assert (lite.poll_timeout_ms, lite.auto_commit) == (100, False)
    assert (lite.auto_commit_interval_ms, lite.cache_max_messages) == (200, 300)


async def _send(cluster: Cluster, count: int) -> None:
    async with AdminClient(cluster.namesrv_address) as admin:
        await admin.create_topic(TOPIC, queue_count=1)
    async with Producer("TunedProducers", cluster.namesrv_address) as producer:
        for index in range(count):
            await producer.send(Message(TOPIC, b"x", keys=f"k{index}"))


async def test_a_push_consumer_hands_over_batches_of_the_size_its_options_say(
    tmp_path: Path,
) -> None:
    sizes: list[int] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        sizes.append(len(messages))
        if sum(sizes) >= 8:
            done.set()
        return ConsumeResult.SUCCESS

    async with Cluster(tmp_path) as cluster:
        await _send(cluster, 8)  # all stored before the first pull, which brings all 8
        consumer = PushConsumer(
            "TunedReaders",
            cluster.namesrv_address,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            options=ConsumerOptions(consume_batch_max_size=4),
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        async with consumer:
            await asyncio.wait_for(done.wait(), WAIT_S)
    assert sum(sizes) == 8
    assert max(sizes) == 4, sizes  # one message per call by default


async def test_a_lite_pull_consumer_polls_batches_of_the_size_its_options_say(
    tmp_path: Path,
) -> None:
    async with Cluster(tmp_path) as cluster:
        await _send(cluster, 8)
        consumer = PullConsumer(
            "TunedPollers",
            cluster.namesrv_address,
            consume_from=ConsumeFrom.FIRST_OFFSET,
            options=ConsumerOptions(pull_batch_size=3, auto_commit=False),
        )
        await consumer.assign([MessageQueue(TOPIC, "broker-a", 0)])
        async with consumer:
            received: list[int] = []
            for _ in range(20):  # each poll waits at most its timeout: bounded
                batch = await consumer.poll(timeout_ms=5_000)
                received.append(len(batch))
                if sum(received) >= 8:
                    break
    assert sum(received) == 8
    assert max(received) == 3, received  # ten per pull and poll by default

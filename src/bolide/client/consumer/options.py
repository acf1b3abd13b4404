"""The tuning knobs of the push and the lite pull consumer, in one frozen value checked once.

::

    options = ConsumerOptions(consume_thread_max=4, max_reconsume_times=3)
    consumer = PushConsumer("billing", namesrv="127.0.0.1:9876", options=options)

The consumers keep as keywords of their own only who they are and where they start (name
server, instance, message model, ``consume_from``, orderly, credentials, TLS, trace,
namespace); everything that only tunes how they consume is here, with RocketMQ's defaults
(``base/limits.py``). A value is checked when the options are made, so one ``ConsumerOptions``
may be shared by many consumers.

Some knobs belong to one kind of consumer: the listener's (threads, batch per call, retries,
consume timeout) and the orderly ones to the push consumer, ``poll()`` and its commits to the
lite pull consumer. A consumer refuses, by name, options set away from their default that it
would not use (:meth:`ConsumerOptions.refuse_unused`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.client.consumer.allocate import AllocateStrategy

__all__ = ["LITE_PULL_ONLY_OPTIONS", "PUSH_ONLY_OPTIONS", "ConsumerOptions"]


_POSITIVE_OPTIONS = (
    "pull_threshold_messages",
    "pull_threshold_bytes",
    "max_span_offsets",
    "consume_timeout_ms",
    "poll_timeout_ms",
    "auto_commit_interval_ms",
    "cache_max_messages",
)
"""Options that must be above 0 (a count, a size or a time)."""


PUSH_ONLY_OPTIONS = frozenset(
    {
        "consume_thread_max",
        "consume_batch_max_size",
        "max_reconsume_times",
        "consume_timeout_ms",
        "suspend_time_ms",
        "lock_renew_interval_ms",
        "client_lock_max_live_ms",
    }
)
"""The listener's and the orderly options: a lite pull consumer has no listener."""

LITE_PULL_ONLY_OPTIONS = frozenset(
    {"poll_timeout_ms", "auto_commit", "auto_commit_interval_ms", "cache_max_messages"}
)
"""``poll()`` and its commits: a push consumer has no ``poll()``."""


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{name} must be within {low}..{high}, not {value}")


def _check_positive(name: str, value: int) -> None:
    if value <= 0:
        raise ConfigError(f"{name} must be positive, not {value}")


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """How a consumer consumes (see the module docstring). Every field is optional.

    Raises:
        ConfigError: a value out of its range (the message names the option).
    """

    allocate_strategy: AllocateStrategy | None = None
    """How the group's queues are shared among its members (None: averagely, RocketMQ's
    default; see :mod:`.allocate`)."""
    pull_batch_size: int | None = None
    """Messages asked for per pull, 1..1024 (None: 32 for a push consumer, 10 for a lite pull
    consumer, whose ``poll()`` returns at most this many). The broker caps a pull at 32 unless
    its ``maxTransferCountOnMessageInMemory`` is raised."""
    pull_threshold_messages: int = limits.PROCESS_QUEUE_MAX_MESSAGES
    """Flow control: a queue is not pulled while this many of its messages (1000) are cached
    and not yet consumed (pullThresholdForQueue). Positive."""
    pull_threshold_bytes: int = limits.PROCESS_QUEUE_MAX_BYTES
    """Flow control: ... or this many bytes of bodies (100 MiB; pullThresholdSizeForQueue).
    Positive."""
    max_span_offsets: int = limits.PROCESS_QUEUE_MAX_SPAN_OFFSETS
    """Flow control: ... or the cached messages of a queue span more than this many offsets
    (2000; consumeConcurrentlyMaxSpan). Positive."""
    offset_base_directory: Path | None = None
    """Where a broadcasting consumer keeps its progress (None: ``~/.bolide``)."""
    consume_thread_max: int = limits.CONSUME_THREAD_MAX_COUNT
    """Push: listener calls running at once (20), 1..1000."""
    consume_batch_max_size: int = limits.CONSUME_BATCH_MAX_MESSAGES
    """Push: messages per listener call (1), 1..1024."""
    max_reconsume_times: int = -1
    """Push: deliveries of a failed message before it goes to the dead-letter queue; -1 (the
    default) means 16 in concurrent mode and unlimited in orderly mode, as RocketMQ. -1 or
    more."""
    consume_timeout_ms: int = limits.CONSUME_TIMEOUT_MS
    """Push: a listener call running longer has its oldest message sent back to be consumed
    again (ms, 15 min). Positive."""
    suspend_time_ms: int = limits.ORDERLY_SUSPEND_DEFAULT_MS
    """Push, orderly: a suspended queue is consumed again after this long (ms, 1 s),
    10..30,000."""
    lock_renew_interval_ms: int = limits.CLIENT_LOCK_RENEW_INTERVAL_MS
    """Push, orderly: the queue locks are renewed this often (ms, 20 s); positive and under
    ``client_lock_max_live_ms``."""
    client_lock_max_live_ms: int = limits.CLIENT_LOCK_MAX_LIVE_MS
    """Push, orderly: a lock not renewed for this long is treated as lost (ms, 30 s; keep it
    under the broker's 60 s)."""
    poll_timeout_ms: int = limits.LITE_PULL_POLL_TIMEOUT_MS
    """Lite pull: ``poll()`` waits this long for messages when not told otherwise (ms, 5 s).
    Positive."""
    auto_commit: bool = True
    """Lite pull: commit the positions of what ``poll()`` returned by itself (on)."""
    auto_commit_interval_ms: int = limits.LITE_PULL_AUTO_COMMIT_INTERVAL_MS
    """Lite pull: ... at the first poll after this long (ms, 5 s). Positive."""
    cache_max_messages: int = limits.LITE_PULL_CACHE_MAX_MESSAGES
    """Lite pull: messages pulled but not yet polled, all queues together (10,000). Positive."""

    def __post_init__(self) -> None:
        batch_limit = limits.CONSUME_BATCH_LIMIT_MESSAGES
        if self.pull_batch_size is not None:
            _check_range("pull_batch_size", self.pull_batch_size, 1, batch_limit)
        _check_range(
            "consume_thread_max", self.consume_thread_max, 1, limits.CONSUME_THREAD_LIMIT_COUNT
        )
        _check_range("consume_batch_max_size", self.consume_batch_max_size, 1, batch_limit)
        if self.max_reconsume_times < -1:
            raise ConfigError(
                f"max_reconsume_times must be -1 or more, not {self.max_reconsume_times}"
            )
        for name in _POSITIVE_OPTIONS:
            _check_positive(name, getattr(self, name))
        _check_range(
            "suspend_time_ms", self.suspend_time_ms, limits.ORDERLY_SUSPEND_MIN_MS,
            limits.ORDERLY_SUSPEND_MAX_MS,
        )  # fmt: skip
        if not 0 < self.lock_renew_interval_ms < self.client_lock_max_live_ms:
            raise ConfigError(
                "lock_renew_interval_ms must be positive and under client_lock_max_live_ms, "
                f"not {self.lock_renew_interval_ms} (client_lock_max_live_ms "
                f"{self.client_lock_max_live_ms})"
            )

    def refuse_unused(self, unused: Collection[str], consumer: str) -> None:
        """Refuse the options in ``unused`` that are set away from their default: ``consumer``
        (e.g. ``"a lite pull consumer"``) would silently ignore them.

        Raises:
            ConfigError: naming every such option.
        """
        set_names = [
            field.name
            for field in dataclasses.fields(self)
            if field.name in unused and getattr(self, field.name) != field.default
        ]
        if set_names:
            raise ConfigError(f"{consumer} does not use the options {', '.join(set_names)}")

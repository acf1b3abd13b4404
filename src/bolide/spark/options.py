"""The data source's options, parsed from the strings Spark hands over.

Spark gives every option value as a string and lower-cases the keys (``startingOffsets``
arrives as ``startingoffsets``); :func:`parse_read_options` and :func:`parse_write_options`
accept either spelling and turn the strings into typed, checked settings. Pure: no I/O.

Offsets in JSON name queues as ``{"topic": {"brokerName": {"queueId": offset}}}``; an offset of
``-2`` means the queue's earliest offset and ``-1`` its latest (the next to be written).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.protocol.bodies import BodyError, MessageQueue, SubscriptionData
from bolide.remoting.tls import TlsClientSettings
from bolide.spark.option_names import READ_OPTION_NAMES, WRITE_OPTION_NAMES, check_option_names

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
    "parse_duration_ms",
    "parse_offsets_json",
    "parse_read_options",
    "parse_write_options",
    "queue_offsets_from_document",
]

EARLIEST = -2
"""In offset JSON: the queue's min offset."""
LATEST = -1
"""In offset JSON: the queue's max offset (exclusive: where the next message goes)."""

READER_GROUP_DEFAULT = "bolide-spark-reader"
"""Consumer group named in pull requests when no ``group`` option is set (brokers want one)."""
WRITER_GROUP_DEFAULT = "bolide-spark-writer"
"""Producer group of the sink when no ``group`` option is set."""

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_DURATION_UNIT_MS = {None: 1, "ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000}


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where reading starts (or a batch read ends) on each queue.

    ``default`` (EARLIEST or LATEST) applies to queues ``offsets`` does not name; ``offsets``
    holds offsets >= 0 or the EARLIEST/LATEST markers. ``timestamp_ms`` (starting only), when
    set, wins over both: each queue starts at its first message stored at or after it.
    """

    default: int
    offsets: Mapping[MessageQueue, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    timestamps_ms: Mapping[MessageQueue, int] = field(default_factory=dict)
    """Per queue (``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``): the queue's
    offset is its first message stored at or after the time; wins over ``offsets``."""

    def offset_for(self, queue: MessageQueue) -> int:
        """The offset (or marker) this spec gives ``queue``, timestamps aside."""
        return self.offsets.get(queue, self.default)

    def timestamp_for(self, queue: MessageQueue) -> int | None:
        """The time (epoch ms) whose offset ``queue`` takes, or None: by offset."""
        if self.timestamp_ms is not None:
            return self.timestamp_ms
        return self.timestamps_ms.get(queue)


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """How to reach a secured cluster (options ``accessKey``, ``secretKey``, ``tls``,
    ``tlsTrustCertPath``, ``tlsVerifyServer``); picklable, shipped to executors."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_trust_cert_path: str | None = None
    tls_verify_server: bool = True

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for the client (``access_key``, ``secret_key``, ``tls``)."""
        tls: TlsClientSettings | None = None
        if self.tls:
            trust = None if self.tls_trust_cert_path is None else Path(self.tls_trust_cert_path)
            tls = TlsClientSettings(trust_cert_path=trust, verify_server=self.tls_verify_server)
        return {"access_key": self.access_key, "secret_key": self.secret_key, "tls": tls}


def _access(options: Mapping[str, str]) -> ClusterAccess:
    access_key, secret_key = _get(options, "accessKey"), _get(options, "secretKey")
    if (access_key is None) != (secret_key is None):
        raise ConfigError("options accessKey and secretKey go together")
    return ClusterAccess(
        access_key=access_key,
        secret_key=secret_key,
        tls=_bool_option(options, "tls", False),
        tls_trust_cert_path=_get(options, "tlsTrustCertPath"),
        tls_verify_server=_bool_option(options, "tlsVerifyServer", True),
    )


def _covers(topics: tuple[str, ...], pattern: str | None, topic: str) -> bool:
    if pattern is not None:
        return re.fullmatch(pattern, topic) is not None
    return topic in topics


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Settings of a batch or streaming read (see docs/spark.md for each option)."""

    namesrv: str
    topics: tuple[str, ...]
    """The topics named by ``topic`` (empty with ``subscribePattern``)."""
    tags: str
    """The subscription expression sent to brokers (``*`` or ``"A || B"``)."""
    tag_set: frozenset[str]
    """Tags a message must carry (empty: all): brokers filter by hash, readers re-check."""
    starting: OffsetSpec
    ending: OffsetSpec
    max_messages_per_trigger: int | None
    min_messages_per_trigger: int | None
    max_trigger_delay_ms: int
    pull_batch_size: int
    fail_on_data_loss: bool
    group: str | None
    """Consumer group whose broker offsets record the query's progress (None: none)."""
    access: ClusterAccess = field(default_factory=ClusterAccess)
    topic_pattern: str | None = None
    """``subscribePattern``: every topic whose whole name matches this regex (looked up on
    the name server at each plan), instead of ``topics``."""
    min_partitions: int | None = None
    """``minPartitions``: split large queue ranges so a read has about this many tasks."""
    max_records_per_partition: int | None = None
    """``maxRecordsPerPartition``: split any queue range larger than this many offsets."""
    consume_mode: str = "pull"
    """``consumeMode``: ``pull`` (offsets in the checkpoint) or ``pop`` (shared with the
    group's other consumers, see bolide.spark.pop_source)."""
    pop_invisible_time_ms: int = limits.SPARK_POP_INVISIBLE_DEFAULT_MS
    """``invisibleTime`` (consumeMode=pop)."""

    def covers(self, topic: str) -> bool:
        """Whether the query reads ``topic`` (named, or matched by the pattern)."""
        return _covers(self.topics, self.topic_pattern, topic)

    @property
    def pull_group(self) -> str:
        """The consumer group named in pull requests."""
        return self.group or READER_GROUP_DEFAULT


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Settings of a batch or streaming write."""

    namesrv: str
    topic: str | None
    """Where rows without a ``topic`` column value go (None: every row must name its topic)."""
    group: str
    """Producer group of the sink's producers."""
    send_timeout_ms: int
    access: ClusterAccess = field(default_factory=ClusterAccess)
    exactly_once: bool = False
    """Write each micro-batch as transactional half messages committed once per batch id."""


def _normalized(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _get(options: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = options.get(name.lower())
        if value is not None and value.strip() != "":
            return value.strip()
    return None


def _int_option(options: Mapping[str, str], *names: str, minimum: int = 1) -> int | None:
    text = _get(options, *names)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError as error:
        raise ConfigError(f"option {names[0]} must be an integer, not {text!r}") from error
    if value < minimum:
        raise ConfigError(f"option {names[0]} must be at least {minimum}, not {value}")
    return value


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    lowered = text.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name} must be true or false (or 1/0, yes/no), not {text!r}")


def parse_duration_ms(text: str, name: str) -> int:
    """``"15m"``, ``"30s"``, ``"2h"``, ``"500ms"`` or a plain number of ms -> milliseconds.

    Raises ConfigError for anything else.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(f"option {name} must be a duration like 500ms, 30s, 15m or 2h: {text!r}")
    return int(match.group(1)) * _DURATION_UNIT_MS[match.group(2)]


def queue_offsets_from_document(
    document: Any, what: str, *, timestamps: bool = False
) -> dict[MessageQueue, int]:
    """A decoded ``{"topic": {"brokerName": {"queueId": offset}}}`` -> queue -> offset (with
    ``timestamps``: -> epoch ms, which must be >= 0).

    Raises ConfigError (``what`` names the source of the document) for a bad shape.
    """
    if not isinstance(document, dict):
        raise ConfigError(
            f"{what} must be a JSON object {{topic: {{broker: {{queueId: offset}}}}}}"
        )
    offsets: dict[MessageQueue, int] = {}
    for topic, brokers in document.items():
        if not isinstance(brokers, dict):
            raise ConfigError(f"{what}: topic {topic!r} must map broker names to objects")
        for broker_name, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ConfigError(f"{what}: {topic}/{broker_name} must map queue ids to offsets")
            for queue_text, offset in queues.items():
                try:
                    queue_id = int(queue_text)
                except ValueError as error:
                    raise ConfigError(f"{what}: queue id {queue_text!r} is not a number") from error
                if timestamps and (
                    isinstance(offset, bool) or not isinstance(offset, int) or offset < 0
                ):
                    raise ConfigError(
                        f"{what}: the time of {topic}/{broker_name}/{queue_id} must be an"
                        f" integer >= 0 (ms since the epoch); got {offset!r}"
                    )
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                    raise ConfigError(
                        f"{what}: offset of {topic}/{broker_name}/{queue_id} must be an integer"
                        f" >= 0, or -2 (earliest) or -1 (latest); got {offset!r}"
                    )
                if queue_id < 0:
                    raise ConfigError(f"{what}: queue id {queue_id} is negative")
                offsets[MessageQueue(topic, broker_name, queue_id)] = offset
    return offsets


def parse_offsets_json(
    text: str, what: str, *, timestamps: bool = False
) -> dict[MessageQueue, int]:
    """``{"topic": {"brokerName": {"queueId": offset}}}`` -> queue -> offset (with
    ``timestamps``: -> epoch ms).

    Raises ConfigError (``what`` names the option) for bad JSON or a bad shape.
    """
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        kind = "not valid JSON" if timestamps else "neither earliest, latest nor valid JSON"
        raise ConfigError(f"{what} is {kind}: {error}") from error
    return queue_offsets_from_document(document, what, timestamps=timestamps)


def _offset_spec(
    text: str | None, name: str, default: int, covers: Callable[[str], bool], *, ending: bool
) -> OffsetSpec:
    if text is None:
        return OffsetSpec(default)
    lowered = text.lower()
    if lowered == "earliest":
        if ending:
            raise ConfigError(f"{name} cannot be earliest")
        return OffsetSpec(EARLIEST)
    if lowered == "latest":
        return OffsetSpec(LATEST)
    offsets = parse_offsets_json(text, name)
    _check_topics(offsets, name, covers)
    if ending and any(offset == EARLIEST for offset in offsets.values()):
        raise ConfigError(f"{name} cannot use -2 (earliest)")
    return OffsetSpec(default, offsets)


def _check_topics(
    queues: Mapping[MessageQueue, int], name: str, covers: Callable[[str], bool]
) -> None:
    unknown = sorted({queue.topic for queue in queues if not covers(queue.topic)})
    if unknown:
        raise ConfigError(
            f"{name} names topics that the topic or subscribePattern option does not: {unknown}"
        )


def _with_timestamps(
    spec: OffsetSpec, options: Mapping[str, str], name: str, covers: Callable[[str], bool]
) -> OffsetSpec:
    """``spec`` with the per-queue times of option ``name`` (which win over its offsets)."""
    text = _get(options, name)
    if text is None:
        return spec
    timestamps_ms = parse_offsets_json(text, name, timestamps=True)
    if not timestamps_ms:
        raise ConfigError(f"{name} names no queue")
    _check_topics(timestamps_ms, name, covers)
    return OffsetSpec(spec.default, spec.offsets, spec.timestamp_ms, timestamps_ms)


def _topics(options: Mapping[str, str]) -> tuple[tuple[str, ...], str | None]:
    """(named topics, pattern): exactly one of topic and subscribePattern."""
    text = _get(options, "topic", "topics", "subscribe")
    pattern = _get(options, "subscribePattern")
    if text is not None and pattern is not None:
        raise ConfigError("give either the topic option or subscribePattern, not both")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(f"option subscribePattern is not a valid regex: {error}") from error
        return (), pattern
    if text is None:
        raise ConfigError(
            "option topic is required (one topic or a comma-separated list), or subscribePattern"
        )
    topics = tuple(dict.fromkeys(item.strip() for item in text.split(",") if item.strip()))
    if not topics:
        raise ConfigError("option topic names no topic")
    return topics, None


def _namesrv(options: Mapping[str, str]) -> str:
    namesrv = _get(options, "namesrv", "namesrvAddr")
    if namesrv is None:
        raise ConfigError("option namesrv is required (host:port of a Bolide name server)")
    return namesrv


def _starting(
    options: Mapping[str, str], streaming: bool, covers: Callable[[str], bool]
) -> OffsetSpec:
    """startingTimestamp over startingOffsetsByTimestamp over startingOffsets."""
    default = LATEST if streaming else EARLIEST
    text = _get(options, "startingOffsets")
    starting = _offset_spec(text, "startingOffsets", default, covers, ending=False)
    starting = _with_timestamps(starting, options, "startingOffsetsByTimestamp", covers)
    timestamp_ms = _int_option(options, "startingTimestamp", minimum=0)
    if timestamp_ms is not None:
        starting = OffsetSpec(starting.default, starting.offsets, timestamp_ms)
    return starting


def _ending(
    options: Mapping[str, str], streaming: bool, covers: Callable[[str], bool]
) -> OffsetSpec:
    """endingOffsetsByTimestamp over endingOffsets; batch reads only."""
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp"):
            if _get(options, name) is not None:
                raise ConfigError(
                    f"option {name} applies to batch reads only (spark.read); a stream has no end"
                )
    text = _get(options, "endingOffsets")
    ending = _offset_spec(text, "endingOffsets", LATEST, covers, ending=True)
    return _with_timestamps(ending, options, "endingOffsetsByTimestamp", covers)


def _pull_batch_size(options: Mapping[str, str]) -> int:
    pull_batch_size = _int_option(options, "pullBatchSize")
    pull_batch_size = pull_batch_size or limits.SPARK_PULL_BATCH_DEFAULT_MESSAGES
    if pull_batch_size > limits.SPARK_PULL_BATCH_MAX_MESSAGES:
        raise ConfigError(
            f"option pullBatchSize must be at most {limits.SPARK_PULL_BATCH_MAX_MESSAGES}"
        )
    return pull_batch_size


def parse_read_options(raw: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check and type the options of ``spark.read`` / ``spark.readStream``.

    ``startingOffsets`` defaults to latest for streaming and earliest for batch reads;
    ``endingOffsets`` (batch only) to latest.

    Raises:
        ConfigError: an option is unknown, a required one is missing or a value is malformed.
    """
    check_option_names(raw, READ_OPTION_NAMES, "the bolide source")
    options = _normalized(raw)
    topics, pattern = _topics(options)
    tags = _get(options, "tags") or "*"
    try:
        subscription = SubscriptionData.from_expression(topics[0] if topics else "*", tags, 0)
    except BodyError as error:
        raise ConfigError(f"option tags: {error}") from error

    def covers(topic: str) -> bool:
        return _covers(topics, pattern, topic)

    max_messages = _int_option(options, "maxMessagesPerTrigger", "maxOffsetsPerTrigger")
    min_messages = _int_option(options, "minMessagesPerTrigger", "minOffsetsPerTrigger")
    if max_messages is not None and min_messages is not None and min_messages > max_messages:
        raise ConfigError("minMessagesPerTrigger must not exceed maxMessagesPerTrigger")
    delay_text = _get(options, "maxTriggerDelay")
    max_trigger_delay_ms = (
        limits.SPARK_MAX_TRIGGER_DELAY_DEFAULT_MS
        if delay_text is None
        else parse_duration_ms(delay_text, "maxTriggerDelay")
    )
    return ReadOptions(
        namesrv=_namesrv(options),
        topics=topics,
        tags=subscription.sub_string,
        tag_set=frozenset(subscription.tags_set),
        starting=_starting(options, streaming, covers),
        ending=_ending(options, streaming, covers),
        max_messages_per_trigger=max_messages,
        min_messages_per_trigger=min_messages,
        max_trigger_delay_ms=max_trigger_delay_ms,
        pull_batch_size=_pull_batch_size(options),
        fail_on_data_loss=_bool_option(options, "failOnDataLoss", True),
        group=_get(options, "group"),
        access=_access(options),
        topic_pattern=pattern,
        min_partitions=_int_option(options, "minPartitions"),
        max_records_per_partition=_int_option(options, "maxRecordsPerPartition"),
        consume_mode=_consume_mode(options),
        pop_invisible_time_ms=_invisible_time_ms(options),
    )


_NOT_WITH_POP = (
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsets",
    "endingOffsetsByTimestamp",
    "minMessagesPerTrigger",
    "minOffsetsPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
)
"""Options about offsets, which a POP read does not have."""


def _consume_mode(options: Mapping[str, str]) -> str:
    mode = (_get(options, "consumeMode") or "pull").lower()
    if mode not in ("pull", "pop"):
        raise ConfigError(f"option consumeMode must be pull or pop, not {mode!r}")
    if mode == "pop":
        if _get(options, "group") is None:
            raise ConfigError("consumeMode=pop needs the group option (the consumer group)")
        given = [name for name in _NOT_WITH_POP if _get(options, name) is not None]
        if given:
            raise ConfigError(
                f"option(s) {', '.join(given)} do not apply to consumeMode=pop (no offsets:"
                " the brokers hand each message to one consumer of the group)"
            )
    elif _get(options, "invisibleTime") is not None:
        raise ConfigError("option invisibleTime applies to consumeMode=pop only")
    return mode


def _invisible_time_ms(options: Mapping[str, str]) -> int:
    text = _get(options, "invisibleTime")
    if text is None:
        return limits.SPARK_POP_INVISIBLE_DEFAULT_MS
    invisible_ms = parse_duration_ms(text, "invisibleTime")
    if not limits.SPARK_POP_INVISIBLE_MIN_MS <= invisible_ms <= limits.POP_INVISIBLE_TIME_MAX_MS:
        raise ConfigError(
            f"option invisibleTime must be between {limits.SPARK_POP_INVISIBLE_MIN_MS} ms and"
            f" {limits.POP_INVISIBLE_TIME_MAX_MS} ms, not {invisible_ms} ms"
        )
    return invisible_ms


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    """Check and type the options of ``df.write`` / ``df.writeStream``.

    Raises:
        ConfigError: an option is unknown, namesrv is missing or a value is malformed.
    """
    check_option_names(raw, WRITE_OPTION_NAMES, "the bolide sink")
    options = _normalized(raw)
    send_timeout_ms = _int_option(options, "sendTimeoutMs") or limits.PRODUCER_SEND_TIMEOUT_MS
    return WriteOptions(
        namesrv=_namesrv(options),
        topic=_get(options, "topic"),
        group=_get(options, "group") or WRITER_GROUP_DEFAULT,
        send_timeout_ms=send_timeout_ms,
        access=_access(options),
        exactly_once=_bool_option(options, "exactlyOnce", False),
    )

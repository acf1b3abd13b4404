"""Turning messages into send requests: checks, system properties, compression, headers.

Pure (the caller passes ids and the time). What a send carries:

* the message's properties plus ``UNIQ_KEY`` (a fresh producer id unless the caller set one)
  and ``WAIT`` (``true`` unless set), joined into the properties string;
* the body, compressed when it has at least ``compress_over_bytes`` bytes — zlib by default,
  LZ4 (frame) or ZSTD with ``compress_type`` — then the sysFlag carries COMPRESSED and the
  type (0x1 | 0x300 zlib, 0x100 LZ4, 0x200 ZSTD, as Java 4.9.4+ producers write them);
* for a ``%RETRY%`` topic, RECONSUME_TIME and MAX_RECONSUME_TIMES move from the properties
  into the header, as Java does.

A batch is one request whose body holds every message (docs/protocol.md §2.2): same topic, no
delay, not a retry topic; each inner message has its own UNIQ_KEY; bodies are not
compressed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import (
    InvalidMessageError,
    MessageTooLargeError,
    ProtocolError,
)
from bolide.client.route import DEFAULT_TOPIC
from bolide.protocol.compression import CompressionType, compress_body, compressed_sys_flag
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.headers.fields import frozen_constructor
from bolide.protocol.message import Message, PropertyKey
from bolide.protocol.record import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    BatchEntry,
    encode_batch_body,
    encode_properties,
)
from bolide.protocol.system_topics import is_retry_topic

__all__ = [
    "PreparedSend",
    "SendSettings",
    "check_topic",
    "join_prepared",
    "prepare_batch",
    "prepare_message",
    "prepare_plain",
]

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
"""Characters a topic may use (Java TopicValidator)."""
_DELAY_PROPERTIES = frozenset(
    {
        PropertyKey.DELAY,
        PropertyKey.TIMER_DELIVER_MS,
        PropertyKey.TIMER_DELAY_MS,
        PropertyKey.TIMER_DELAY_SEC,
    }
)
"""Properties that delay a message: batches may not hold them (the broker refuses)."""
_WAIT_TRUE = encode_properties({PropertyKey.WAIT: "true"})
_PLAIN_REFUSED_PROPERTIES = frozenset(
    {
        PropertyKey.UNIQ_KEY,
        PropertyKey.WAIT,
        PropertyKey.RECONSUME_TIME,
        PropertyKey.MAX_RECONSUME_TIMES,
        *_DELAY_PROPERTIES,
    }
)
"""Properties that make a message not plain (see :func:`prepare_plain`)."""
_PLAIN_KEY_HEAD, _PLAIN_KEY_TAIL = encode_properties(
    {PropertyKey.UNIQ_KEY: "\x00", PropertyKey.WAIT: "true"}
).split("\x00")
"""The system properties a plain message gets after its own, around its UNIQ_KEY: the text
:func:`encode_properties` gives for them (one definition of the layout)."""


@dataclass(frozen=True, slots=True)
class SendSettings:
    """The producer settings that shape a request (defaults: RocketMQ's)."""

    producer_group: str
    default_topic: str = DEFAULT_TOPIC
    default_topic_queue_count: int = limits.PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT
    compress_over_bytes: int = limits.COMPRESS_BODY_OVER_BYTES
    max_message_bytes: int = limits.MESSAGE_BODY_MAX_BYTES
    compress_type: CompressionType = CompressionType.ZLIB


@dataclass(slots=True)
class PreparedSend:
    """A request ready for any queue: :meth:`header_for` fills the queue id in. Not changed
    once made (not frozen only because a frozen ``__init__`` costs a microsecond per send).

    ``msg_id`` is the UNIQ_KEY (a batch: every inner key joined by ``,``). ``batchable``: a
    single message that may travel inside a natural batch (:func:`join_prepared`): not
    compressed, not delayed, not for a retry topic, and waiting for the store.
    """

    topic: str
    body: bytes
    msg_id: str
    sys_flag: int
    flag: int
    properties: str
    batch: bool
    reconsume_times: int | None
    max_reconsume_times: int | None
    born_timestamp_ms: int
    settings: SendSettings
    batchable: bool = False

    def header_for(self, queue_id: int) -> SendMessageRequestHeader:
        settings = self.settings
        return _new_send_header(  # SendMessageRequestHeader's fields, in declaration order
            settings.producer_group,
            self.topic,
            settings.default_topic,
            settings.default_topic_queue_count,
            queue_id,
            self.sys_flag,
            self.born_timestamp_ms,
            self.flag,
            self.properties or None,
            0 if self.reconsume_times is None else self.reconsume_times,
            False,  # unit_mode
            self.max_reconsume_times,
            self.batch,
            None,  # broker_name
        )


_new_send_header = frozen_constructor(SendMessageRequestHeader)
"""A send header without the frozen ``__init__``'s setattr per field (one per request)."""


_checked_topics: set[str] = set()
"""Topics :func:`check_topic` passed (up to limits.PRODUCER_CHECKED_TOPICS_MAX_ENTRIES): the
check runs for every send and its answer for a name never changes."""


def check_topic(topic: str) -> None:
    """Raise :class:`InvalidMessageError` unless ``topic`` is a topic a producer may use:
    1..127 characters of ``[%|a-zA-Z0-9_-]``, and not the auto-create template TBW102."""
    if topic in _checked_topics:
        return
    _check_topic_name(topic)
    if len(_checked_topics) < limits.PRODUCER_CHECKED_TOPICS_MAX_ENTRIES:
        _checked_topics.add(topic)


_plain_topics: set[str] = set()
"""Topics :func:`check_topic` passed that are not retry topics (bounded as _checked_topics):
the messages :func:`prepare_plain` may prepare."""


def _note_plain_topic(topic: str) -> None:
    if (
        topic not in _plain_topics
        and not is_retry_topic(topic)
        and len(_plain_topics) < limits.PRODUCER_CHECKED_TOPICS_MAX_ENTRIES
    ):
        _plain_topics.add(topic)


def _check_topic_name(topic: str) -> None:
    if not topic:
        raise InvalidMessageError("the topic is empty")
    if len(topic) > limits.TOPIC_NAME_MAX_CHARS:
        raise InvalidMessageError(
            f"topic {topic[:32]!r}... has {len(topic)} characters;"
            f" at most {limits.TOPIC_NAME_MAX_CHARS} are allowed"
        )
    if not TOPIC_PATTERN.match(topic):
        raise InvalidMessageError(
            f"topic {topic!r} has characters outside letters, digits, '%', '|', '_' and '-'"
        )
    if topic == DEFAULT_TOPIC:
        raise InvalidMessageError(f"{DEFAULT_TOPIC} is the auto-create template, not a topic")


def _check_body(message: Message, max_message_bytes: int) -> None:
    if not message.body:
        raise InvalidMessageError(f"the message body for topic {message.topic!r} is empty")
    if len(message.body) > max_message_bytes:
        raise MessageTooLargeError(
            f"the message body has {len(message.body)} bytes; brokers accept at most"
            f" {max_message_bytes} ({max_message_bytes // limits.MIB} MiB)"
        )


def _properties_text(properties: dict[str, str]) -> str:
    try:
        text = encode_properties(properties)
    except ProtocolError as error:
        raise InvalidMessageError(f"bad message properties: {error}") from error
    # A character takes at most 3 UTF-8 bytes here (surrogates pass as 3): short strings
    # cannot exceed the limit, so only long ones pay for encoding.
    too_long_possible = len(text) * 3 > limits.MESSAGE_PROPERTIES_MAX_BYTES
    if too_long_possible and len(text.encode("utf-8", "surrogatepass")) > (
        limits.MESSAGE_PROPERTIES_MAX_BYTES
    ):
        raise MessageTooLargeError(
            f"the message properties take more than {limits.MESSAGE_PROPERTIES_MAX_BYTES} bytes"
        )
    return text


def _system_properties(message: Message, unique_key: str) -> dict[str, str]:
    properties = dict(message.properties)
    properties.setdefault(PropertyKey.UNIQ_KEY, unique_key)
    properties.setdefault(PropertyKey.WAIT, "true")
    return properties


def _pop_int(properties: dict[str, str], name: str) -> int | None:
    text = properties.pop(name, None)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError as error:
        raise InvalidMessageError(f"property {name} is not an integer: {text!r}") from error


def prepare_message(
    message: Message, unique_key: str, now_ms: int, settings: SendSettings
) -> PreparedSend:
    """Check ``message`` and build its request parts; ``unique_key`` is used unless the
    message already has a UNIQ_KEY; ``now_ms`` becomes the born timestamp.

    Raises:
        InvalidMessageError: bad topic, empty body, bad properties.
        MessageTooLargeError: body over ``settings.max_message_bytes`` or properties over
            32767 bytes.
    """
    check_topic(message.topic)
    _check_body(message, settings.max_message_bytes)
    _note_plain_topic(message.topic)
    properties = _system_properties(message, unique_key)
    reconsume_times = max_reconsume_times = None
    if is_retry_topic(message.topic):
        reconsume_times = _pop_int(properties, PropertyKey.RECONSUME_TIME)
        max_reconsume_times = _pop_int(properties, PropertyKey.MAX_RECONSUME_TIMES)
    body = bytes(message.body)
    sys_flag = 0
    if len(body) >= settings.compress_over_bytes:
        body = compress_body(body, settings.compress_type)
        sys_flag = compressed_sys_flag(sys_flag, settings.compress_type)
    batchable = (
        sys_flag == 0
        and reconsume_times is None
        and max_reconsume_times is None
        and not is_retry_topic(message.topic)
        and properties[PropertyKey.WAIT] == "true"
        and _DELAY_PROPERTIES.isdisjoint(properties)
    )
    return PreparedSend(
        topic=message.topic,
        body=body,
        msg_id=properties[PropertyKey.UNIQ_KEY],
        sys_flag=sys_flag,
        flag=message.flag,
        properties=_properties_text(properties),
        batch=False,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
        born_timestamp_ms=now_ms,
        settings=settings,
        batchable=batchable,
    )


def prepare_plain(
    message: Message, unique_key: str, now_ms: int, settings: SendSettings
) -> PreparedSend | None:
    """What :func:`prepare_message` gives a *plain* message, in fewer steps, or None when
    ``message`` is not plain (the caller then calls :func:`prepare_message`).

    Plain, the common send: a topic already checked and not a retry topic, a ``bytes`` body
    of 1 byte up to below both the compression threshold and the size limit, and no
    UNIQ_KEY, WAIT, delay or reconsume property. Such a message is batchable; its properties
    string is its own properties, then UNIQ_KEY = ``unique_key`` and WAIT = ``true``, as
    prepare_message lays them out (tests/client/test_prepare_plain.py holds the two alike).
    """
    topic = message.topic
    body = message.body
    if (
        topic not in _plain_topics
        or type(body) is not bytes
        or not 0 < len(body) < settings.compress_over_bytes
        or len(body) > settings.max_message_bytes
    ):
        return None
    own = message.properties
    if not own:
        properties = _PLAIN_KEY_HEAD + unique_key + _PLAIN_KEY_TAIL
    elif _PLAIN_REFUSED_PROPERTIES.isdisjoint(own):
        try:
            own_text = encode_properties(own)
        except ProtocolError:
            return None
        properties = own_text + PROPERTY_SEPARATOR + _PLAIN_KEY_HEAD + unique_key + _PLAIN_KEY_TAIL
    else:
        return None
    if len(properties) * 3 > limits.MESSAGE_PROPERTIES_MAX_BYTES or (
        NAME_VALUE_SEPARATOR in unique_key or PROPERTY_SEPARATOR in unique_key
    ):
        return None
    return PreparedSend(
        topic,
        body,
        unique_key,
        0,
        message.flag,
        properties,
        False,  # batch
        None,
        None,
        now_ms,
        settings,
        True,  # batchable
    )


def join_prepared(sends: Sequence[PreparedSend]) -> PreparedSend:
    """One batch request of batchable single sends of one topic (the natural batch of
    ``auto_batch``): each keeps its UNIQ_KEY, flag, body and properties, in order.

    The caller keeps to the batch rules (one topic, ``batchable``, at most
    limits.PRODUCER_AUTO_BATCH_MAX_BYTES: the batcher's lanes are per topic and take only
    batchable sends, within the bounds); the broker answers with every message's offset id
    and the first queue offset, the others following one by one.
    """
    first = sends[0]
    return _batch_request(
        first.topic,
        encode_batch_body(sends),  # a PreparedSend has an entry's flag, body, properties
        [send.msg_id for send in sends],
        first.born_timestamp_ms,
        first.settings,
    )


def _batch_request(
    topic: str, body: bytes, msg_ids: Sequence[str], born_timestamp_ms: int, settings: SendSettings
) -> PreparedSend:
    """The one request of a batch whose encoded ``body`` holds the messages of ``msg_ids``
    (their UNIQ_KEYs, in order; joined by commas as Java's batch id): no flag or system flag
    of its own, WAIT=true, no retry counts."""
    return PreparedSend(
        topic=topic,
        body=body,
        msg_id=",".join(msg_ids),
        sys_flag=0,
        flag=0,
        properties=_WAIT_TRUE,
        batch=True,
        reconsume_times=None,
        max_reconsume_times=None,
        born_timestamp_ms=born_timestamp_ms,
        settings=settings,
    )


def prepare_batch(
    messages: Sequence[Message], unique_keys: Sequence[str], now_ms: int, settings: SendSettings
) -> PreparedSend:
    """Check a batch and encode its body; ``unique_keys[i]`` is used for ``messages[i]``
    unless it has a UNIQ_KEY.

    Raises:
        InvalidMessageError: empty batch, mixed topics, a delayed message, a retry topic,
            more than limits.BATCH_MESSAGES_MAX_COUNT messages, or a bad message.
        MessageTooLargeError: the encoded batch is over ``settings.max_message_bytes``.
    """
    if not messages:
        raise InvalidMessageError("a batch needs at least one message")
    if len(messages) > limits.BATCH_MESSAGES_MAX_COUNT:
        raise InvalidMessageError(
            f"a batch of {len(messages)} messages; at most {limits.BATCH_MESSAGES_MAX_COUNT}"
        )
    topic = messages[0].topic
    check_topic(topic)
    if is_retry_topic(topic):
        raise InvalidMessageError("retry topics cannot be sent in batches")
    entries: list[BatchEntry] = []
    keys: list[str] = []
    for message, unique_key in zip(messages, unique_keys, strict=True):
        if message.topic != topic:
            raise InvalidMessageError(
                f"a batch goes to one topic; found {topic!r} and {message.topic!r}"
            )
        if message.properties.get(PropertyKey.DELAY, "0") not in ("", "0"):
            raise InvalidMessageError("delayed messages cannot be sent in batches")
        _check_body(message, settings.max_message_bytes)
        properties = _system_properties(message, unique_key)
        keys.append(properties[PropertyKey.UNIQ_KEY])
        entries.append(BatchEntry(message.flag, bytes(message.body), _properties_text(properties)))
    body = encode_batch_body(entries)
    if len(body) > settings.max_message_bytes:
        raise MessageTooLargeError(
            f"the batch encodes to {len(body)} bytes; brokers accept at most"
            f" {settings.max_message_bytes}; split it"
        )
    return _batch_request(topic, body, keys, now_ms, settings)

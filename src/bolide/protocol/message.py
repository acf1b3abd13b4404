"""Messages as producers build them and consumers receive them, and the facts around them.

* :class:`Message` is what a producer sends: topic, body, user flag and a properties map.
* :class:`MessageExt` is one decoded stored record (pull bodies, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE);
  the record's layout and codecs live behind one door, :mod:`bolide.protocol.record`.
* The system property names, the message sysFlag bits
  (§3.2) and the tags hash code that consume queues store (§4.1).

Sans-IO: nothing here touches a socket or a file.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from bolide.base.errors import ProtocolError
from bolide.protocol.address import SocketAddress
from bolide.protocol.msgid import offset_message_id

KEY_SEPARATOR: Final = " "
"""Between the keys of the KEYS property."""


class MessageSysFlag(enum.IntFlag):
    """The message sysFlag bits (docs/protocol.md §3.2); the record and SEND_MESSAGE both carry
    them.

    TRANSACTION_* share the two bits of :data:`TRANSACTION_MASK`; the compression type shares
    the three bits of :data:`COMPRESSION_TYPE_MASK` (0 and 3 both mean zlib).
    """

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200
    COMPRESSION_ZLIB = 0x300


TRANSACTION_MASK: Final = 0xC
"""sysFlag bits holding the transaction type: 0 none, 4 prepared, 8 commit, 0xC rollback."""
TRANSACTION_NOT_TYPE: Final = 0x0
"""sysFlag transaction type of an ordinary message."""
COMPRESSION_TYPE_MASK: Final = 0x700
"""sysFlag bits 8..10 holding the compression type (4.9.4+): 1 LZ4, 2 ZSTD, 0 or 3 zlib."""


def transaction_type(sys_flag: int) -> int:
    """The transaction type bits of ``sys_flag`` (one of 0, 0x4, 0x8, 0xC)."""
    return sys_flag & TRANSACTION_MASK


def reset_transaction_type(sys_flag: int, new_type: int) -> int:
    """``sys_flag`` with its transaction bits replaced by ``new_type`` (0, 0x4, 0x8 or 0xC)."""
    return (sys_flag & ~TRANSACTION_MASK) | (new_type & TRANSACTION_MASK)


class PropertyKey:
    """Names of the system properties (docs/protocol.md §3.3, Java ``MessageConst``).

    User properties may use any other name; these are the ones brokers and clients interpret.
    """

    KEYS: Final = "KEYS"
    TAGS: Final = "TAGS"
    WAIT: Final = "WAIT"
    DELAY: Final = "DELAY"
    RETRY_TOPIC: Final = "RETRY_TOPIC"
    REAL_TOPIC: Final = "REAL_TOPIC"
    REAL_QID: Final = "REAL_QID"
    TRAN_MSG: Final = "TRAN_MSG"
    PGROUP: Final = "PGROUP"
    MIN_OFFSET: Final = "MIN_OFFSET"
    MAX_OFFSET: Final = "MAX_OFFSET"
    BUYER_ID: Final = "BUYER_ID"
    ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG: Final = "TRANSFER_FLAG"
    CORRECTION_FLAG: Final = "CORRECTION_FLAG"
    MQ2_FLAG: Final = "MQ2_FLAG"
    RECONSUME_TIME: Final = "RECONSUME_TIME"
    MSG_REGION: Final = "MSG_REGION"
    TRACE_ON: Final = "TRACE_ON"
    UNIQ_KEY: Final = "UNIQ_KEY"
    MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME: Final = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID: Final = "INSTANCE_ID"
    CORRELATION_ID: Final = "CORRELATION_ID"
    REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
    TTL: Final = "TTL"
    ARRIVE_TIME: Final = "ARRIVE_TIME"
    PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
    CLUSTER: Final = "CLUSTER"
    MSG_TYPE: Final = "MSG_TYPE"
    INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
    START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
    # 5.x timer messages: an absolute delivery time or a delay instead of the 18 levels.
    TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
    TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
    TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
    SHARDING_KEY: Final = "__SHARDINGKEY"
    # Trace context: the 5.x proxy's copy of SystemProperties.trace_context, and the W3C
    # Trace Context the OpenTelemetry agents (and Bolide's client) put in ordinary properties.
    TRACE_CONTEXT: Final = "TRACE_CONTEXT"
    TRACEPARENT: Final = "traceparent"
    TRANSACTION_ID: Final = "__transactionId__"


# --- tags hash --------------------------------------------------------------------------------

_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: ``h = 31 * h + unit`` over UTF-16 code units, signed int32.

    Characters beyond U+FFFF count as their two surrogates, as in Java; lone surrogates count
    as themselves. ``""`` hashes to 0.
    """
    value = 0
    if text.isascii():
        for character in text:
            value = (31 * value + ord(character)) & 0xFFFFFFFF
    else:
        units = memoryview(text.encode(_UTF16_NATIVE, "surrogatepass")).cast("H")
        for unit in units:
            value = (31 * value + unit) & 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def tags_code(tags: str | None) -> int:
    """The tags hash a consume-queue entry stores: ``java_string_hash(tags)``, 0 without tags."""
    if not tags:
        return 0
    return java_string_hash(tags)


# --- messages ---------------------------------------------------------------------------------


class _PropertyAccessors:
    """Accessors over the system properties, shared by :class:`Message` and :class:`MessageExt`."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        """The TAGS property, or None."""
        return self.properties.get(PropertyKey.TAGS)

    @tags.setter
    def tags(self, tags: str | None) -> None:
        self._put_or_remove(PropertyKey.TAGS, tags or None)

    @property
    def keys(self) -> str | None:
        """The KEYS property as sent: keys joined by single spaces, or None."""
        return self.properties.get(PropertyKey.KEYS)

    @keys.setter
    def keys(self, keys: str | Iterable[str] | None) -> None:
        if keys is not None and not isinstance(keys, str):
            keys = KEY_SEPARATOR.join(key for key in keys if key)
        self._put_or_remove(PropertyKey.KEYS, keys or None)

    @property
    def key_list(self) -> list[str]:
        """The keys of the KEYS property, split on spaces, without empty entries."""
        keys = self.properties.get(PropertyKey.KEYS)
        return keys.split() if keys else []

    @property
    def delay_level(self) -> int:
        """The DELAY property (delay level 1..18), 0 when absent.

        Raises:
            ProtocolError: the property is present but not an integer.
        """
        return self._int_property(PropertyKey.DELAY)

    @delay_level.setter
    def delay_level(self, level: int | None) -> None:
        self._put_or_remove(PropertyKey.DELAY, str(level) if level else None)

    @property
    def unique_key(self) -> str | None:
        """The client-generated id (UNIQ_KEY property), or None."""
        return self.properties.get(PropertyKey.UNIQ_KEY)

    @unique_key.setter
    def unique_key(self, unique_key: str | None) -> None:
        self._put_or_remove(PropertyKey.UNIQ_KEY, unique_key or None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """The WAIT property: whether the producer waits for the store; true when absent."""
        return self.properties.get(PropertyKey.WAIT, "true").lower() != "false"

    @property
    def is_transaction_prepared(self) -> bool:
        """TRAN_MSG is ``"true"``: a half message of a transaction."""
        return self.properties.get(PropertyKey.TRAN_MSG, "").lower() == "true"

    def _put_or_remove(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value

    def _int_property(self, name: str) -> int:
        text = self.properties.get(name)
        if not text:
            return 0
        try:
            return int(text)
        except ValueError as error:
            raise ProtocolError(f"property {name} is not an integer: {text!r}") from error


@dataclass(slots=True, init=False)
class Message(_PropertyAccessors):
    """A message as a producer builds it.

    ``Message("orders", b'{"id": 17}', tags="paid", keys="order-17")``. ``keys`` may also be a
    list of keys (stored space-joined). The body is sent as is; compression is the producer's
    business. ``properties`` is copied, so the caller's mapping is never modified.
    """

    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        flag: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        delay_level: int | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self.properties = dict(properties) if properties else {}
        if tags is not None:
            self.tags = tags
        if keys is not None:
            self.keys = keys
        if delay_level is not None:
            self.delay_level = delay_level


@dataclass(slots=True)
class MessageExt(_PropertyAccessors):
    """One stored record, decoded (docs/protocol.md §3.1).

    ``body`` is decompressed when the decoder was asked to (the default) while ``sys_flag``
    keeps the stored bits, COMPRESSED included, as Java does; ``body_crc`` is the stored CRC of
    the stored (possibly compressed) body. Timestamps are milliseconds since the epoch;
    ``store_size`` is the record's length in bytes. ``body_error`` says why a pulled record
    could not be decoded (an unknown or corrupt compression, a malformed record): the message
    is still handed over, with ``body`` as stored, so one bad record never stalls its queue
    (see :mod:`bolide.protocol.compression`); None for every well-formed record.
    """

    topic: str
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: SocketAddress = ("0.0.0.0", 0)
    store_timestamp_ms: int = 0
    store_host: SocketAddress = ("0.0.0.0", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    body_error: str | None = None

    @property
    def offset_msg_id(self) -> str:
        """The broker-side id: store host and commit-log offset in hex (docs/protocol.md §3.4).

        Raises:
            ProtocolError: ``store_host`` is not an IP literal.
        """
        return offset_message_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The id users see: UNIQ_KEY when the producer set one, else :attr:`offset_msg_id`."""
        unique_key = self.properties.get(PropertyKey.UNIQ_KEY)
        if unique_key:
            return unique_key
        return self.offset_msg_id

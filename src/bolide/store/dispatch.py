"""What a record contributes to the consume queue and the index, computed the same way when a
message is put and when recovery re-reads it from the commit log. Shared by both stores."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from bolide.base import limits
from bolide.base.errors import ProtocolError
from bolide.protocol.message import (
    KEY_SEPARATOR,
    TRANSACTION_MASK,
    MessageSysFlag,
    PropertyKey,
    tags_code,
)
from bolide.protocol.record import read_record_header, read_record_properties
from bolide.protocol.system_topics import SCHEDULE_TOPIC

_NO_QUEUE_ENTRY = frozenset(
    {int(MessageSysFlag.TRANSACTION_PREPARED), int(MessageSysFlag.TRANSACTION_ROLLBACK)}
)


def gets_queue_entry(sys_flag: int) -> bool:
    """Whether a record gets a consume-queue entry: not for PREPARED or ROLLBACK halves."""
    return (sys_flag & TRANSACTION_MASK) not in _NO_QUEUE_ENTRY


def queue_tags_code(
    topic: str,
    tags: str | None,
    delay: str | None,
    store_timestamp_ms: int,
    delay_levels_ms: tuple[int, ...],
    cache: dict[str, int] | None = None,
) -> int:
    """The consume-queue tags code of a record from its TAGS and DELAY properties (None when
    absent); ``cache`` is the caller's memo of tag hashes, bounded by
    STORE_NAME_CACHE_MAX_ENTRIES (the hash loops in Python per character).

    Java's ``String.hashCode`` of TAGS (0 without), except in SCHEDULE_TOPIC_XXXX, where it is
    the delivery time: store time plus the delay of the DELAY level (clamped to the highest
    level; a missing or bad level delivers at once).
    """
    if topic == SCHEDULE_TOPIC:
        level = int(delay) if delay is not None and delay.isdigit() else 0
        if level <= 0:
            return store_timestamp_ms
        return store_timestamp_ms + delay_levels_ms[min(level, len(delay_levels_ms)) - 1]
    if not tags:
        return 0
    if cache is None:
        return tags_code(tags)
    code = cache.get(tags)
    if code is None:
        code = tags_code(tags)
        if len(cache) < limits.STORE_NAME_CACHE_MAX_ENTRIES:
            cache[tags] = code
    return code


def index_hashes(
    key_seed: int, keys: str | None, unique_key: str | None, max_entries: int
) -> list[int]:
    """Index hashes of a record of the topic whose
    :func:`~bolide.store.index_file.index_key_seed` is ``key_seed``: one per distinct KEYS
    entry and one for UNIQ_KEY, at most ``max_entries`` (an index file's capacity). Each
    equals :func:`~bolide.store.index_file.index_key_hash` of the topic and the key."""
    if not keys:
        # The common case (every producer sets UNIQ_KEY, few set KEYS), without the dicts.
        if unique_key and max_entries:
            return [zlib.crc32(unique_key.encode("utf-8", "surrogatepass"), key_seed)]
        return []
    names = dict.fromkeys(key for key in keys.split(KEY_SEPARATOR) if key)
    if unique_key:
        names[unique_key] = None
    hashes = dict.fromkeys(
        zlib.crc32(name.encode("utf-8", "surrogatepass"), key_seed) for name in names
    )
    return list(hashes)[:max_entries]


def matches_key(properties: Mapping[str, str], key: str, *, unique: bool) -> bool:
    """Whether a record answers a key query: ``key`` is its UNIQ_KEY (``unique``) or one of
    its KEYS."""
    if not key:
        return False
    if unique:
        return properties.get(PropertyKey.UNIQ_KEY) == key
    return key in properties.get(PropertyKey.KEYS, "").split(KEY_SEPARATOR)


def answers_key_query(
    record: bytes | memoryview, topic: str, key: str, begin_ms: int, end_ms: int, *, unique: bool
) -> bool:
    """Whether a record the key index points at answers a query of both stores' query_by_key:
    of ``topic``, stored within [begin_ms, end_ms] (ms), and :func:`matches_key`. A record that
    does not decode (index hash collisions may point anywhere) does not answer."""
    try:
        header = read_record_header(record)
        properties = read_record_properties(record, header)
    except ProtocolError:
        return False
    if header.topic != topic or not begin_ms <= header.store_timestamp_ms <= end_ms:
        return False
    return matches_key(properties, key, unique=unique)

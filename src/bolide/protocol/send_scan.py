"""The send fast path's header scan: a SEND_MESSAGE / SEND_MESSAGE_V2 request's JSON header read
straight into the values the broker's send handler uses, without a RemotingCommand or a dict.

:func:`scan_send_request` answers a plain tuple (:data:`ScannedSend`) for the common header and
None for anything else; None only means "take the general path" (``decode_command`` and the
dispatcher), which stays the one definition of what a header means and of every error. When it
answers values, they are exactly those the general path reads from the same bytes:
``decode_json_header`` then :func:`~bolide.protocol.headers.send.send_header_values`.

What it accepts (everything else is None):

* a JSON object whose keys are among ``code``, ``extFields``, ``flag``, ``language``,
  ``opaque``, ``remark``, ``serializeTypeCurrentRPC`` and ``version`` (a repeated key: the last
  one counts, as in the general path);
* ``code`` 10 (long field names) or 310 (one-letter names), an int32; ``flag`` 0 (a request
  that wants an answer); ``version`` and ``opaque`` int32 (0 when absent); ``language`` a
  string (an unknown name reads as OTHER); ``remark`` a string or null;
  ``serializeTypeCurrentRPC`` a string;
* ``extFields`` an object whose values are strings or integers of at most 18 digits (the C++
  client sends some numbers), read as their text;
* the send header's required fields present, its integer fields plain ASCII decimals of at
  most 18 digits (``-`` allowed), its optional integers absent, empty or plain decimals.

This is the pure-Python twin; ``bolide/protocol/_send_scan.pyx`` holds the compiled one (a
one-pass scanner), and ``tests/protocol/test_send_scan.py`` holds them and the general path
alike (hypothesis).
"""

from __future__ import annotations

from typing import Any

import orjson

from bolide.base import compiled
from bolide.protocol.codes import LanguageCode
from bolide.protocol.headers.fields import TRUE_TEXTS

__all__ = [
    "SEND_SCAN_CODES",
    "ScannedSend",
    "scan_send_request",
]

ScannedSend = tuple[
    int, int, LanguageCode, int,
    str, str, str, int, int, int, int, int, str | None, int | None, bool, int | None, bool,
    str | None,
]  # fmt: skip
"""``(code, opaque, language, version)`` followed by the 14 send header values of
:data:`~bolide.protocol.headers.send.SendHeaderValues` (producer group, topic, default topic,
default topic queue count, queue id, sys flag, born timestamp, flag, properties, reconsume
times, unit mode, max reconsume times, batch, broker name)."""

_SEND_MESSAGE = 10
_SEND_MESSAGE_V2 = 310
SEND_SCAN_CODES = frozenset((_SEND_MESSAGE, _SEND_MESSAGE_V2))
"""The request codes whose headers :func:`scan_send_request` reads."""

_TOP_KEYS = frozenset(
    ("code", "extFields", "flag", "language", "opaque", "remark", "serializeTypeCurrentRPC",
     "version")
)  # fmt: skip
_V1_KEYS = (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes",
    "batch", "bname",
)  # fmt: skip
_V2_KEYS = tuple("abcdefghijklmn")
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_EXT_INT_LIMIT = 10**18
"""Integers in extFields and integer texts have at most 18 digits (an int64 without care)."""
_INT_TEXT_MAX_DIGITS = 18
_LANGUAGE_BY_NAME: dict[str, LanguageCode] = {member.name: member for member in LanguageCode}
_ONLY_STRINGS = frozenset((str,))


def _int32(fields: dict[str, Any], key: str) -> int | None:
    value = fields.get(key, 0)
    if type(value) is int and _INT32_MIN <= value <= _INT32_MAX:
        return value
    return None


def _decimal(text: str) -> int | None:
    """The value of a plain ASCII decimal (``-`` allowed, at most 18 digits), else None."""
    if text.isdigit():  # the common case first: one C call
        return int(text) if text.isascii() and len(text) <= _INT_TEXT_MAX_DIGITS else None
    digits = text[1:] if text[:1] == "-" else ""
    if digits.isdigit() and digits.isascii() and len(digits) <= _INT_TEXT_MAX_DIGITS:
        return int(text)
    return None


def _texts(ext_fields: object) -> dict[str, str] | None:
    """extFields with integer values as text; None for another value type."""
    if type(ext_fields) is not dict:
        return None
    if _ONLY_STRINGS.issuperset(map(type, ext_fields.values())):
        return ext_fields  # the common case: every value a string
    texts: dict[str, str] = {}
    for key, value in ext_fields.items():
        if type(value) is str:
            texts[key] = value
        elif type(value) is int and -_EXT_INT_LIMIT < value < _EXT_INT_LIMIT:
            texts[key] = str(value)
        else:
            return None
    return texts


def scan_send_request(header: bytes) -> ScannedSend | None:
    """The values of a common send request's JSON ``header``, else None (module docstring)."""
    try:
        fields = orjson.loads(header)
    except orjson.JSONDecodeError:
        return None
    if type(fields) is not dict or not _TOP_KEYS.issuperset(fields):
        return None
    get = fields.get
    code = get("code")
    if type(code) is not int or code not in SEND_SCAN_CODES or get("flag", 0) != 0:
        return None
    version = _int32(fields, "version")
    opaque = _int32(fields, "opaque")
    language = get("language")
    remark = get("remark")
    stamp = get("serializeTypeCurrentRPC", "")
    ext = _texts(get("extFields"))
    if (
        version is None
        or opaque is None
        or type(get("flag", 0)) is not int
        or type(language) is not str
        or (remark is not None and type(remark) is not str)
        or type(stamp) is not str
        or ext is None
    ):
        return None
    values = _send_values(ext, _V2_KEYS if code == _SEND_MESSAGE_V2 else _V1_KEYS)
    if values is None:
        return None
    return (code, opaque, _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER), version, *values)


def _send_values(
    ext: dict[str, str], keys: tuple[str, ...]
) -> tuple[
    str, str, str, int, int, int, int, int, str | None, int | None, bool, int | None, bool,
    str | None,
] | None:  # fmt: skip
    a, b, c, d, e, f, g, h, i, j, k, l_, m, n = keys
    get = ext.get
    producer_group, topic, default_topic = get(a), get(b), get(c)
    numbers = [
        _decimal(get(d) or ""),
        _decimal(get(e) or ""),
        _decimal(get(f) or ""),
        _decimal(get(g) or ""),
        _decimal(get(h) or ""),
    ]
    reconsume = get(j) or ""
    max_reconsume = get(l_) or ""
    reconsume_times = _decimal(reconsume) if reconsume else None
    max_reconsume_times = _decimal(max_reconsume) if max_reconsume else None
    if (
        producer_group is None
        or topic is None
        or default_topic is None
        or None in numbers
        or (reconsume and reconsume_times is None)
        or (max_reconsume and max_reconsume_times is None)
    ):
        return None
    queue_count, queue_id, sys_flag, born_ms, flag = numbers
    assert queue_count is not None and queue_id is not None and sys_flag is not None
    assert born_ms is not None and flag is not None
    return (
        producer_group,
        topic,
        default_topic,
        queue_count,
        queue_id,
        sys_flag,
        born_ms,
        flag,
        get(i) or None,
        reconsume_times,
        get(k, "").lower() in TRUE_TEXTS,
        max_reconsume_times,
        get(m, "").lower() in TRUE_TEXTS,
        get(n) or None,
    )


# The compiled twin (bolide/protocol/_send_scan.pyx), unless BOLIDE_PURE_PYTHON=1 or not built.
compiled.install(globals(), "bolide.protocol._compiled", ("scan_send_request",))

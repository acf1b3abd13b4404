"""fastjson's non-standard JSON, in one place: parse it and produce it.

Java peers serialize bodies with alibaba fastjson 1.x, whose default map output is not always
JSON (docs/protocol.md §1.8):

* ``Map<Long|Integer, …>`` keys are written **unquoted**: ``{"brokerAddrs":{0:"10.0.0.1:10911"}}``,
  ``{"offsetTable":{"T@G":{0:12,1:7}}}``;
* ``Map<MessageQueue, …>`` keys are the key object **inlined**:
  ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}``.

:func:`loads` reads standard JSON (through orjson, the fast path) and, when that fails, these
forms with a small lenient parser: an unquoted number key becomes an ``int`` key, an object key
becomes an :class:`ObjectKey`. :func:`dumps` writes standard JSON, except that an
:class:`ObjectKey` key is inlined as its object, and ``int`` keys are unquoted on request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bolide.base import limits
from bolide.base.errors import ProtocolError

__all__ = ["BodyError", "ObjectKey", "dumps", "loads", "loads_lenient"]


class BodyError(ProtocolError):
    """A request or response body is not valid (fastjson) JSON of the expected shape."""


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """A JSON object used as a map key (fastjson's inlined ``MessageQueue`` keys).

    ``items`` keeps the order written; nested objects are ObjectKeys and arrays tuples, so the
    key is hashable.
    """

    items: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, Any]) -> ObjectKey:
        """The key for ``mapping`` (its values must be JSON scalars, ObjectKeys or tuples)."""
        return cls(tuple(mapping.items()))

    def as_dict(self) -> dict[str, Any]:
        """The key's fields as a dict."""
        return dict(self.items)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON or fastjson's map forms (module docstring).

    Raises :class:`BodyError` for anything else, including nesting deeper than
    :data:`~bolide.base.limits.JSON_BODY_MAX_DEPTH_LEVELS` on the lenient path.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError as error:
            raise BodyError("body is not UTF-8") from error
    return _LenientParser(text).parse()


loads_lenient = loads
"""Alias of :func:`loads` (the name broker code first used)."""


def dumps(value: Any, *, unquoted_int_keys: bool = False) -> bytes:
    """Serialize ``value`` (dicts, lists, tuples, str, int, float, bool, None).

    Dict keys may be ``str``, ``int`` (quoted ``"0"`` unless ``unquoted_int_keys``, which gives
    fastjson's own ``{0:…}``) or :class:`ObjectKey` (inlined). Output has no whitespace.
    """
    if not unquoted_int_keys:
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            pass  # an ObjectKey key somewhere: take the writer below
    pieces: list[str] = []
    _write(value, pieces, unquoted_int_keys)
    return "".join(pieces).encode()


def _write(value: Any, pieces: list[str], unquoted_int_keys: bool) -> None:
    if isinstance(value, dict):
        pieces.append("{")
        for index, (key, item) in enumerate(value.items()):
            if index:
                pieces.append(",")
            _write_key(key, pieces, unquoted_int_keys)
            pieces.append(":")
            _write(item, pieces, unquoted_int_keys)
        pieces.append("}")
    elif isinstance(value, list | tuple):
        pieces.append("[")
        for index, item in enumerate(value):
            if index:
                pieces.append(",")
            _write(item, pieces, unquoted_int_keys)
        pieces.append("]")
    elif isinstance(value, ObjectKey):
        _write(value.as_dict(), pieces, unquoted_int_keys)
    else:
        try:
            pieces.append(orjson.dumps(value).decode())
        except TypeError as error:
            raise BodyError(f"cannot write {type(value).__name__} as JSON") from error


def _write_key(key: Any, pieces: list[str], unquoted_int_keys: bool) -> None:
    if isinstance(key, ObjectKey):
        _write(key.as_dict(), pieces, unquoted_int_keys)
    elif isinstance(key, str):
        pieces.append(orjson.dumps(key).decode())
    elif isinstance(key, int) and not isinstance(key, bool):
        pieces.append(str(key) if unquoted_int_keys else f'"{key}"')
    else:
        raise BodyError(f"cannot write a {type(key).__name__} map key")


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = (("true", True), ("false", False), ("null", None))


class _LenientParser:
    """Recursive descent over ``text``; positions are str indexes."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def parse(self) -> Any:
        value, position = self._value(self._skip(0), 0)
        if self._skip(position) != len(self._text):
            raise BodyError(f"unexpected text after the JSON value at {position}")
        return value

    def _skip(self, position: int) -> int:
        match = _WHITESPACE.match(self._text, position)
        return match.end() if match else position

    def _value(self, position: int, depth: int) -> tuple[Any, int]:
        text = self._text
        if position >= len(text):
            raise BodyError("JSON ends where a value was expected")
        char = text[position]
        if char == "{":
            return self._object(position, depth + 1)
        if char == "[":
            return self._array(position, depth + 1)
        if char == '"':
            return self._string(position)
        if char == "-" or char.isdigit():
            return self._number(position)
        for literal, value in _LITERALS:
            if text.startswith(literal, position):
                return value, position + len(literal)
        raise BodyError(f"unexpected {char!r} at {position} in JSON")

    def _string(self, position: int) -> tuple[str, int]:
        # The regex finds the closing quote; orjson then decodes and validates the escapes.
        match = _STRING.match(self._text, position)
        if match is None:
            raise BodyError(f"unterminated JSON string at {position}")
        try:
            value = orjson.loads(match.group())
        except orjson.JSONDecodeError as error:
            raise BodyError(f"bad JSON string at {position}: {error}") from error
        if not isinstance(value, str):  # pragma: no cover - the regex only matches strings
            raise BodyError(f"bad JSON string at {position}")
        return value, match.end()

    def _number(self, position: int) -> tuple[int | float, int]:
        match = _NUMBER.match(self._text, position)
        if match is None:
            raise BodyError(f"bad JSON number at {position}")
        integer, fraction, exponent = match.groups()
        if fraction or exponent:
            return float(match.group()), match.end()
        return int(integer), match.end()

    def _check_depth(self, depth: int) -> None:
        if depth > limits.JSON_BODY_MAX_DEPTH_LEVELS:
            raise BodyError(f"JSON nests deeper than {limits.JSON_BODY_MAX_DEPTH_LEVELS}")

    def _array(self, position: int, depth: int) -> tuple[list[Any], int]:
        self._check_depth(depth)
        items: list[Any] = []
        position = self._skip(position + 1)
        if self._text.startswith("]", position):
            return items, position + 1
        while True:
            item, position = self._value(position, depth)
            items.append(item)
            position, closed = self._next_member(position, "]")
            if closed:
                return items, position

    def _object(self, position: int, depth: int) -> tuple[dict[Any, Any], int]:
        self._check_depth(depth)
        result: dict[Any, Any] = {}
        position = self._skip(position + 1)
        if self._text.startswith("}", position):
            return result, position + 1
        while True:
            key, position = self._key(position, depth)
            position = self._skip(position)
            if not self._text.startswith(":", position):
                raise BodyError(f"expected ':' at {position} in JSON")
            value, position = self._value(self._skip(position + 1), depth)
            result[key] = value
            position, closed = self._next_member(position, "}")
            if closed:
                return result, position

    def _next_member(self, position: int, close: str) -> tuple[int, bool]:
        """From just after an array item or object member: past the ``,`` to the next one
        (False), or past ``close`` (True). Raises :class:`BodyError` when neither follows."""
        position = self._skip(position)
        if self._text.startswith(",", position):
            return self._skip(position + 1), False
        if self._text.startswith(close, position):
            return position + 1, True
        raise BodyError(f"expected ',' or '{close}' at {position} in JSON")

    def _key(self, position: int, depth: int) -> tuple[Any, int]:
        text = self._text
        char = text[position] if position < len(text) else ""
        if char == '"':
            return self._string(position)
        if char == "-" or char.isdigit():
            return self._number(position)  # fastjson's unquoted Long/Integer key
        if char == "{":
            mapping, position = self._object(position, depth + 1)
            return _freeze(mapping), position  # fastjson's inlined object key
        raise BodyError(f"unexpected {char!r} at {position} where a JSON key was expected")


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ObjectKey(tuple((key, _freeze(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value

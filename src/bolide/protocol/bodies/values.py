"""Typed reads from parsed JSON bodies, lenient the way fastjson is when it fills Java fields.

fastjson turns ``"12"`` into a long, ``12`` into a String field's ``"12"``, an enum's name **or**
ordinal into the enum, and ignores unknown keys; so do these helpers. Anything else raises
:class:`~bolide.protocol.bodies.fastjson.BodyError` naming the field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

from bolide.protocol.bodies.fastjson import BodyError, ObjectKey, loads
from bolide.protocol.header_json import stringify_json_scalar

__all__ = [
    "as_object",
    "get_bool",
    "get_enum",
    "get_enum_or",
    "get_float",
    "get_int",
    "get_list",
    "get_object",
    "get_optional_str",
    "get_str",
    "get_str_list",
    "int_key",
    "object_key_fields",
    "parse_object",
    "to_int",
    "to_text",
]

EnumT = TypeVar("EnumT", bound=enum.IntEnum)
_MISSING: Any = object()


def parse_object(data: bytes | bytearray | memoryview | str, what: str) -> dict[Any, Any]:
    """Parse a body that must be a JSON object; raises :class:`BodyError`."""
    return as_object(loads(data), what)


def as_object(value: Any, what: str) -> dict[Any, Any]:
    """``value`` if it is an object; raises :class:`BodyError` naming ``what`` otherwise."""
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not a JSON object")
    return value


def get_object(obj: Mapping[Any, Any], key: str) -> dict[Any, Any]:
    """The object under ``key``; ``{}`` when missing or null."""
    value = obj.get(key)
    return {} if value is None else as_object(value, f"'{key}'")


def get_list(obj: Mapping[Any, Any], key: str) -> list[Any]:
    """The array under ``key``; ``[]`` when missing or null."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise BodyError(f"'{key}' is not a JSON array")
    return list(value)


def get_str(obj: Mapping[Any, Any], key: str, default: str | None = None) -> str:
    """The text under ``key`` (numbers and booleans become text); ``default`` when missing,
    :class:`BodyError` when missing without a default."""
    value = obj.get(key)
    if value is None:
        if default is None:
            raise BodyError(f"'{key}' is required but missing")
        return default
    if isinstance(value, dict | list):
        raise BodyError(f"'{key}' is not a JSON string")
    return stringify_json_scalar(value)


def get_optional_str(obj: Mapping[Any, Any], key: str) -> str | None:
    """The text under ``key``, ``None`` when missing or null."""
    return get_str(obj, key, "") if obj.get(key) is not None else None


def get_str_list(obj: Mapping[Any, Any], key: str) -> tuple[str, ...]:
    """The array of texts under ``key``; ``()`` when missing."""
    return tuple(to_text(item, key) for item in get_list(obj, key))


def get_int(obj: Mapping[Any, Any], key: str, default: int | None = None) -> int:
    """The integer under ``key`` (a number or numeric text); ``default`` when missing,
    :class:`BodyError` when missing without a default or not an integer."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is None:
            raise BodyError(f"'{key}' is required but missing")
        return default
    return to_int(value, key)


def to_int(value: Any, what: str) -> int:
    """``value`` as an integer (int, integral float, numeric text); raises :class:`BodyError`."""
    if isinstance(value, bool):
        raise BodyError(f"'{what}' is a boolean, not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise BodyError(f"'{what}' is not an integer: {value!r}")


def get_float(obj: Mapping[Any, Any], key: str, default: float = 0.0) -> float:
    """The number under ``key``; ``default`` when missing."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyError(f"'{key}' is not a number: {value!r}")


def get_bool(obj: Mapping[Any, Any], key: str, default: bool = False) -> bool:
    """The boolean under ``key`` (``true``/``false``, their texts, or 1/0); ``default`` when
    missing."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str) and str(value).lower() in ("true", "1", "false", "0"):
        return str(value).lower() in ("true", "1")
    raise BodyError(f"'{key}' is not a boolean: {value!r}")


def get_enum(obj: Mapping[Any, Any], key: str, enum_type: type[EnumT], default: EnumT) -> EnumT:
    """The enum under ``key`` given by name (Java) or ordinal (C++); ``default`` when missing."""
    value = obj.get(key)
    if value is None:
        return default
    try:
        if isinstance(value, str) and not value.lstrip("-").isdigit():
            return enum_type[value]
        return enum_type(to_int(value, key))
    except (KeyError, ValueError) as error:
        raise BodyError(f"'{key}' is not a {enum_type.__name__}: {value!r}") from error


def get_enum_or(obj: Mapping[Any, Any], key: str, enum_type: type[EnumT], fallback: EnumT) -> EnumT:
    """The enum under ``key`` as :func:`get_enum` reads it, but ``fallback`` when missing or
    not a member (a newer peer's value, e.g. a client language we do not list)."""
    try:
        return get_enum(obj, key, enum_type, fallback)
    except BodyError:
        return fallback


def int_key(key: Any, what: str) -> int:
    """A map key that Java holds as a Long/Integer: unquoted (int) or quoted (text)."""
    return to_int(key, what)


def object_key_fields(key: Any, what: str) -> dict[str, Any]:
    """The fields of a map key that Java holds as an object (``MessageQueue``).

    Accepts fastjson's inlined object key, or a key that is the object's JSON text (a writer
    that quotes non-string keys); raises :class:`BodyError` otherwise.
    """
    if isinstance(key, ObjectKey):
        return key.as_dict()
    if isinstance(key, str) and key.startswith("{"):
        return as_object(loads(key), what)
    raise BodyError(f"{what} key is not an object: {key!r}")


def to_text(value: Any, what: str) -> str:
    """A JSON scalar as text (numbers and booleans as Java prints them); raises
    :class:`BodyError` for null, objects and arrays."""
    if value is None or isinstance(value, dict | list | tuple | ObjectKey):
        raise BodyError(f"'{what}' holds a non-scalar item")
    return stringify_json_scalar(value)

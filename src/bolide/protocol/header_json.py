"""JSON command header (serialize type 0), both directions, with orjson.

What we write (keys sorted, as fastjson does; no whitespace)::

    {"code":34,"extFields":{"topic":"T"},"flag":0,"language":"PYTHON","opaque":7,
     "remark":"…","serializeTypeCurrentRPC":"JSON","version":401}

* ``remark`` is omitted when ``None``.
* ``extFields`` is omitted only when it is empty **and** the command is a response; a request
  always carries the object, ``{}`` when empty. That reproduces the two framing examples
  RocketMQ's own encoder produces, and keeps ``"extFields":{}`` on requests, which costs nothing. A
  response that a C++ client must decode (send, pull) always has fields, so it always carries
  the object, as that client requires.
* extFields values are JSON strings (the caller passes ``dict[str, str]``).

What we read: the above, the Java form, and the C++ form (trailing ``"\\n"``, ``remark: ""``,
no ``serializeTypeCurrentRPC``). ``language`` is an enum name; an unknown name reads as
``OTHER``. extFields values may be strings, numbers or booleans (C++ sends numbers); they are
turned into strings (integral numbers without a decimal point, booleans as ``"true"`` /
``"false"``), ``null`` values are dropped.
"""

from __future__ import annotations

from typing import Any

import orjson

from bolide.base.errors import ProtocolError
from bolide.protocol.codes import LanguageCode

__all__ = ["DecodedHeader", "decode_json_header", "encode_json_header", "stringify_json_scalar"]

DecodedHeader = tuple[int, LanguageCode, int, int, int, str | None, dict[str, str]]
"""(code, language, version, opaque, flag, remark, ext_fields) as read from a header."""

_FLAG_RESPONSE = 1
_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_NAME_BY_LANGUAGE: dict[int, str] = {member.value: member.name for member in LanguageCode}
_LANGUAGE_BY_NAME: dict[str, LanguageCode] = {member.name: member for member in LanguageCode}
_LANGUAGE_BY_VALUE: dict[int, LanguageCode] = {member.value: member for member in LanguageCode}
_ONLY_STRINGS = frozenset((str,))


def encode_json_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
) -> bytes:
    """Return the JSON header bytes for these command fields (layout in the module docstring).

    ``language`` is a :class:`LanguageCode`; a value outside it is written as ``"OTHER"``.
    Raises :class:`ProtocolError` if a field cannot be represented in JSON.
    """
    header: dict[str, Any] = {"code": code}
    if ext_fields or not flag & _FLAG_RESPONSE:
        header["extFields"] = ext_fields
    header["flag"] = flag
    header["language"] = _NAME_BY_LANGUAGE.get(language, "OTHER")
    header["opaque"] = opaque
    if remark is not None:
        header["remark"] = remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = version
    try:
        return orjson.dumps(header)
    except TypeError as error:  # orjson.JSONEncodeError derives from TypeError
        raise ProtocolError(f"command header cannot be encoded as JSON: {error}") from error


def decode_json_header(header: bytes) -> DecodedHeader:
    """Parse a JSON header (any of the forms in the module docstring).

    ``code`` is required; ``version``, ``opaque`` and ``flag`` default to 0; all four must be
    int32. Raises :class:`ProtocolError` for text that is not a JSON object or fields of the
    wrong type.
    """
    try:
        fields = orjson.loads(header)
    except orjson.JSONDecodeError as error:
        raise ProtocolError(f"command header is not valid JSON: {error}") from error
    if type(fields) is not dict:
        raise ProtocolError("command header is not a JSON object")
    get = fields.get
    code = get("code")
    version = get("version", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    # One combined test for the common case; the slow path says which field is wrong.
    if not (
        type(code) is int
        and type(version) is int
        and type(opaque) is int
        and type(flag) is int
        and _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
    ):
        code, version, opaque, flag = _checked_numbers(fields)
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise ProtocolError(f"command header 'remark' is not a string: {remark!r}")
    ext_fields = get("extFields")
    if ext_fields is None:
        ext_fields = {}
    elif type(ext_fields) is not dict:
        raise ProtocolError("command header 'extFields' is not a JSON object")
    elif not _ONLY_STRINGS.issuperset(map(type, ext_fields.values())):
        ext_fields = _stringify_values(ext_fields)
    language = get("language")
    if type(language) is str:
        language = _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    else:
        language = _decode_language(language)
    return code, language, version, opaque, flag, remark, ext_fields


def _checked_numbers(fields: dict[str, Any]) -> tuple[int, int, int, int]:
    code = fields.get("code")
    if type(code) is not int or not _INT32_MIN <= code <= _INT32_MAX:
        raise ProtocolError(f"command header has no int32 'code': {code!r}")
    return (
        code,
        _optional_int32(fields, "version"),
        _optional_int32(fields, "opaque"),
        _optional_int32(fields, "flag"),
    )


def _optional_int32(fields: dict[str, Any], key: str) -> int:
    value = fields.get(key, 0)
    if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
        if value is None:
            return 0
        raise ProtocolError(f"command header '{key}' is not an int32: {value!r}")
    return value


def _decode_language(language: object) -> LanguageCode:
    if type(language) is str:
        return _LANGUAGE_BY_NAME.get(language, LanguageCode.OTHER)
    if type(language) is int:
        # Not sent by RocketMQ peers, but the ordinal is unambiguous, so accept it.
        return _LANGUAGE_BY_VALUE.get(language, LanguageCode.OTHER)
    return LanguageCode.OTHER


def _stringify_values(ext_fields: dict[str, Any]) -> dict[str, str]:
    """Coerce C++-style values the way fastjson does when it fills a Map<String, String>."""
    result: dict[str, str] = {}
    for key, value in ext_fields.items():
        if value is None:
            continue
        result[key] = stringify_json_scalar(value)
    return result


def stringify_json_scalar(value: object) -> str:
    """Return the Java ``String.valueOf`` text of a JSON value (``null`` must be handled first).

    Booleans become ``"true"``/``"false"``, integral numbers lose any decimal point, other
    numbers keep Python's shortest form, objects and arrays become compact JSON text.
    """
    if type(value) is str:
        return value
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        # Integral values that fit a Java long print as integers ("1" for C++'s 1.0); beyond
        # that the exponent form stays short.
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
    return orjson.dumps(value).decode()

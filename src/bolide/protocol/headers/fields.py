"""Reading and writing custom-header fields (a command's ``extFields``, all strings).

Reading follows the Java side, made strict where Java only logs: a missing required field or
an unparsable number raises :class:`HeaderError` naming the field. Leniencies, for peers that
differ from Java:

* booleans: ``"true"`` in any case **and** ``"1"`` are true (C++ sends ``"0"``/``"1"``);
  anything else, or a missing field, is false;
* an optional string or number that is present but empty (``""``) reads as absent (C++ sends
  ``""`` for fields it does not use);
* numbers are Python ``int`` literals in base 10 (surrounding spaces tolerated) within a
  Java long (``JAVA_LONG_MIN``..``JAVA_LONG_MAX``).

Writing emits Java's form: numbers in base 10, booleans ``"true"``/``"false"``, absent
(``None``) optional fields left out.

Most headers follow these rules field by field and are declared, not written: a subclass of
:class:`WireHeader` decorated with :func:`wire_header` names each field's wire key once with
:func:`wire`, and gets ``from_ext_fields``/``to_ext_fields`` derived from its annotations and
defaults (see :func:`wire_header`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, Self, TypeVar, overload

from bolide.base.errors import InvariantViolationError, ProtocolError, invariant

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "TRUE_TEXTS",
    "Header",
    "HeaderError",
    "WireHeader",
    "decode_header",
    "format_bool",
    "frozen_constructor",
    "optional_int",
    "optional_str",
    "parse_bool",
    "put_optional",
    "required_int",
    "required_str",
    "wire",
    "wire_header",
]

T = TypeVar("T", bound="DataclassInstance")

TRUE_TEXTS = frozenset(("true", "1"))
JAVA_LONG_MIN, JAVA_LONG_MAX = -(2**63), 2**63 - 1
"""Every integer header field is a Java int or long: a value outside a long is refused (it
would otherwise be stored, then fail every JSON write of it: topics.json, registration)."""
"""Lower-cased texts read as true."""


class HeaderError(ProtocolError):
    """A custom header lacks a required field or carries a value that cannot be parsed."""


class Header(Protocol):
    """What every header dataclass offers."""

    def to_ext_fields(self) -> dict[str, str]: ...

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self: ...


def required_str(fields: Mapping[str, str], key: str) -> str:
    """The value of ``key``; raises :class:`HeaderError` when missing."""
    value = fields.get(key)
    if value is None:
        raise HeaderError(f"header field '{key}' is required but missing")
    return value


def optional_str(fields: Mapping[str, str], key: str) -> str | None:
    """The value of ``key``, or ``None`` when missing or empty."""
    return fields.get(key) or None


def required_int(fields: Mapping[str, str], key: str) -> int:
    """The integer value of ``key``; raises :class:`HeaderError` when missing or not a number."""
    value = fields.get(key)
    if value is None:
        raise HeaderError(f"header field '{key}' is required but missing")
    return _parse_int(key, value)


def optional_int(fields: Mapping[str, str], key: str) -> int | None:
    """The integer value of ``key``, ``None`` when missing or empty; raises
    :class:`HeaderError` when present but not a number."""
    value = fields.get(key)
    if not value:
        return None
    return _parse_int(key, value)


def parse_bool(fields: Mapping[str, str], key: str) -> bool:
    """Whether ``key`` holds ``"true"`` (any case) or ``"1"``; false otherwise or when missing."""
    value = fields.get(key)
    return value is not None and value.lower() in TRUE_TEXTS


def format_bool(value: bool) -> str:
    """Java's ``String.valueOf(boolean)``."""
    return "true" if value else "false"


def put_optional(fields: dict[str, str], key: str, value: str | int | None) -> None:
    """Set ``fields[key]`` to the text of ``value`` unless it is ``None``."""
    if value is not None:
        fields[key] = value if type(value) is str else str(value)


def _parse_int(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError as error:
        raise HeaderError(f"header field '{key}' is not an integer: {value!r}") from error
    if not JAVA_LONG_MIN <= number <= JAVA_LONG_MAX:
        raise HeaderError(f"header field '{key}' is outside a Java long: {value!r}")
    return number


def frozen_constructor(cls: type[T]) -> Callable[..., T]:
    """A positional constructor for the frozen slots dataclass ``cls`` (every field, in
    declaration order) for hot decode paths.

    The generated ``__init__`` of a frozen dataclass sets each field through
    ``object.__setattr__``, about 0.2 µs a field; the slot descriptors' own setters take half
    that, which is 1.5 µs saved per 14-field send header. Same instance, same immutability
    afterwards. Raises :class:`ValueError` on a wrong number of values (a bug).
    """
    setters = tuple(getattr(cls, field.name).__set__ for field in dataclasses.fields(cls))
    new = object.__new__

    def construct(*values: Any) -> T:
        instance = new(cls)
        for setter, value in zip(setters, values, strict=True):
            setter(instance, value)
        return instance

    return construct


# -- The declarative codec -------------------------------------------------------------------

_WIRE_NAME_KEY = "bolide.wire_name"
"""Key of a header field's wire name in its ``dataclasses.Field.metadata``."""

V = TypeVar("V")
H = TypeVar("H", bound="WireHeader")


@overload
def wire(name: str) -> Any: ...


@overload
def wire(name: str, *, default: V) -> V: ...


def wire(name: str, *, default: Any = dataclasses.MISSING) -> Any:
    """Declare a :func:`wire_header` field: its Java wire key ``name`` and, when given, its
    ``default`` (the value when the key is missing or empty; no default: the key is
    required)."""
    return dataclasses.field(default=default, metadata={_WIRE_NAME_KEY: name})


_Reader = Callable[[Mapping[str, str], str], Any]
_Writer = Callable[[Any], str]


class _WireField(NamedTuple):
    attribute: str
    name: str
    read: _Reader
    write: _Writer
    omitted_when_none: bool


class _WirePlan(NamedTuple):
    fields: tuple[_WireField, ...]
    """In declaration order (the constructor's)."""
    always_written: tuple[_WireField, ...]
    """Written first, in declaration order."""
    omitted_when_none: tuple[_WireField, ...]
    """Written after them unless ``None``, in declaration order."""


class WireHeader:
    """Base of a header declared with :func:`wire_header`: ``from_ext_fields`` and
    ``to_ext_fields`` follow the class's plan. A header with one special rule may override
    either, calling :func:`decode_header` for the rest."""

    __slots__ = ()
    _wire_plan: ClassVar[_WirePlan]

    if TYPE_CHECKING:

        def __init__(self, *values: Any) -> None: ...

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError` (required field missing, bad number)."""
        return decode_header(cls, fields)

    def to_ext_fields(self) -> dict[str, str]:
        """Java's form; ``None`` fields left out."""
        plan = self._wire_plan
        fields = {
            field.name: field.write(getattr(self, field.attribute)) for field in plan.always_written
        }
        for field in plan.omitted_when_none:
            value = getattr(self, field.attribute)
            if value is not None:
                fields[field.name] = field.write(value)
        return fields


def decode_header(cls: type[H], fields: Mapping[str, str]) -> H:
    """An instance of the :func:`wire_header` class ``cls`` read from ``fields`` by its plan;
    raises :class:`HeaderError`."""
    return cls(*[field.read(fields, field.name) for field in cls._wire_plan.fields])


@typing.dataclass_transform(frozen_default=True, field_specifiers=(wire,))
def wire_header(cls: type[H]) -> type[H]:
    """Make ``cls`` (a :class:`WireHeader` whose fields are all declared with :func:`wire`) a
    frozen slots dataclass and compute once how it reads and writes its fields.

    By annotation and default:

    * ``str``/``int``/``bool`` without a default: required (a missing key raises
      :class:`HeaderError` naming it; a ``bool`` is then read as :func:`parse_bool` reads);
    * the same with a default: that default when the key is missing or empty;
    * ``str | None``/``int | None``/``bool | None`` with default ``None``: ``None`` when the
      key is missing or empty, and left out of the encoding when ``None``.

    Encoding writes numbers with ``str``, booleans with :func:`format_bool`: first every field
    always written, then the ones left out when ``None``, each group in declaration order (the
    order of the hand-written headers before them, which golden frames pin). A field of
    another type or an optional one with a default other than ``None`` is a bug:
    :class:`~bolide.base.errors.InvariantViolationError`.
    """
    made = dataclasses.dataclass(frozen=True, slots=True)(cls)
    hints = typing.get_type_hints(made)
    declared = dataclasses.fields(typing.cast("type[DataclassInstance]", made))
    plan = tuple(_wire_field(field, hints[field.name]) for field in declared)
    always = tuple(field for field in plan if not field.omitted_when_none)
    omittable = tuple(field for field in plan if field.omitted_when_none)
    made._wire_plan = _WirePlan(plan, always, omittable)
    return made


def _wire_field(field: dataclasses.Field[Any], annotation: object) -> _WireField:
    name = field.metadata.get(_WIRE_NAME_KEY)
    kind = _KINDS.get(annotation)
    if not isinstance(name, str) or kind is None:
        raise InvariantViolationError(
            f"header field {field.name!r} needs wire(...) and one of the annotations "
            f"str, int, bool (or X | None), not {annotation}"
        )
    required_read, default_read, write, optional = kind
    if optional:
        invariant(field.default is None, f"header field {field.name!r}: default must be None")
        read = required_read
    elif field.default is dataclasses.MISSING:
        read = required_read
    else:
        read = _with_default(default_read, field.default)
    return _WireField(field.name, name, read, write, optional)


def _with_default(read: _Reader, default: object) -> _Reader:
    def read_or_default(fields: Mapping[str, str], key: str) -> Any:
        value = read(fields, key)
        return default if value is None else value

    return read_or_default


def _required_bool(fields: Mapping[str, str], key: str) -> bool:
    return required_str(fields, key).lower() in TRUE_TEXTS


def _optional_bool(fields: Mapping[str, str], key: str) -> bool | None:
    value = fields.get(key)
    return None if not value else value.lower() in TRUE_TEXTS


def _same_text(value: str) -> str:
    return value


_KINDS: dict[object, tuple[_Reader, _Reader, _Writer, bool]] = {
    # annotation: (read without a default, read before a default, write, left out when None)
    str: (required_str, optional_str, _same_text, False),
    int: (required_int, optional_int, str, False),
    bool: (_required_bool, _optional_bool, format_bool, False),
    str | None: (optional_str, optional_str, _same_text, True),
    int | None: (optional_int, optional_int, str, True),
    bool | None: (_optional_bool, _optional_bool, format_bool, True),
}

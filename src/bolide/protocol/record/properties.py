"""The properties string of a message (pure-Python twin): ``name\\x01value\\x02`` pairs.

docs/protocol.md §3.3: ``name \\x01 value`` pairs joined by ``\\x02``; Java writes no
separator after the last pair, C++ writes one. Encoding, tolerant decoding, the string edits
the broker's send path makes without decoding, and the four properties the store reads
without parsing. The hot functions also exist compiled (``_properties.pyx`` beside
this file); the last line swaps them in (:mod:`bolide.base.compiled`).
``tests/protocol/test_wire_twins.py`` holds both to the same answers.

Import these names from :mod:`bolide.protocol.record`, the record's one door.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from bolide.base import compiled
from bolide.base.errors import ProtocolError

NAME_VALUE_SEPARATOR: Final = "\x01"
"""Between a property name and its value."""
PROPERTY_SEPARATOR: Final = "\x02"
"""Between two name/value pairs (Java writes none after the last pair, C++ writes one)."""


def encode_properties(properties: Mapping[str, str]) -> str:
    """The properties string of ``properties``, in the mapping's order (Java's layout).

    Raises:
        ProtocolError: a name is empty, or a name or value contains ``\\x01`` or ``\\x02``
            (the string could not be parsed back).
    """
    if not properties:
        return ""
    text = PROPERTY_SEPARATOR.join(
        [f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in properties.items()]
    )
    count = len(properties)
    # One C-level count per separator checks every name and value at once.
    if text.count(NAME_VALUE_SEPARATOR) != count or text.count(PROPERTY_SEPARATOR) != count - 1:
        raise ProtocolError(_separator_complaint(properties))
    if "" in properties:
        raise ProtocolError("a property name is empty")
    return text


def _separator_complaint(properties: Mapping[str, str]) -> str:
    for name, value in properties.items():
        for separator in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
            if separator in name or separator in value:
                return f"property {name!r} contains the separator {separator!r}"
    return "a property contains a separator"


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string written by Java, C++ or anyone else.

    Tolerant, as the Java parser is: a trailing separator and empty chunks are skipped, a chunk
    without ``\\x01`` or with an empty name is skipped, an empty value is kept as ``""``, a value
    keeps any further ``\\x01``, and a repeated name keeps its last value. Never raises.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for chunk in text.split(PROPERTY_SEPARATOR):
        name, separator, value = chunk.partition(NAME_VALUE_SEPARATOR)
        if separator and name:
            result[name] = value
    return result


def join_properties(first: str, second: str) -> str:
    """Append the properties string ``second`` to ``first`` (either may be empty).

    A separator is inserted only when ``first`` does not already end with one: the broker
    applies this rule when it appends a batch's own properties and CLUSTER to each inner
    message (docs/protocol.md §2.2).
    """
    if not first:
        return second
    if not second:
        return first
    if first.endswith(PROPERTY_SEPARATOR):
        return first + second
    return first + PROPERTY_SEPARATOR + second


def properties_are_plain(text: str, acted_on: tuple[str, ...]) -> bool:
    """Whether ``text`` may be edited as a string instead of decoded and encoded again: it
    names none of ``acted_on`` (not even as the end of a longer name), every pair has a name
    and exactly one ``\x01``, and there is no empty chunk — then decoding and encoding again
    would give back the same pairs. The broker's send path (docs/architecture.md, "Sending
    and storing")."""
    return _is_plain(text, tuple(f"{name}{NAME_VALUE_SEPARATOR}" for name in acted_on))


def _is_plain(text: str, acted_on_marks: tuple[str, ...]) -> bool:
    if not text:
        return True
    if any(mark in text for mark in acted_on_marks):
        return False
    pairs = text.count(PROPERTY_SEPARATOR) + (0 if text.endswith(PROPERTY_SEPARATOR) else 1)
    return (
        text.count(NAME_VALUE_SEPARATOR) == pairs
        and not text.startswith((NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR))
        and f"{PROPERTY_SEPARATOR}{NAME_VALUE_SEPARATOR}" not in text
        and PROPERTY_SEPARATOR * 2 not in text
    )


def edit_plain_properties(
    text: str, acted_on_marks: tuple[str, ...], drop_name: str, extra: str
) -> str | None:
    """The properties string a common send stores, in one call: None when ``text`` is not
    plain (:func:`properties_are_plain`; ``acted_on_marks`` are the acted-on names each
    followed by ``\x01``), else ``join_properties(without_property(text, drop_name), extra)``.
    The broker's send fast path (WAIT dropped, CLUSTER appended)."""
    if not _is_plain(text, acted_on_marks):
        return None
    return join_properties(without_property(text, drop_name), extra)


def without_property(text: str, name: str) -> str:
    """``text`` without its ``name`` pairs, the others untouched; ``text`` itself when it has
    none (a properties string, as :func:`properties_are_plain` accepts)."""
    if f"{name}{NAME_VALUE_SEPARATOR}" not in text:
        return text
    mark = property_mark(name)
    padded = PROPERTY_SEPARATOR + text
    at = padded.find(mark)
    while at >= 0:
        end = padded.find(PROPERTY_SEPARATOR, at + 1)
        padded = padded[:at] if end < 0 else padded[:at] + padded[end:]
        at = padded.find(mark, at)
    return padded[1:]


def property_mark(name: str) -> str:
    """What :func:`property_value` looks for to find ``name``: ``"\\x02NAME\\x01"``."""
    return f"{PROPERTY_SEPARATOR}{name}{NAME_VALUE_SEPARATOR}"


# The four properties the store reads without parsing the string (names as in PropertyKey).
TAGS_MARK: Final = property_mark("TAGS")
KEYS_MARK: Final = property_mark("KEYS")
UNIQ_KEY_MARK: Final = property_mark("UNIQ_KEY")
DELAY_MARK: Final = property_mark("DELAY")


def property_value(padded: str, mark: str) -> str | None:
    """The value of the last ``name=value`` pair whose name is in ``mark`` (``"\\x02NAME\\x01"``)
    in ``padded`` (a properties string with ``"\\x02"`` put in front), or None.

    Same answer as ``decode_properties(text).get(NAME)``: a pair starts after a separator, its
    name ends at the first ``\\x01``, its value runs to the next separator, the last pair of a
    repeated name wins.
    """
    at = padded.rfind(mark)
    if at < 0:
        return None
    start = at + len(mark)
    end = padded.find(PROPERTY_SEPARATOR, start)
    return padded[start:] if end < 0 else padded[start:end]


def store_properties(text: str) -> StoreProperties:
    """TAGS, KEYS, UNIQ_KEY and DELAY of the properties string ``text`` (None when absent):
    :func:`property_value` of each, in one call (the store's put path)."""
    padded = PROPERTY_SEPARATOR + text
    return (
        property_value(padded, TAGS_MARK),
        property_value(padded, KEYS_MARK) if KEYS_MARK in padded else None,
        property_value(padded, UNIQ_KEY_MARK),
        property_value(padded, DELAY_MARK),
    )


StoreProperties = tuple[str | None, str | None, str | None, str | None]
"""TAGS, KEYS, UNIQ_KEY and DELAY of a record (None when absent): what the store reads."""

COMPILED_NAMES: Final = ("decode_properties", "edit_plain_properties", "store_properties")
"""The functions ``_properties.pyx`` also provides, with the same signatures and answers."""

compiled.install(globals(), "bolide.protocol.record._compiled", COMPILED_NAMES)

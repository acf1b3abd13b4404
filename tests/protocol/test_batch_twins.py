"""The compiled batch-body encoder (``record/_batch.pyx``) against its pure-Python twin
(``door.encode_batch_body``): same bytes, same errors.

The compiled module is imported directly, so these run whatever BOLIDE_PURE_PYTHON says; they
skip only where the extension was not built (no compiler).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import compiled, limits
from bolide.base.errors import ProtocolError
from bolide.protocol import record as door
from bolide.protocol.record import BatchEntry, decode_batch_body

TWIN = "bolide.protocol.record.batch"


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    try:
        return importlib.import_module("bolide.protocol.record._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled batch encoder was not built (pure-Python install)")


def _pure() -> Callable[..., Any]:
    assert callable(door.encode_batch_body)  # imported: its twin is registered
    return compiled.pure_twin(TWIN, "encode_batch_body")


def _outcome(function: Callable[..., Any], entries: Any) -> tuple[str, Any]:
    try:
        return "ok", function(entries)
    except ProtocolError as error:
        return "error", (type(error).__name__, str(error))


_PROPERTIES = st.text(alphabet=st.sampled_from("ab\x01\x02 é中😀=\ud800"), max_size=30)
_ENTRIES = st.lists(
    st.builds(
        BatchEntry,
        flag=st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(2**31, 2**40)),
        body=st.binary(max_size=64),
        properties=_PROPERTIES,
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(entries=_ENTRIES)
def test_the_twins_give_the_same_bytes_and_errors(
    fast: ModuleType, entries: list[BatchEntry]
) -> None:
    expected = _outcome(_pure(), entries)
    assert _outcome(fast.encode_batch_body, entries) == expected
    if expected[0] == "ok" and "\ud800" not in "".join(e.properties for e in entries):
        decoded = decode_batch_body(expected[1])
        assert [(e.flag, e.body, e.properties) for e in decoded] == [
            (e.flag, e.body, e.properties) for e in entries
        ]


def test_long_properties_and_too_many_entries_fail_alike(fast: ModuleType) -> None:
    too_long = "é" * (limits.MESSAGE_PROPERTIES_MAX_BYTES // 2 + 1)
    cases: list[list[Any]] = [
        [BatchEntry(0, b"a", "x"), BatchEntry(0, b"b", too_long)],
        [BatchEntry(0, b"", "")] * (limits.BATCH_MESSAGES_MAX_COUNT + 1),
        [BatchEntry(True, bytearray(b"ab"), "p")],  # type: ignore[arg-type]  # bytes-like body
    ]
    for entries in cases:
        assert _outcome(fast.encode_batch_body, entries) == _outcome(_pure(), entries)


def test_the_producer_sends_are_entries_too(fast: ModuleType) -> None:
    class Send:
        def __init__(self, flag: int, body: bytes, properties: str) -> None:
            self.flag, self.body, self.properties = flag, body, properties

    sends = [Send(index, bytes([index]) * 100, f"UNIQ_KEY\x01K{index}") for index in range(40)]
    assert fast.encode_batch_body(sends) == _pure()(sends)

"""The compiled index-entry writer (``_index_file.pyx``) against its pure-Python twin.

For generated batches of records (offsets, store times, key hashes) written into index files
that already hold entries (and stale slots past the entry count, as after a crash), both
twins must leave the same bytes and return the same counts. Skips where not built.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.base import compiled
from bolide.store import index_file

_SLOTS = 7


@pytest.fixture(scope="module")
def fast() -> ModuleType:
    try:
        return importlib.import_module("bolide.store._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pytest.skip("the compiled index writer was not built (pure-Python install)")


# Store times within int32 seconds of the file's begin time (an index file spans minutes).
_RECORD = st.tuples(
    st.integers(0, 2**50),
    st.integers(2**41, 2**41 + 2**31 * 1000 - 1),
    st.lists(st.integers(0, 2**32 - 1), max_size=4),
)


@given(
    st.lists(_RECORD, min_size=1, max_size=6),
    st.integers(0, 3),
    st.binary(min_size=4 * _SLOTS, max_size=4 * _SLOTS),
    st.integers(2**41 - 10_000, 2**41 + 10_000),
)
def test_index_entries_are_written_alike(
    fast: ModuleType,
    records: list[tuple[int, int, list[int]]],
    existing: int,
    slots: bytes,
    begin_time_ms: int,
) -> None:
    total = existing + sum(len(hashes) for _, _, hashes in records)
    size = index_file.HEADER_BYTES + 4 * _SLOTS + index_file.ENTRY_BYTES * (total + 1)
    entry_at = index_file.HEADER_BYTES + 4 * _SLOTS + index_file.ENTRY_BYTES * existing
    results = []
    pure = compiled.pure_twin("bolide.store.index_file", "write_index_entries")
    for write in (fast.write_index_entries, pure):
        buffer = bytearray(size)
        buffer[index_file.HEADER_BYTES : index_file.HEADER_BYTES + 4 * _SLOTS] = slots
        answer = write(
            memoryview(buffer), records, entry_at, existing, _SLOTS, begin_time_ms, 5, 77
        )
        results.append((answer, bytes(buffer)))
    assert results[0] == results[1]


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_a_store_time_decades_after_the_begin_time_is_clamped_alike(
    fast: ModuleType, twin: str
) -> None:
    # Found by the property test above: 2**31 s after the begin time overflowed the signed
    # 32-bit delta (the pure twin raised struct.error, the compiled one wrapped negative).
    write = (
        fast.write_index_entries
        if twin == "compiled"
        else compiled.pure_twin("bolide.store.index_file", "write_index_entries")
    )
    begin_time_ms = 2**41
    late_ms = begin_time_ms + (2**31 + 9) * 1000
    size = index_file.HEADER_BYTES + 4 * _SLOTS + index_file.ENTRY_BYTES * 2
    buffer = bytearray(size)
    entry_at = index_file.HEADER_BYTES + 4 * _SLOTS + index_file.ENTRY_BYTES
    count, _, end_time_ms = write(
        memoryview(buffer), [(123, late_ms, [42])], entry_at, 0, _SLOTS, begin_time_ms, 5, 77
    )
    assert (count, end_time_ms) == (1, late_ms)
    delta_s = int.from_bytes(buffer[entry_at + 12 : entry_at + 16], "big", signed=True)
    assert delta_s == 2**31 - 1

"""Offset message ids and UNIQ_KEY generation (docs/protocol.md §3.4)."""

from __future__ import annotations

import contextlib
import datetime
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bolide.base.clock import ManualClock
from bolide.base.errors import ProtocolError
from bolide.protocol.msgid import (
    UniqueKeyGenerator,
    decode_offset_message_id,
    offset_message_id,
)


def test_offset_message_id_golden_appendix_a() -> None:
    assert offset_message_id(("127.0.0.1", 10911), 0x1234) == "7F00000100002A9F0000000000001234"


def test_decode_offset_message_id_golden() -> None:
    assert decode_offset_message_id("7F00000100002A9F0000000000001234") == (
        ("127.0.0.1", 10911),
        0x1234,
    )
    # Lower case is accepted too.
    assert decode_offset_message_id("7f00000100002a9f0000000000001234")[1] == 0x1234


def test_ipv6_offset_message_id_has_56_characters() -> None:
    message_id = offset_message_id(("::1", 10911), 7)
    assert len(message_id) == 56
    assert message_id == "0" * 31 + "1" + "00002A9F" + "0000000000000007"
    assert decode_offset_message_id(message_id) == (("::1", 10911), 7)


_ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda parts: ".".join(map(str, parts)))


@given(_ipv4, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))
def test_offset_message_id_round_trip(host: str, port: int, offset: int) -> None:
    message_id = offset_message_id((host, port), offset)
    assert re.fullmatch("[0-9A-F]{32}", message_id)
    assert decode_offset_message_id(message_id) == ((host, port), offset)


@pytest.mark.parametrize(
    "message_id",
    ["", "7F00000100002A9F000000000000123", "Z" * 32, "7F0000010000 2A9F000000000000123", "é" * 32],
)
def test_decode_offset_message_id_refuses_garbage(message_id: str) -> None:
    with pytest.raises(ProtocolError):
        decode_offset_message_id(message_id)


def test_offset_message_id_refuses_bad_input() -> None:
    with pytest.raises(ProtocolError):
        offset_message_id(("broker-a", 10911), 0)
    with pytest.raises(ProtocolError):
        offset_message_id(("127.0.0.1", 2**31), 0)
    with pytest.raises(ProtocolError):
        offset_message_id(("127.0.0.1", 1), -1 - 2**63)


@given(st.text(max_size=60))
def test_decode_offset_message_id_raises_only_protocol_error(text: str) -> None:
    with contextlib.suppress(ProtocolError):
        decode_offset_message_id(text)


# --- UNIQ_KEY ------------------------------------------------------------------------------

_MAY_2024_MS = int(datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC).timestamp() * 1000)


def test_unique_key_layout() -> None:
    clock = ManualClock(start_ms=_MAY_2024_MS + 0x1234)
    generator = UniqueKeyGenerator("10.0.0.7", 0x10ABCD, clock, instance_hash=0xCAFEBABE)
    first = generator.next_id()
    second = generator.next_id()
    # ip | pid & 0xFFFF | instance hash | ms since the month started | counter
    assert first == "0A000007" + "ABCD" + "CAFEBABE" + "00001234" + "0000"
    assert second == "0A000007" + "ABCD" + "CAFEBABE" + "00001234" + "0001"


def test_unique_key_time_restarts_each_month() -> None:
    clock = ManualClock(start_ms=_MAY_2024_MS - 5)
    generator = UniqueKeyGenerator("10.0.0.7", 1, clock, instance_hash=0)
    april = generator.next_id()
    clock.advance_ms(10)
    may = generator.next_id()
    assert may[20:28] == "00000005"
    # 5 ms before May: 30 days of April minus 5 ms.
    assert int(april[20:28], 16) == 30 * 86_400_000 - 5


def test_unique_keys_within_one_millisecond_keep_the_layout() -> None:
    """Ids of one millisecond reuse its text up to the counter; each is still the layout's."""
    clock = ManualClock(start_ms=_MAY_2024_MS + 7)
    generator = UniqueKeyGenerator("10.0.0.7", 0xABCD, clock, instance_hash=0xCAFEBABE)
    head = "0A000007" + "ABCD" + "CAFEBABE"
    expected: list[str] = []
    got: list[str] = []
    counter = 0
    for elapsed_ms, count in ((7, 3), (8, 1), (8 + 65_536, 2)):
        clock.set_ms(_MAY_2024_MS + elapsed_ms)
        for _ in range(count):
            got.append(generator.next_id())
            expected.append(f"{head}{elapsed_ms:08X}{counter:04X}")
            counter += 1
    assert got == expected


def test_unique_keys_are_distinct_and_32_uppercase_hex() -> None:
    clock = ManualClock()
    generator = UniqueKeyGenerator("127.0.0.1", 4321, clock)
    ids = set()
    for step in range(70_000):
        if step % 1000 == 0:
            clock.advance_ms(1)
        ids.add(generator.next_id())
    assert len(ids) == 70_000
    assert all(re.fullmatch("[0-9A-F]{32}", one) for one in list(ids)[:100])


def test_two_generators_of_one_process_differ_by_default() -> None:
    clock = ManualClock()
    first = UniqueKeyGenerator("127.0.0.1", 1, clock)
    second = UniqueKeyGenerator("127.0.0.1", 1, clock)
    assert first.next_id() != second.next_id()


def test_ipv6_unique_key_has_56_characters() -> None:
    generator = UniqueKeyGenerator("::1", 1, ManualClock())
    assert len(generator.next_id()) == 56


def test_unique_key_generator_refuses_host_names() -> None:
    with pytest.raises(ProtocolError):
        UniqueKeyGenerator("localhost", 1, ManualClock())

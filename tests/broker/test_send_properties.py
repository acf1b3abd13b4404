"""The send handler's string fast path for properties gives what decoding, editing and encoding
again gives (docs/benchmarks.md "Broker profile")."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bolide.broker.handlers.send_properties import plain_properties, without_wait
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    decode_properties,
    encode_properties,
)

SAFE_TEXT = st.text(
    st.characters(blacklist_characters=(NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, "\0")),
    max_size=12,
)
NAMES = st.one_of(SAFE_TEXT.filter(bool), st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT"]))


def slow_path(text: str) -> dict[str, str]:
    properties = decode_properties(text)
    properties.pop(PropertyKey.WAIT, None)
    return properties


@given(st.lists(st.tuples(NAMES, SAFE_TEXT), max_size=6), st.booleans())
def test_the_fast_path_keeps_the_same_pairs(pairs: list[tuple[str, str]], cpp: bool) -> None:
    text = PROPERTY_SEPARATOR.join(f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in pairs)
    if cpp and text:
        text += PROPERTY_SEPARATOR  # the C++ client ends every pair with a separator
    if not plain_properties(text):
        return  # the handler decodes it the slow way

    fast = without_wait(text)

    assert decode_properties(fast) == slow_path(text)
    assert PropertyKey.WAIT not in decode_properties(fast)


def test_wait_is_removed_wherever_it_stands() -> None:
    java = encode_properties({"WAIT": "true", "TAGS": "a", "UNIQ_KEY": "k"})
    assert without_wait(java) == "TAGS\x01a\x02UNIQ_KEY\x01k"
    assert without_wait("TAGS\x01a\x02WAIT\x01true\x02") == "TAGS\x01a\x02"
    assert without_wait("TAGS\x01a\x02WAIT\x01true") == "TAGS\x01a"
    text = "TAGS\x01a"
    assert without_wait(text) is text
    assert without_wait("XWAIT\x01b") == "XWAIT\x01b"


def test_properties_the_broker_acts_on_take_the_slow_path() -> None:
    for name in ("DELAY", "CLUSTER", "BOLIDE_DELIVERED_FROM", "TIMER_DELAY_SEC"):
        assert not plain_properties(f"TAGS\x01a\x02{name}\x013")
    for malformed in ("\x01a", "a\x01b\x01c", "a\x01b\x02\x02c\x01d", "a\x01b\x02\x01c"):
        assert not plain_properties(malformed)
    assert plain_properties("")
    assert plain_properties("TAGS\x01a\x02KEYS\x01k1 k2")

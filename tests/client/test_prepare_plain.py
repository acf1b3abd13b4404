"""The plain-message fast path (``prepare_plain``) against the general one (``prepare_message``).

For any message, ``prepare_plain`` answers None (not plain: the producer then takes the general
path) or exactly what ``prepare_message`` gives; and the messages it is meant for (a checked,
non-retry topic, a small bytes body, no system property that changes the send) are taken.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.message import Message
from bolide.client.producer.prepare import SendSettings, prepare_message, prepare_plain
from bolide.protocol.message import PropertyKey

NOW_MS = 1_700_000_000_123
SETTINGS = SendSettings("pg", compress_over_bytes=64, max_message_bytes=96)

_NAMES = st.sampled_from(
    [
        "TAGS",
        "KEYS",
        "color",
        "é",
        "",
        "a\x01b",
        "c\x02",
        PropertyKey.UNIQ_KEY,
        PropertyKey.WAIT,
        PropertyKey.DELAY,
        PropertyKey.TIMER_DELAY_MS,
        PropertyKey.TIMER_DELIVER_MS,
        PropertyKey.TIMER_DELAY_SEC,
        PropertyKey.RECONSUME_TIME,
        PropertyKey.MAX_RECONSUME_TIMES,
    ]
)
_VALUES = st.one_of(
    st.sampled_from(["true", "false", "3", "x\x01", "\x02", "中"]),
    st.text(max_size=8),
    st.just("v" * 11_000),
)
_TOPICS = st.sampled_from(["orders", "%RETRY%group", "bad topic", "TBW102", "t" * 128])
_BODIES = st.one_of(st.binary(max_size=120), st.binary(min_size=1, max_size=8).map(bytearray))
_KEYS = st.sampled_from(["0A0B0C0D000100000000000000000001", "K\x01", "K\x02", "id"])


def _outcome(function: object, *arguments: object) -> tuple[str, object]:
    try:
        return "ok", function(*arguments)  # type: ignore[operator]
    except BolideError as error:
        return "error", (type(error).__name__, str(error))


@settings(max_examples=400, deadline=None)
@given(
    topic=_TOPICS,
    body=_BODIES,
    flag=st.integers(-(2**31), 2**31 - 1),
    properties=st.dictionaries(_NAMES, _VALUES, max_size=4),
    unique_key=_KEYS,
)
def test_plain_answers_none_or_what_the_general_path_gives(
    topic: str, body: bytes, flag: int, properties: dict[str, str], unique_key: str
) -> None:
    message = Message(topic, body, flag, properties)
    general = _outcome(prepare_message, message, unique_key, NOW_MS, SETTINGS)
    plain = prepare_plain(message, unique_key, NOW_MS, SETTINGS)
    if plain is not None:
        assert ("ok", plain) == general


def test_the_common_send_is_plain_and_batchable() -> None:
    settings_ = SendSettings("pg")
    prepare_message(Message("orders", b"warm"), "ID0", NOW_MS, settings_)  # topic checked once
    for message in (
        Message("orders", b"x" * 1024),
        Message("orders", b"y", 7, tags="paid", keys=["k1", "k2"]),
        Message("orders", b"z", properties={"color": "blue"}),
    ):
        plain = prepare_plain(message, "ID1", NOW_MS, settings_)
        assert plain is not None and plain.batchable
        assert plain == prepare_message(message, "ID1", NOW_MS, settings_)


def test_what_needs_the_general_path_is_not_plain() -> None:
    settings_ = SendSettings("pg", compress_over_bytes=100)
    prepare_message(Message("orders", b"warm"), "ID0", NOW_MS, settings_)
    not_plain = [
        Message("never-sent-before", b"x"),  # the topic is checked by the general path first
        Message("orders", b"x" * 100),  # compressed
        Message("orders", b""),  # refused there
        Message("orders", b"x", delay_level=2),
        Message("orders", b"x", properties={PropertyKey.UNIQ_KEY: "MINE"}),
        Message("orders", b"x", properties={PropertyKey.WAIT: "false"}),
        Message("orders", b"x", properties={"big": "v" * limits.MESSAGE_PROPERTIES_MAX_BYTES}),
        Message("orders", b"x", properties={"a\x01": "b"}),
    ]
    for message in not_plain:
        assert prepare_plain(message, "ID1", NOW_MS, settings_) is None

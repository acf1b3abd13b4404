import pytest

from bolide.base import limits
from bolide.base.errors import (
    BolideError,
    ConnectionClosedError,
    InvariantViolationError,
    ProtocolError,
    RemoteError,
    invariant,
)


def test_limits_hold_their_relations() -> None:
    limits._check_relations()
    assert limits.FRAME_MAX_BYTES == 16 * 1024 * 1024
    assert limits.MESSAGE_BODY_MAX_BYTES == 4 * 1024 * 1024


UNIT_SUFFIXES = (
    "_BYTES",
    "_MS",
    "_S",
    "_COUNT",
    "_CHARS",
    "_ENTRIES",
    "_MESSAGES",
    "_PERCENT",
    "_SLOTS",
    "_REQUESTS",
    "_OFFSETS",
    "_RECORDS",
    "_ATTEMPTS",
    "_TIMES",
    "_LEVELS",
    "_EVENTS",
    "_CONTEXTS",
)


def test_every_limit_has_a_unit_suffix() -> None:
    names = [n for n in vars(limits) if n.isupper() and n not in {"KIB", "MIB", "GIB"}]
    assert names
    for name in names:
        assert name.endswith(UNIT_SUFFIXES), name


def test_retriable_flags() -> None:
    assert ConnectionClosedError.retriable
    assert not ProtocolError.retriable
    assert issubclass(ProtocolError, BolideError)
    error = RemoteError(17, "no topic", retriable=True)
    assert error.code == 17 and error.retriable


def test_invariant_raises_only_when_false() -> None:
    invariant(True, "fine")
    with pytest.raises(InvariantViolationError, match="broken"):
        invariant(False, "broken")

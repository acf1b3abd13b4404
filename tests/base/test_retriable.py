"""``BolideError.retriable`` is the one retriability source: transport failures are retriable
as a family, a RemoteError carries the response-code table's verdict on the instance."""

from __future__ import annotations

from bolide.base.errors import (
    BackpressureError,
    BolideError,
    ConnectionClosedError,
    InvalidMessageError,
    NameServerUnavailableError,
    RemoteError,
    RequestTimeoutError,
    TransportError,
)
from bolide.protocol.codes import ResponseCode, remote_error


def test_transport_failures_are_one_retriable_family() -> None:
    for kind in (ConnectionClosedError, RequestTimeoutError, BackpressureError):
        error: BolideError = kind("x")
        assert isinstance(error, TransportError) and error.retriable
    assert NameServerUnavailableError("none").retriable
    assert not InvalidMessageError("bad").retriable


def test_a_remote_error_has_one_flag_from_the_codes_table() -> None:
    busy = remote_error(ResponseCode.SYSTEM_BUSY, "busy")
    refused = remote_error(ResponseCode.MESSAGE_ILLEGAL, "bad")
    assert busy.retriable and not refused.retriable
    assert not RemoteError(1, None).retriable
    assert not hasattr(busy, "is_retriable")  # the second flag is gone

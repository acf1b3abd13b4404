"""The request check: refusals answered with the AclException remark, logged at WARNING at
most once per interval (with the count left out), a crashing check failing closed."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from bolide.acl import AclRules, AclValidator, acl_request_check
from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand

PEER: Any = SimpleNamespace(remote_address="10.0.0.7:5000")


def test_refusals_are_answered_and_their_warnings_paced(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    check = acl_request_check(AclValidator(AclRules()), clock=clock)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t"})
    with caplog.at_level(logging.WARNING, logger="bolide.acl"):
        for _ in range(5):
            refusal = check(PEER, request)
            assert refusal is not None and refusal.code == ResponseCode.SYSTEM_ERROR
            assert refusal.remark == (
                "org.apache.rocketmq.acl.common.AclException: No accessKey is configured"
            )
        clock.advance_ms(limits.ACL_DENIAL_LOG_INTERVAL_MS)
        check(PEER, request)
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        "ACL refused request code 10 from 10.0.0.7:5000: No accessKey is configured",
        "ACL refused request code 10 from 10.0.0.7:5000: No accessKey is configured"
        " (4 more refused since the last report)",
    ]


def test_a_crashing_check_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(AclValidator):
        def check(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("bug")

    check = acl_request_check(Broken(AclRules()), clock=ManualClock())
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "t"})
    with caplog.at_level(logging.ERROR, logger="bolide.acl"):
        refusal = check(PEER, request)
    assert refusal is not None and refusal.code == ResponseCode.SYSTEM_ERROR
    assert "ACL check failed: RuntimeError" in (refusal.remark or "")
    assert "crashed" in caplog.text

"""The code catalog and the one retriability table."""

from __future__ import annotations

import pytest

from bolide.base.errors import BolideError, RemoteError
from bolide.protocol.codes import (
    RESPONSE_CODE_RETRIABLE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    is_retriable,
    remote_error,
)


def test_values_from_protocol_md() -> None:
    assert RequestCode.SEND_MESSAGE == 10 and RequestCode.PULL_MESSAGE == 11
    assert RequestCode.HEART_BEAT == 34 and RequestCode.GET_ROUTEINFO_BY_TOPIC == 105
    assert RequestCode.SEND_MESSAGE_V2 == 310 and RequestCode.SEND_BATCH_MESSAGE == 320
    assert RequestCode.RESET_CONSUMER_CLIENT_OFFSET == 220
    assert RequestCode.INVOKE_BROKER_TO_RESET_OFFSET == 222
    assert RequestCode.GET_CONSUMER_RUNNING_INFO == 307
    assert RequestCode.CONSUME_MESSAGE_DIRECTLY == 309
    assert ResponseCode.PULL_NOT_FOUND == 19 and ResponseCode.PULL_OFFSET_MOVED == 21
    assert ResponseCode.QUERY_NOT_FOUND == 22 and ResponseCode.CONSUMER_NOT_ONLINE == 206
    assert ResponseCode.FLOW_CONTROL == 215
    assert [language.value for language in LanguageCode] == list(range(13))
    assert LanguageCode.PYTHON == 3 and LanguageCode.CPP == 1


def test_every_response_code_has_a_retriability() -> None:
    assert set(ResponseCode) <= set(RESPONSE_CODE_RETRIABLE)


@pytest.mark.parametrize(
    "code",
    [
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.NO_PERMISSION,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.FLOW_CONTROL,
    ],
)
def test_java_producer_retry_set_is_retriable(code: ResponseCode) -> None:
    assert is_retriable(code)


@pytest.mark.parametrize(
    "code",
    [
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        ResponseCode.SUBSCRIPTION_PARSE_FAILED,
        ResponseCode.TOPIC_EXIST_ALREADY,
        9_999,
    ],
)
def test_permanent_failures_are_not_retriable(code: int) -> None:
    assert not is_retriable(code)


def test_remote_error_carries_code_remark_and_retriability() -> None:
    error = remote_error(ResponseCode.TOPIC_NOT_EXIST, "No topic route info")
    assert isinstance(error, RemoteError) and isinstance(error, BolideError)
    assert (error.code, error.remark, error.retriable) == (17, "No topic route info", True)
    assert not remote_error(ResponseCode.MESSAGE_ILLEGAL, None).retriable

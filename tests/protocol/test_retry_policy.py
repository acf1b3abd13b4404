"""groupRetryPolicy in SubscriptionGroupConfig bodies: parsed and written as RocketMQ 5 does,
bad ones refused by name, absent ones not written."""

from __future__ import annotations

import pytest

from bolide.protocol.bodies import BodyError, SubscriptionGroupConfig
from bolide.protocol.bodies.retry_policy import GroupRetryPolicy, RetryPolicyType


def test_an_exponential_policy_round_trips() -> None:
    body = (
        b'{"groupName":"G","groupRetryPolicy":{"type":"EXPONENTIAL",'
        b'"exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}}'
    )
    config = SubscriptionGroupConfig.from_json(body)
    policy = config.group_retry_policy
    assert policy == GroupRetryPolicy(RetryPolicyType.EXPONENTIAL, (), 1000, 60000, 3)
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config


def test_a_customized_policy_round_trips_and_none_is_not_written() -> None:
    body = b'{"groupName":"G","groupRetryPolicy":{"customizedRetryPolicy":{"next":[500,2000]}}}'
    config = SubscriptionGroupConfig.from_json(body)
    assert config.group_retry_policy is not None
    assert config.group_retry_policy.type is RetryPolicyType.CUSTOMIZED
    assert config.group_retry_policy.next_ms == (500, 2000)
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config
    assert b"groupRetryPolicy" not in SubscriptionGroupConfig("G").to_json()


def test_javas_default_object_is_read() -> None:
    """Java writes its default policy as the type alone (both policies null)."""
    body = b'{"groupName":"G","groupRetryPolicy":{"type":"CUSTOMIZED"}}'
    policy = SubscriptionGroupConfig.from_json(body).group_retry_policy
    assert policy == GroupRetryPolicy(RetryPolicyType.CUSTOMIZED, ())


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        (b'{"type":"LINEAR"}', "RetryPolicyType"),
        (b'{"type":"EXPONENTIAL","exponentialRetryPolicy":{"multiplier":0}}', "under 1"),
        (b'{"customizedRetryPolicy":{"next":[-1]}}', "negative"),
    ],
)
def test_bad_policies_are_refused(policy: bytes, words: str) -> None:
    with pytest.raises(BodyError, match=words):
        SubscriptionGroupConfig.from_json(b'{"groupName":"G","groupRetryPolicy":' + policy + b"}")

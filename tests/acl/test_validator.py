"""The checks in RocketMQ's order, the permission table, DENY wins, white lists, refusals."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from bolide.acl import AclDeniedError, AclValidator, Perm, required_resources
from bolide.acl.rules import load_yaml_document, parse_rules
from bolide.acl.validator import grpc_credentials, grpc_signature_ok
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand

RULES = """
globalWhiteRemoteAddresses: [10.10.10.*]
accounts:
  - accessKey: producer1
    secretKey: prod-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [orders=PUB, audit=PUB|SUB, secret=DENY]
  - accessKey: consumer1
    secretKey: cons-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: [secret=DENY]
    groupPerms: [blocked=DENY]
  - accessKey: trusted1
    secretKey: trust-secret
    whiteRemoteAddress: 192.168.9.*
  - accessKey: admin001
    secretKey: admin-secret
    admin: true
"""
PEER = "127.0.0.1:50000"


@pytest.fixture
def validator() -> AclValidator:
    document = load_yaml_document(RULES, "test")
    return AclValidator(parse_rules(document, "test"))


def signed(
    code: int, fields: dict[str, str], key: str, secret: str, body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, fields, body)
    sign_request(request, key, secret)
    return request


def send(topic: str, key: str = "producer1", secret: str = "prod-secret") -> RemotingCommand:
    return signed(RequestCode.SEND_MESSAGE, {"producerGroup": "p", "topic": topic}, key, secret)


def pull(topic: str, group: str) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "0"}
    return signed(RequestCode.PULL_MESSAGE, fields, "consumer1", "cons-secret")


def denied(validator: AclValidator, request: RemotingCommand, peer: str = PEER) -> str:
    with pytest.raises(AclDeniedError) as caught:
        validator.check(request, peer)
    return caught.value.reason


def test_signed_send_with_pub_is_allowed(validator: AclValidator) -> None:
    validator.check(send("orders"), PEER)
    validator.check(send("audit"), PEER)


def test_refusals_name_the_key_and_the_reason(validator: AclValidator) -> None:
    assert (
        denied(validator, send("secret"))
        == "No PUB permission for topic=secret, accessKey=producer1"
    )
    assert "topic=other" in denied(validator, send("other"))  # default DENY
    assert denied(validator, send("orders", secret="wrong-secret")) == (
        "Check signature failed for accessKey=producer1"
    )
    unknown = denied(validator, send("orders", key="nobody99"))
    assert unknown == "No acl config for nobody99"
    unsigned = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "orders"})
    assert denied(validator, unsigned) == "No accessKey is configured"
    assert validator.denied_count == 5


def test_forged_signature_and_tampered_body(validator: AclValidator) -> None:
    request = send("orders")
    request.ext_fields["Signature"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="
    assert "Check signature failed" in denied(validator, request)
    request = signed(
        RequestCode.SEND_MESSAGE, {"topic": "orders"}, "producer1", "prod-secret", b"x"
    )
    request.body = b"y"
    assert "Check signature failed" in denied(validator, request)
    request = send("orders")
    del request.ext_fields["Signature"]
    assert "Check signature failed" in denied(validator, request)


def test_huge_and_binary_access_keys_are_refused_without_echoing_them(
    validator: AclValidator,
) -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"AccessKey": "k" * 100_000})
    assert "longer than" in denied(validator, request)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"AccessKey": "\x00\x01bin\xff"})
    reason = denied(validator, request)
    assert reason.startswith("No acl config for ") and "\x00" not in reason


def test_deny_wins_and_group_rules(validator: AclValidator) -> None:
    validator.check(pull("anything", "billing"), PEER)
    assert "topic=secret" in denied(validator, pull("secret", "billing"))
    assert denied(validator, pull("anything", "blocked")) == (
        "No SUB permission for group=blocked, accessKey=consumer1"
    )


def test_retry_topic_send_needs_group_sub(validator: AclValidator) -> None:
    retry = signed(RequestCode.SEND_MESSAGE_V2, {"a": "p", "b": "%RETRY%billing"}, "consumer1",
                   "cons-secret")  # fmt: skip
    validator.check(retry, PEER)
    # producer1 has no group rights: a send-back into a group's retry topic is refused
    retry = signed(RequestCode.SEND_MESSAGE_V2, {"a": "p", "b": "%RETRY%billing"}, "producer1",
                   "prod-secret")  # fmt: skip
    assert "group=billing" in denied(validator, retry)


def test_heartbeat_needs_every_group_and_topic(validator: AclValidator) -> None:
    heartbeat = HeartbeatData(
        "client-1",
        (),
        (
            ConsumerData(
                "billing",
                subscription_data_set=(SubscriptionData.from_expression("secret", "*", 0),),
            ),
        ),
    )
    request = signed(RequestCode.HEART_BEAT, {}, "consumer1", "cons-secret", heartbeat.to_json())
    assert "topic=secret" in denied(validator, request)


def test_admin_codes_need_admin(validator: AclValidator) -> None:
    for code in (
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    ):
        request = signed(code, {"topic": "t"}, "consumer1", "cons-secret")
        assert "is not admin" in denied(validator, request)
        validator.check(signed(code, {"topic": "t"}, "admin001", "admin-secret"), PEER)


def test_admin_without_lists_may_do_everything(validator: AclValidator) -> None:
    validator.check(send("secret", "admin001", "admin-secret"), PEER)


def test_white_lists(validator: AclValidator) -> None:
    unsigned = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"})
    validator.check(unsigned, "10.10.10.7:1234")  # global white list: nothing checked
    assert "No accessKey" in denied(validator, unsigned, "10.10.11.7:1234")
    unsigned.ext_fields["AccessKey"] = "trusted1"
    validator.check(unsigned, "192.168.9.1:999")  # the account's white list: no signature
    assert "Check signature failed" in denied(validator, unsigned, "192.168.8.1:999")


def test_trace_topic_is_always_writable(validator: AclValidator) -> None:
    validator.check(send("RMQ_SYS_TRACE_TOPIC"), PEER)


def test_missing_fields_are_refused(validator: AclValidator) -> None:
    request = signed(RequestCode.PULL_MESSAGE, {"topic": "t"}, "consumer1", "cons-secret")
    assert "without consumerGroup" in denied(validator, request)
    request = signed(RequestCode.HEART_BEAT, {}, "consumer1", "cons-secret", b"\xff\x00")
    assert "bad body" in denied(validator, request)


def test_other_codes_need_the_signature_only(validator: AclValidator) -> None:
    request = signed(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "secret"}, "producer1",
                     "prod-secret")  # fmt: skip
    validator.check(request, PEER)
    assert required_resources(request) == {}


def test_front_end_api(validator: AclValidator) -> None:
    assert validator.is_admin("admin001", "admin-secret")
    assert not validator.is_admin("admin001", "wrong")
    assert not validator.is_admin("consumer1", "cons-secret")
    assert validator.authenticate("consumer1", "cons-secret") is not None
    validator.authorize("consumer1", {"orders": Perm.SUB})
    with pytest.raises(AclDeniedError, match="topic=secret"):
        validator.authorize("consumer1", {"secret": Perm.SUB})
    with pytest.raises(AclDeniedError, match="not admin"):
        validator.authorize("consumer1", {}, admin=True)


def test_grpc_authorization_header(validator: AclValidator) -> None:
    date = "20261125T150000Z"
    signature = hmac.new(b"cons-secret", date.encode(), hashlib.sha1).hexdigest().upper()
    header = (
        f"MQv2-HMAC-SHA1 Credential=consumer1, SignedHeaders=x-mq-date-time, Signature={signature}"
    )
    account = validator.verify_grpc_authorization(header, date, PEER)
    assert account is not None and account.access_key == "consumer1"
    with pytest.raises(AclDeniedError, match="Check signature failed"):
        validator.verify_grpc_authorization(header, "20261125T150001Z", PEER)
    with pytest.raises(AclDeniedError, match="No accessKey"):
        validator.verify_grpc_authorization(None, date, PEER)
    assert validator.verify_grpc_authorization(None, date, "10.10.10.1:5") is None


def test_grpc_credentials_split_the_authorization_header() -> None:
    header = "MQv2-HMAC-SHA1 Credential=ak1/20240501/x, SignedHeaders=x-mq-date-time, Signature=AB"
    assert grpc_credentials(header) == ("MQv2-HMAC-SHA1", "ak1", "AB")
    assert grpc_credentials(None) == ("", "", "")
    assert grpc_credentials("MQv2-HMAC-SHA1") == ("MQv2-HMAC-SHA1", "", "")


def test_grpc_signature_ok_is_the_hmac_of_the_date_time_in_either_case() -> None:
    date = "20240501T120000Z"
    signature = hmac.new(b"secret", date.encode(), hashlib.sha1).hexdigest()
    assert grpc_signature_ok("secret", date, signature)
    assert grpc_signature_ok("secret", date, signature.upper())
    assert not grpc_signature_ok("other", date, signature)
    assert not grpc_signature_ok("secret", "20240501T120001Z", signature)
    assert not grpc_signature_ok("secret", None, signature)
    assert not grpc_signature_ok("secret", "", hmac.new(b"secret", b"", hashlib.sha1).hexdigest())

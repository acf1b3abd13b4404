"""Per-call ACL of 5.x clients through the proxy, over real gRPC: each call is checked with
the calling account's permissions on its topics and group (the ACL's one table), refusals
answer FORBIDDEN (a missing permission) or UNAUTHORIZED (a bad signature) naming the access
key and never a secret, and the proxy keeps serving."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from bolide.acl import AclValidator, grpc_required_resources, parse_rules
from bolide.acl.permissions import Perm, RequestParseError
from bolide.acl.rules import load_yaml_document
from bolide.protocol.bodies import TopicConfig
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.server import ProxyConfig, ProxyServer
from bolide.testing.cluster import Cluster

SERVICE = "/apache.rocketmq.v2.MessagingService/"
DATE_TIME = "20261125T120000Z"
RULES = """
accounts:
  - accessKey: producer1
    secretKey: prod-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Allowed=PUB]
  - accessKey: consumer1
    secretKey: cons-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [GroupA=SUB]
  - accessKey: mixed001
    secretKey: mixed-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms: [Blocked=DENY]
  - accessKey: trusted1
    secretKey: trust-secret
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: DENY
  - accessKey: admin001
    secretKey: admin-secret
    admin: true
"""
SECRETS = ("prod-secret", "cons-secret", "mixed-secret", "trust-secret", "admin-secret")


def metadata(access_key: str, secret_key: str) -> tuple[tuple[str, str], ...]:
    digest = hmac.new(secret_key.encode(), DATE_TIME.encode(), hashlib.sha1).hexdigest().upper()
    header = (
        f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={digest}"
    )
    return (
        ("x-mq-client-id", f"{access_key}@1"),
        ("x-mq-date-time", DATE_TIME),
        ("authorization", header),
    )


@dataclass
class Secured:
    channel: grpc.aio.Channel
    validator: AclValidator

    async def call(self, method: str, request: Any, key: str, secret: str) -> Any:
        response_type = getattr(spb, method + "Response")
        call = self.channel.unary_unary(
            SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        return await call(request, metadata=metadata(key, secret), timeout=10)

    async def receive(self, topic: str, group: str, key: str, secret: str) -> list[Any]:
        request = spb.ReceiveMessageRequest(batch_size=16)
        request.group.name = group
        request.message_queue.topic.name = topic
        request.message_queue.id = -1
        request.message_queue.broker.name = "broker-a"
        request.invisible_duration.FromMilliseconds(30_000)
        request.long_polling_timeout.FromMilliseconds(0)
        call = self.channel.unary_stream(
            SERVICE + "ReceiveMessage",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=spb.ReceiveMessageResponse.FromString,
        )
        stream = call(request, metadata=metadata(key, secret), timeout=10)
        return [response async for response in stream]


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    validator = AclValidator(parse_rules(load_yaml_document(RULES, "test"), "test"))
    async with Cluster(tmp_path / "cluster") as cluster:
        context = cluster.brokers[0].context
        for topic in ("Allowed", "Other", "Blocked"):
            await context.topics.update_topic_config(TopicConfig(topic, 2, 2))
        await context.register_now()
        config = ProxyConfig(
            min_invisible_time_ms=1_000,
            authenticator=validator.verify_grpc_authorization,
            authorizer=validator.authorize_grpc,
        )
        server = ProxyServer([cluster.namesrv_address], port=0, config=config)
        await server.start()
        channel = grpc.aio.insecure_channel(server.address)
        try:
            yield Secured(channel, validator)
        finally:
            await channel.close()
            await server.stop()


def send_request(topic: str, message_id: str) -> spb.SendMessageRequest:
    message = pb.Message(body=b"payload")
    message.topic.name = topic
    message.system_properties.message_id = message_id
    message.system_properties.message_type = pb.NORMAL
    return spb.SendMessageRequest(messages=[message])


def no_secret(text: str) -> None:
    assert not any(secret in text for secret in SECRETS), text


async def test_send_needs_pub_on_the_topic(secured: Secured) -> None:
    allowed = await secured.call("SendMessage", send_request("Allowed", "A1"), *PRODUCER)
    assert allowed.status.code == pb.OK, allowed.status.message
    refused = await secured.call("SendMessage", send_request("Other", "A2"), *PRODUCER)
    assert refused.status.code == pb.FORBIDDEN
    assert refused.status.message == "No PUB permission for topic=Other, accessKey=producer1"
    # a batch with one denied topic is refused whole
    batch = send_request("Allowed", "A3")
    batch.messages.extend(send_request("Other", "A4").messages)
    assert (await secured.call("SendMessage", batch, *PRODUCER)).status.code == pb.FORBIDDEN
    # a consumer-only account cannot publish; nor end or recall a transaction on the topic
    end = spb.EndTransactionRequest(message_id="A1", transaction_id="T1")
    end.topic.name = "Allowed"
    answer = await secured.call("EndTransaction", end, *CONSUMER)
    assert answer.status.code == pb.FORBIDDEN
    assert "accessKey=consumer1" in answer.status.message
    recall = spb.RecallMessageRequest(recall_handle="handle")
    recall.topic.name = "Other"
    assert (await secured.call("RecallMessage", recall, *PRODUCER)).status.code == pb.FORBIDDEN
    # the proxy keeps serving, and refused calls are counted
    again = await secured.call("SendMessage", send_request("Allowed", "A5"), *PRODUCER)
    assert again.status.code == pb.OK
    assert secured.validator.denied_count == 4


async def test_receive_needs_sub_on_topic_and_group(secured: Secured) -> None:
    sent = await secured.call("SendMessage", send_request("Allowed", "R1"), *ADMIN)
    assert sent.status.code == pb.OK
    other_group = await secured.receive("Allowed", "GroupB", *CONSUMER)
    assert other_group[0].status.code == pb.FORBIDDEN
    assert other_group[0].status.message == (
        "No SUB permission for group=GroupB, accessKey=consumer1"
    )
    assert not any(response.HasField("message") for response in other_group)
    got = await secured.receive("Allowed", "GroupA", *CONSUMER)
    assert got[0].status.code == pb.OK
    messages = [response.message for response in got if response.HasField("message")]
    assert [m.system_properties.message_id for m in messages] == ["R1"]
    handle = messages[0].system_properties.receipt_handle
    ack = spb.AckMessageRequest(
        entries=[spb.AckMessageEntry(message_id="R1", receipt_handle=handle)]
    )
    ack.group.name, ack.topic.name = "GroupB", "Allowed"
    assert (await secured.call("AckMessage", ack, *CONSUMER)).status.code == pb.FORBIDDEN
    change = spb.ChangeInvisibleDurationRequest(receipt_handle=handle, message_id="R1")
    change.group.name, change.topic.name = "GroupB", "Allowed"
    change.invisible_duration.FromMilliseconds(5_000)
    answer = await secured.call("ChangeInvisibleDuration", change, *CONSUMER)
    assert answer.status.code == pb.FORBIDDEN
    assignment = spb.QueryAssignmentRequest()
    assignment.group.name, assignment.topic.name = "GroupB", "Allowed"
    answer = await secured.call("QueryAssignment", assignment, *CONSUMER)
    assert answer.status.code == pb.FORBIDDEN
    heartbeat = spb.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER)
    heartbeat.group.name = "GroupB"
    assert (await secured.call("Heartbeat", heartbeat, *CONSUMER)).status.code == pb.FORBIDDEN
    ack.group.name = "GroupA"
    assert (await secured.call("AckMessage", ack, *CONSUMER)).status.code == pb.OK
    # a producer cannot consume, even a topic it may publish to
    assert (await secured.receive("Allowed", "GroupA", *PRODUCER))[0].status.code == (pb.FORBIDDEN)


async def test_deny_wins_admin_and_white_list(secured: Secured) -> None:
    denied = await secured.call("SendMessage", send_request("Blocked", "D1"), *MIXED)
    assert denied.status.code == pb.FORBIDDEN
    assert "topic=Blocked" in denied.status.message
    assert (await secured.receive("Blocked", "AnyGroup", *MIXED))[0].status.code == pb.FORBIDDEN
    route = spb.QueryRouteRequest()
    route.topic.name = "Blocked"
    assert (await secured.call("QueryRoute", route, *MIXED)).status.code == pb.FORBIDDEN
    assert (await secured.call("SendMessage", send_request("Other", "D2"), *MIXED)).status.code == (
        pb.OK
    )
    # an admin account listing no permissions may do everything
    for topic in ("Blocked", "Other"):
        sent = await secured.call("SendMessage", send_request(topic, f"X{topic}"), *ADMIN)
        assert sent.status.code == pb.OK
        got = await secured.receive(topic, "AdminGroup", *ADMIN)
        assert got[0].status.code == pb.OK
    # the account's white list lets its address in without a signature or permissions
    trusted = await secured.call(
        "SendMessage", send_request("Other", "W1"), "trusted1", "not-the-secret"
    )
    assert trusted.status.code == pb.OK


async def test_bad_signature_is_unauthorized_not_forbidden(secured: Secured) -> None:
    answer = await secured.call("SendMessage", send_request("Allowed", "U1"), "producer1", "bad")
    assert answer.status.code == pb.UNAUTHORIZED
    assert "Check signature failed for accessKey=producer1" in answer.status.message
    no_secret(answer.status.message)
    unknown = await secured.call("SendMessage", send_request("Allowed", "U2"), "nobody01", "x")
    assert unknown.status.code == pb.UNAUTHORIZED
    assert "No acl config for nobody01" in unknown.status.message
    received = await secured.receive("Allowed", "GroupA", "consumer1", "bad")
    assert received[0].status.code == pb.UNAUTHORIZED


async def test_a_reload_applies_from_the_next_call(secured: Secured) -> None:
    assert (
        await secured.call("SendMessage", send_request("Other", "L1"), *PRODUCER)
    ).status.code == (pb.FORBIDDEN)
    widened = RULES.replace("topicPerms: [Allowed=PUB]", "topicPerms: [Allowed=PUB, Other=PUB]")
    secured.validator.replace_rules(parse_rules(load_yaml_document(widened, "test"), "test"))
    assert (
        await secured.call("SendMessage", send_request("Other", "L2"), *PRODUCER)
    ).status.code == (pb.OK)


def test_the_5x_table() -> None:
    assert grpc_required_resources("SendMessage", ["T"], "") == {"T": Perm.PUB}
    assert grpc_required_resources("AckMessage", ["T"], "G") == {
        "T": Perm.SUB,
        "%RETRY%G": Perm.SUB,
    }
    assert grpc_required_resources("Heartbeat", [], "") == {}
    assert grpc_required_resources("QueryRoute", ["T"], "") == {"T": Perm.ANY}
    assert grpc_required_resources("Telemetry", [], "") == {}
    with pytest.raises(RequestParseError):
        grpc_required_resources("ReceiveMessage", ["T"], "")
    with pytest.raises(RequestParseError):
        grpc_required_resources("SendMessage", [""], "")


PRODUCER = ("producer1", "prod-secret")
CONSUMER = ("consumer1", "cons-secret")
MIXED = ("mixed001", "mixed-secret")
ADMIN = ("admin001", "admin-secret")

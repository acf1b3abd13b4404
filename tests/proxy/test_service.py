"""The proxy's MessagingService over real gRPC (grpcio's asyncio client, as the SDKs use):
routes, settings, send and receive, and bad input answered with the gRPC status or the
RocketMQ ``Code`` an Apache proxy gives, after which the proxy keeps serving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from bolide.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.server import ProxyConfig, ProxyServer
from bolide.testing.cluster import Cluster

SERVICE = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "test-client@1"), ("x-mq-language", "PYTHON"))


class Proxy:
    def __init__(self, cluster: Cluster, server: ProxyServer, channel: grpc.aio.Channel) -> None:
        self.cluster = cluster
        self.server = server
        self.channel = channel

    async def unary(self, method: str, request: Any, response_type: Any) -> Any:
        call = self.channel.unary_unary(
            SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        return await call(request, metadata=METADATA, timeout=10)

    async def receive(self, request: spb.ReceiveMessageRequest) -> list[spb.ReceiveMessageResponse]:
        call = self.channel.unary_stream(
            SERVICE + "ReceiveMessage",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=spb.ReceiveMessageResponse.FromString,
        )
        return [response async for response in call(request, metadata=METADATA, timeout=10)]

    async def raw(self, path: str, body: bytes) -> bytes:
        call = self.channel.unary_unary(path)
        result: bytes = await call(body, metadata=METADATA, timeout=10)
        return result


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    async with Cluster(tmp_path / "cluster") as cluster:
        context = cluster.brokers[0].context
        await context.topics.update_topic_config(TopicConfig("Plain", 2, 2))
        await context.topics.update_topic_config(
            TopicConfig("Ordered", 2, 2, order=True, attributes=(("message.type", "FIFO"),))
        )
        await context.groups.update(
            SubscriptionGroupConfig("OrderlyGroup", consume_orderly_enable=True, retry_max_times=3)
        )
        await context.register_now()
        server = ProxyServer(
            [cluster.namesrv_address], port=0, config=ProxyConfig(min_invisible_time_ms=1_000)
        )
        await server.start()
        channel = grpc.aio.insecure_channel(server.address)
        try:
            yield Proxy(cluster, server, channel)
        finally:
            await channel.close()
            await server.stop()


def _message(topic: str, body: bytes, message_id: str, **system: Any) -> pb.Message:
    message = pb.Message(body=body)
    message.topic.name = topic
    message.system_properties.message_id = message_id
    message.system_properties.message_type = system.pop("message_type", pb.NORMAL)
    for name, value in system.items():
        setattr(message.system_properties, name, value)
    return message


def _receive_request(topic: str, group: str, invisible_ms: int) -> spb.ReceiveMessageRequest:
    request = spb.ReceiveMessageRequest(batch_size=16)
    request.group.name = group
    request.message_queue.topic.name = topic
    request.message_queue.id = -1
    request.message_queue.broker.name = "broker-a"
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromMilliseconds(0)
    return request


async def test_route_lists_queues_with_the_topic_message_types(proxy: Proxy) -> None:
    request = spb.QueryRouteRequest()
    request.topic.name = "Ordered"
    request.endpoints.addresses.add(host="127.0.0.1", port=proxy.server.port)
    response = await proxy.unary("QueryRoute", request, spb.QueryRouteResponse)
    assert response.status.code == pb.OK
    assert [q.id for q in response.message_queues] == [0, 1]
    assert all(list(q.accept_message_types) == [pb.FIFO] for q in response.message_queues)
    assert response.message_queues[0].broker.endpoints.addresses[0].port == proxy.server.port
    request.topic.name = "NoSuchTopic"
    missing = await proxy.unary("QueryRoute", request, spb.QueryRouteResponse)
    assert missing.status.code == pb.TOPIC_NOT_FOUND


async def test_send_receive_ack_and_a_new_handle(proxy: Proxy) -> None:
    send = spb.SendMessageRequest(messages=[_message("Plain", b"hello", "ID-1", tag="T")])
    sent = await proxy.unary("SendMessage", send, spb.SendMessageResponse)
    assert sent.status.code == pb.OK and sent.entries[0].message_id == "ID-1"
    stream = await proxy.receive(_receive_request("Plain", "G", 30_000))
    assert stream[0].status.code == pb.OK
    assert stream[-1].HasField("delivery_timestamp")
    [message] = [r.message for r in stream if r.HasField("message")]
    assert message.body == b"hello" and message.system_properties.tag == "T"
    assert message.system_properties.delivery_attempt == 1
    change = spb.ChangeInvisibleDurationRequest(
        receipt_handle=message.system_properties.receipt_handle, message_id="ID-1"
    )
    change.group.name, change.topic.name = "G", "Plain"
    change.invisible_duration.FromMilliseconds(60_000)
    changed = await proxy.unary(
        "ChangeInvisibleDuration", change, spb.ChangeInvisibleDurationResponse
    )
    assert changed.status.code == pb.OK
    assert changed.receipt_handle != message.system_properties.receipt_handle
    ack = spb.AckMessageRequest(
        entries=[spb.AckMessageEntry(message_id="ID-1", receipt_handle=changed.receipt_handle)]
    )
    ack.group.name, ack.topic.name = "G", "Plain"
    acked = await proxy.unary("AckMessage", ack, spb.AckMessageResponse)
    assert acked.status.code == pb.OK
    empty = await proxy.receive(_receive_request("Plain", "G", 30_000))
    assert empty[0].status.code == pb.MESSAGE_NOT_FOUND


async def test_consumer_settings_follow_the_group(proxy: Proxy) -> None:
    call = proxy.channel.stream_stream(
        SERVICE + "Telemetry",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=spb.TelemetryCommand.FromString,
    )
    stream = call(metadata=METADATA, timeout=10)
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.PUSH_CONSUMER
    command.settings.subscription.group.name = "OrderlyGroup"
    command.settings.subscription.subscriptions.add().topic.name = "Ordered"
    await stream.write(command)
    reply = await stream.read()
    await stream.done_writing()
    settings = reply.settings
    assert settings.subscription.fifo is True
    assert settings.backoff_policy.max_attempts == 4
    assert [d.seconds for d in settings.backoff_policy.customized_backoff.next][:3] == [1, 5, 10]
    assignment = spb.QueryAssignmentRequest()
    assignment.topic.name, assignment.group.name = "Ordered", "OrderlyGroup"
    assigned = await proxy.unary("QueryAssignment", assignment, spb.QueryAssignmentResponse)
    assert [a.message_queue.id for a in assigned.assignments] == [0, 1]
    assignment.topic.name, assignment.group.name = "Plain", "AnyGroup"
    plain = await proxy.unary("QueryAssignment", assignment, spb.QueryAssignmentResponse)
    assert [a.message_queue.id for a in plain.assignments] == [-1]


async def test_bad_input_gets_the_apache_answers_and_the_proxy_keeps_serving(
    proxy: Proxy,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as malformed:
        await proxy.raw(SERVICE + "SendMessage", b"\xff\xff\xff\xff")
    assert malformed.value.code() == grpc.StatusCode.INTERNAL
    assert "Invalid protobuf" in (malformed.value.details() or "")
    for path in (SERVICE + "PullMessage", SERVICE + "NoSuchMethod", "/x.Y/Z"):
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await proxy.raw(path, b"")
        assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
    ack = spb.AckMessageRequest(
        entries=[spb.AckMessageEntry(message_id="X", receipt_handle="not a handle")]
    )
    ack.group.name, ack.topic.name = "G", "Plain"
    bad_ack = await proxy.unary("AckMessage", ack, spb.AckMessageResponse)
    assert bad_ack.entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
    change = spb.ChangeInvisibleDurationRequest(receipt_handle="1 2 3", message_id="X")
    change.group.name, change.topic.name = "G", "Plain"
    bad_change = await proxy.unary(
        "ChangeInvisibleDuration", change, spb.ChangeInvisibleDurationResponse
    )
    assert bad_change.status.code == pb.INVALID_RECEIPT_HANDLE
    huge = spb.SendMessageRequest(messages=[_message("Plain", b"x" * (5 << 20), "BIG")])
    too_large = await proxy.unary("SendMessage", huge, spb.SendMessageResponse)
    assert too_large.status.code == pb.MESSAGE_BODY_TOO_LARGE
    wrong_type = spb.SendMessageRequest(
        messages=[_message("Ordered", b"x", "T1", message_type=pb.NORMAL)]
    )
    conflict = await proxy.unary("SendMessage", wrong_type, spb.SendMessageResponse)
    assert conflict.status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    for invisible_ms in (100, 13 * 3_600_000):
        stream = await proxy.receive(_receive_request("Plain", "G", invisible_ms))
        assert stream[0].status.code == pb.ILLEGAL_INVISIBLE_TIME
    heartbeat = spb.HeartbeatRequest()
    unknown_client = await proxy.unary("Heartbeat", heartbeat, spb.HeartbeatResponse)
    assert unknown_client.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    # still serving
    good = spb.SendMessageRequest(messages=[_message("Plain", b"after", "OK-1")])
    assert (await proxy.unary("SendMessage", good, spb.SendMessageResponse)).status.code == pb.OK


def test_fifo_queue_choice_is_guava_consistent_hash() -> None:
    from bolide.proxy.messages import consistent_hash

    # Guava Hashing.consistentHash(long, buckets) reference values for small inputs.
    assert [consistent_hash("", n) for n in (1, 2, 3, 10)] == [0, 0, 0, 0]
    picks = {consistent_hash(f"group-{i}", 8) for i in range(200)}
    assert picks == set(range(8))
    # growing the bucket count moves a key only to the new bucket (consistency)
    for i in range(200):
        before, after = consistent_hash(f"g{i}", 8), consistent_hash(f"g{i}", 9)
        assert after in (before, 8)


async def test_auto_renewed_messages_are_acked_by_their_first_handle(proxy: Proxy) -> None:
    send = spb.SendMessageRequest(messages=[_message("Plain", b"slow", "ID-R")])
    assert (await proxy.unary("SendMessage", send, spb.SendMessageResponse)).status.code == pb.OK
    request = _receive_request("Plain", "Renewed", 0)
    request.ClearField("invisible_duration")
    request.auto_renew = True
    stream = await proxy.receive(request)
    [message] = [r.message for r in stream if r.HasField("message")]
    first = message.system_properties.receipt_handle
    assert message.system_properties.invisible_duration.ToMilliseconds() == 60_000
    renewal = proxy.server.consuming.renewal
    assert len(renewal) == 1
    deadline_ms = int(first.split(" ")[1]) + 60_000
    assert await renewal.renew_due(deadline_ms) == 1  # as if the 60 s were nearly over
    assert renewal.current(first) != first
    ack = spb.AckMessageRequest(
        entries=[spb.AckMessageEntry(message_id="ID-R", receipt_handle=first)]
    )
    ack.group.name, ack.topic.name = "Renewed", "Plain"
    assert (await proxy.unary("AckMessage", ack, spb.AckMessageResponse)).status.code == pb.OK
    assert len(renewal) == 0
    pop = proxy.cluster.brokers[0].context.pop
    assert pop is not None
    assert not any(q.in_flight for key, q in pop.state.queues.items() if key[1] == "Renewed")


async def test_a_retried_orderly_receive_gets_the_same_batch(proxy: Proxy) -> None:
    messages = [
        _message("Ordered", f"m{i}".encode(), f"F{i}", message_group="g", message_type=pb.FIFO)
        for i in range(2)
    ]
    sent = await proxy.unary(
        "SendMessage", spb.SendMessageRequest(messages=messages), spb.SendMessageResponse
    )
    assert sent.status.code == pb.OK
    queue_id = consistent_queue("g")  # the queue the message group hashes to
    request = _receive_request("Ordered", "OrderlyGroup", 30_000)
    request.message_queue.id = queue_id
    request.attempt_id = "attempt-1"
    first = [r.message for r in await proxy.receive(request) if r.HasField("message")]
    again = [r.message for r in await proxy.receive(request) if r.HasField("message")]
    assert [m.body for m in first] == [b"m0", b"m1"]
    assert [m.system_properties.receipt_handle for m in again] == [
        m.system_properties.receipt_handle for m in first
    ]
    request.attempt_id = "attempt-2"  # a new receive: the queue is blocked by the batch
    blocked = await proxy.receive(request)
    assert blocked[0].status.code == pb.MESSAGE_NOT_FOUND


def consistent_queue(group: str) -> int:
    from bolide.proxy.messages import consistent_hash

    return consistent_hash(group, 2)


async def test_the_authorization_header_is_checked_when_acl_is_on(tmp_path: Path) -> None:
    import hashlib
    import hmac

    signature = pytest.importorskip("rocketmq.v5.util.signature")
    from rocketmq import ClientConfiguration, Credentials

    secrets = {"RocketMQ": "12345678"}

    def authenticate(
        authorization: str | None, date_time: str | None, peer: str, rpc_name: str
    ) -> str:
        assert peer.startswith("127.0.0.1:")
        assert rpc_name == "apache.rocketmq.v2.QueryRouteRequest"
        if not authorization or not date_time:
            raise PermissionError("no authorization header")
        fields = dict(
            part.strip().split("=", 1) for part in authorization.split(" ", 1)[1].split(",")
        )
        secret = secrets.get(fields["Credential"])
        if secret is None:
            raise PermissionError(f"unknown access key {fields['Credential']}")
        expected = hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        if not hmac.compare_digest(expected.upper(), fields["Signature"].upper()):
            raise PermissionError(f"signature of {fields['Credential']} does not match")
        return fields["Credential"]

    async with Cluster(tmp_path / "cluster") as cluster:
        server = ProxyServer(
            [cluster.namesrv_address], port=0, config=ProxyConfig(authenticator=authenticate)
        )
        await server.start()
        request = spb.QueryRouteRequest()
        request.topic.name = "TBW102"
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = channel.unary_unary(
                    SERVICE + "QueryRoute",
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=spb.QueryRouteResponse.FromString,
                )
                for ak, sk, code in (
                    ("RocketMQ", "12345678", pb.OK),
                    ("RocketMQ", "wrong", pb.UNAUTHORIZED),
                    ("Nobody", "x", pb.UNAUTHORIZED),
                ):
                    config = ClientConfiguration(server.address, Credentials(ak, sk))
                    metadata = signature.Signature.metadata(config, "client@1")
                    response = await call(request, metadata=metadata, timeout=10)
                    assert response.status.code == code, response.status.message
                unsigned = await call(request, metadata=METADATA, timeout=10)
                assert unsigned.status.code == pb.UNAUTHORIZED
                assert "no authorization header" in unsigned.status.message
        finally:
            await server.stop()


async def test_two_proxies_in_front_of_two_brokers(tmp_path: Path) -> None:
    """POP state lives in the brokers: a message received through one proxy is acked
    through another, and sends spread over every broker's queues."""
    async with Cluster(tmp_path / "cluster", broker_names=("broker-a", "broker-b")) as cluster:
        for broker in cluster.brokers:
            await broker.context.topics.update_topic_config(TopicConfig("Spread", 2, 2))
            await broker.context.register_now()
        first = ProxyServer([cluster.namesrv_address], port=0)
        second = ProxyServer([cluster.namesrv_address], port=0)
        await first.start()
        await second.start()
        channels = [grpc.aio.insecure_channel(p.address) for p in (first, second)]
        try:
            one, two = (
                Proxy(cluster, p, c) for p, c in zip((first, second), channels, strict=True)
            )
            for index in range(8):
                send = spb.SendMessageRequest(messages=[_message("Spread", b"m", f"S{index}")])
                answer = await one.unary("SendMessage", send, spb.SendMessageResponse)
                assert answer.status.code == pb.OK
            stored = {
                b.config.broker_name: sum(b.context.store.max_offset("Spread", q) for q in (0, 1))
                for b in cluster.brokers
            }
            assert stored == {"broker-a": 4, "broker-b": 4}
            got: list[pb.Message] = []
            for broker_name in ("broker-a", "broker-b"):
                request = _receive_request("Spread", "Both", 30_000)
                request.message_queue.broker.name = broker_name
                got += [r.message for r in await one.receive(request) if r.HasField("message")]
            assert len(got) == 8
            ack = spb.AckMessageRequest(
                entries=[
                    spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in got
                ]
            )
            ack.group.name, ack.topic.name = "Both", "Spread"
            acked = await two.unary("AckMessage", ack, spb.AckMessageResponse)
            assert acked.status.code == pb.OK
            for broker in cluster.brokers:
                assert broker.context.offsets.queue_offsets("Both", "Spread") == {0: 2, 1: 2}
        finally:
            for channel in channels:
                await channel.close()
            await first.stop()
            await second.stop()

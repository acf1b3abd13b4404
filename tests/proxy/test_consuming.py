"""The proxy's receive path over real gRPC (issue 29): filter expressions checked as Apache's
proxy checks them before a POP reaches a broker."""

from __future__ import annotations

import pytest

from bolide.protocol.bodies import ConsumeType, SubscriptionGroupConfig
from bolide.protocol.bodies.retry_policy import GroupRetryPolicy, RetryPolicyType
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.testing.waiting import until
from tests.proxy.test_service import METADATA, SERVICE, Proxy, _receive_request
from tests.proxy.test_service import proxy as proxy  # the fixture

__all__ = ["proxy"]


async def test_an_empty_sql92_expression_is_an_illegal_filter_expression(proxy: Proxy) -> None:
    request = _receive_request("Plain", "G", 10_000)
    request.filter_expression.type = pb.SQL
    request.filter_expression.expression = "  "
    answers = await proxy.receive(request)
    assert answers[0].status.code == pb.ILLEGAL_FILTER_EXPRESSION


async def test_a_sql92_receive_needs_property_filters_on_the_broker(proxy: Proxy) -> None:
    """The test broker runs with enablePropertyFilter=false: the broker's refusal reaches the
    client as INTERNAL_SERVER_ERROR with its remark, as from Apache's proxy."""
    request = _receive_request("Plain", "G", 10_000)
    request.filter_expression.type = pb.SQL
    request.filter_expression.expression = "a > 1"
    answers: list[spb.ReceiveMessageResponse] = await proxy.receive(request)
    assert answers[0].status.code == pb.INTERNAL_SERVER_ERROR
    assert "enablePropertyFilter=true" in answers[0].status.message


@pytest.mark.parametrize("kind", [RetryPolicyType.EXPONENTIAL, RetryPolicyType.CUSTOMIZED])
async def test_consumer_settings_carry_the_groups_retry_policy(
    proxy: Proxy, kind: RetryPolicyType
) -> None:
    policy = GroupRetryPolicy(kind, (500, 2_000), 1_000, 60_000, 3)
    context = proxy.cluster.brokers[0].context
    await context.groups.update(SubscriptionGroupConfig("Policed", group_retry_policy=policy))
    call = proxy.channel.stream_stream(
        SERVICE + "Telemetry",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=spb.TelemetryCommand.FromString,
    )
    stream = call(metadata=METADATA, timeout=10)
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.PUSH_CONSUMER
    command.settings.subscription.group.name = "Policed"
    command.settings.subscription.subscriptions.add().topic.name = "Plain"
    await stream.write(command)
    reply = await stream.read()
    await stream.done_writing()
    backoff = reply.settings.backoff_policy
    if kind is RetryPolicyType.EXPONENTIAL:
        exponential = backoff.exponential_backoff
        assert exponential.initial.ToMilliseconds() == 1_000
        assert exponential.max.ToMilliseconds() == 60_000
        assert exponential.multiplier == 3.0
    else:
        assert [d.ToMilliseconds() for d in backoff.customized_backoff.next] == [500, 2_000]


async def test_a_consumers_settings_and_heartbeats_register_it_with_the_broker(
    proxy: Proxy,
) -> None:
    """Settings over Telemetry, then Heartbeat: the broker lists the client in the group with
    CONSUME_ACTIVELY and its subscription; NotifyClientTermination takes it out."""
    consumers = proxy.cluster.brokers[0].context.consumers
    call = proxy.channel.stream_stream(
        SERVICE + "Telemetry",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=spb.TelemetryCommand.FromString,
    )
    stream = call(metadata=METADATA, timeout=10)
    command = spb.TelemetryCommand()
    command.settings.client_type = pb.SIMPLE_CONSUMER
    command.settings.subscription.group.name = "Members"
    entry = command.settings.subscription.subscriptions.add()
    entry.topic.name = "Plain"
    entry.expression.type = pb.TAG
    entry.expression.expression = "x || y"
    await stream.write(command)
    await stream.read()
    await until(lambda: consumers.client_ids("Members") == ["test-client@1"])
    heartbeat = spb.HeartbeatRequest(client_type=pb.SIMPLE_CONSUMER)
    heartbeat.group.name = "Members"
    answer = await proxy.unary("Heartbeat", heartbeat, spb.HeartbeatResponse)
    assert answer.status.code == pb.OK
    info = consumers.get_consumer_group_info("Members")
    assert info is not None and info.consume_type is ConsumeType.CONSUME_ACTIVELY
    subscription = info.find_subscription("Plain")
    assert subscription is not None and set(subscription.tags_set) == {"x", "y"}
    await proxy.unary(
        "NotifyClientTermination",
        spb.NotifyClientTerminationRequest(),
        spb.NotifyClientTerminationResponse,
    )
    assert consumers.client_ids("Members") == []
    await stream.done_writing()

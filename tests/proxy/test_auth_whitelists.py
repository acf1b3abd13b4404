"""ACL 2.0's authenticationWhitelist / authorizationWhitelist on the 5.x proxy: RocketMQ 5.3
names a gRPC call by its request message's full name there. A call in both lists is answered
unsigned; one that only skips authentication is still authorized, so an unsigned one (no user
to authorize) is refused; a call in neither list must be signed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from bolide.broker.config import BrokerConfig
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.command import RemotingCommand
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.server import ProxyConfig, ProxyServer
from bolide.testing.cluster import Cluster

SERVICE = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "whitelist-client@1"), ("x-mq-language", "PYTHON"))
ROUTE = "apache.rocketmq.v2.QueryRouteRequest"
ASSIGNMENT = "apache.rocketmq.v2.QueryAssignmentRequest"
INNER = ("inner01", "inner-secret")


async def _call(channel: grpc.aio.Channel, method: str, request: Any, answer: Any) -> Any:
    call = channel.unary_unary(
        SERVICE + method,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=answer.FromString,
    )
    return await call(request, metadata=METADATA, timeout=10)


async def test_whitelisted_5x_calls_skip_their_step(tmp_path: Path) -> None:
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": "root01", "password": "root-secret"}),
        "authStoreFile": str(tmp_path / "auth.json"),
        "authenticationWhitelist": f"{ROUTE},{ASSIGNMENT}",
        "authorizationWhitelist": ROUTE,
    }
    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        auth = cluster.brokers[0].auth
        assert auth is not None
        assert auth.authentication_whitelist == {ROUTE, ASSIGNMENT}
        auth.add_inner_user(*INNER)  # the proxy's own requests to the broker, signed

        def sign(request: RemotingCommand) -> None:
            sign_request(request, *INNER)

        config = ProxyConfig(
            authenticator=auth.verify_grpc_authorization, authorizer=auth.authorize_grpc, sign=sign
        )
        server = ProxyServer([cluster.namesrv_address], port=0, config=config)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                route = spb.QueryRouteRequest()
                route.topic.name = "TBW102"
                answered = await _call(channel, "QueryRoute", route, spb.QueryRouteResponse)
                assert answered.status.code == pb.OK, answered.status.message
                assignment = spb.QueryAssignmentRequest()
                assignment.topic.name = "TBW102"
                assignment.group.name = "whitelisted"
                refused = await _call(
                    channel, "QueryAssignment", assignment, spb.QueryAssignmentResponse
                )
                assert refused.status.code == pb.FORBIDDEN
                assert "No accessKey" in refused.status.message
                heartbeat = spb.HeartbeatRequest()
                unsigned = await _call(channel, "Heartbeat", heartbeat, spb.HeartbeatResponse)
                assert unsigned.status.code == pb.UNAUTHORIZED
        finally:
            await server.stop()


def test_a_whitelist_entry_is_a_code_or_a_5x_request_name() -> None:
    config = BrokerConfig.from_mapping(
        {"authenticationWhitelist": f"10, {ROUTE}", "authorizationWhitelist": ""}
    )
    assert config.authentication_whitelist == {"10", ROUTE}
    with pytest.raises(Exception, match="authorizationWhitelist"):
        BrokerConfig.from_mapping({"authorizationWhitelist": "QueryRoute"})

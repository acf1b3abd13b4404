"""The proxy's route cache after a failover: a send that meets a dead master drops the
cached route (bounded per topic), so the client's retry reaches the new master at once
instead of after the cache's expiry."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from bolide.protocol.bodies import TopicConfig
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.server import ProxyServer
from bolide.testing.cluster import Cluster
from tests.client.conftest import eventually

pytestmark = pytest.mark.timeout(60)

SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"
METADATA = (("x-mq-client-id", "test-client@1"), ("x-mq-language", "PYTHON"))


def _send_request(body: bytes, message_id: str) -> spb.SendMessageRequest:
    message = pb.Message(body=body)
    message.topic.name = "Plain"
    message.system_properties.message_id = message_id
    message.system_properties.message_type = pb.NORMAL
    return spb.SendMessageRequest(messages=[message])


async def test_a_send_after_the_master_moved_reaches_the_new_master(tmp_path: Path) -> None:
    async with Cluster(tmp_path / "cluster") as cluster:
        old = cluster.broker("broker-a")
        await old.context.topics.update_topic_config(TopicConfig("Plain", 2, 2))
        await old.context.register_now()
        server = ProxyServer([cluster.namesrv_address], port=0)
        await server.start()
        channel = grpc.aio.insecure_channel(server.address)
        send = channel.unary_unary(
            SEND,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=spb.SendMessageResponse.FromString,
        )
        try:
            sent = await send(_send_request(b"before", "ID-0"), metadata=METADATA, timeout=10)
            assert sent.status.code == pb.OK
            await old.stop()
            cluster.brokers.remove(old)
            new = await cluster.add_broker(
                "broker-a", store_path_root_dir=tmp_path / "new" / "store"
            )
            await new.context.topics.update_topic_config(TopicConfig("Plain", 2, 2))
            await new.context.register_now()

            async def routed_to_new() -> bool:
                data = await server.directory.route("Plain")
                return data.broker_datas[0].broker_addrs.get(0) == new.address

            failed = await send(_send_request(b"lost", "ID-1"), metadata=METADATA, timeout=10)
            assert failed.status.code != pb.OK  # the dead master: the route is dropped
            assert await routed_to_new()
            again = await send(_send_request(b"after", "ID-2"), metadata=METADATA, timeout=10)
            assert again.status.code == pb.OK
            # bounded: a second failure right away does not drop the route again
            assert not server.directory.route_failed("Plain")
            await eventually(routed_to_new)
        finally:
            await channel.close()
            await server.stop()

"""GET_ALL_PRODUCER_INFO (328) over a socket: the producer groups a broker knows."""

from __future__ import annotations

from pathlib import Path

from bolide.client import rpc
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies.producer_table import ProducerTableInfo
from bolide.protocol.codes import LanguageCode, RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.testing.cluster import Cluster


async def test_all_producer_info_lists_each_group_and_client(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        broker = cluster.broker("broker-a")
        address = broker.config.broker_address
        producer = Producer("billing-producers", cluster.namesrv_address)
        await producer.start()
        try:
            await producer.instance.update_route("TBW102")
            await producer.instance.send_heartbeat_to_all_brokers()
            request = RemotingCommand.request(RequestCode.GET_ALL_PRODUCER_INFO)
            response = await rpc.call(producer.instance.pool, address, request, 3_000)
            table = ProducerTableInfo.from_json(response.body)
            now_ms = broker.context.clock.now_ms()
        finally:
            await producer.shutdown()
    assert list(table.data) == ["billing-producers"]
    (info,) = table.data["billing-producers"]
    assert info.client_id == producer.instance.client_id
    assert info.language is LanguageCode.PYTHON
    assert info.remote_ip.startswith("127.0.0.1:")
    assert 1_600_000_000_000 < info.last_update_timestamp_ms <= now_ms  # epoch ms, not monotonic


def test_producer_table_body_round_trips() -> None:
    body = (
        b'{"data":{"g":[{"clientId":"c@1","remoteIP":"10.0.0.1:5","language":"JAVA",'
        b'"version":453,"lastUpdateTimestamp":1700000000000}]}}'
    )
    table = ProducerTableInfo.from_json(body)
    assert table.data["g"][0].language is LanguageCode.JAVA
    assert ProducerTableInfo.from_json(table.to_json()) == table

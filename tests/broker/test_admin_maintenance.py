"""Store maintenance (306, 316, 329), correction offsets (308) and the consumers' own status
(223 through 221) over sockets: raw remoting requests, and the same through AdminClient."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.base.clock import ManualClock
from bolide.broker.handlers.admin_maintenance import JAVA_LONG_MAX
from bolide.client.admin.client import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.consumer_status import GetConsumerStatusBody, QueryCorrectionOffsetBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import MessageExt
from bolide.store.file_ops import DiskUsage, FileOps
from bolide.store.retention import local_hour_of_day
from bolide.testing.cluster import Cluster
from tests.client.conftest import eventually as eventually_answered
from tests.integration.client_support import create_topic
from tests.integration.wire import connected

R = RequestCode


def _retention_settings(clock: ManualClock) -> dict[str, str]:
    # deleteWhen twelve hours away: only a manual request deletes by age now.
    other_hour = (local_hour_of_day(clock.now_ms()) + 12) % 24
    return {
        "mapedFileSizeCommitLog": "4096",
        "fileReservedTime": "1",
        "deleteWhen": str(other_hour),
    }


def _disk_half_full(_file_ops: FileOps, _path: Path) -> DiskUsage:
    return DiskUsage(total_bytes=1 << 40, used_bytes=1 << 39)


async def test_expired_commit_log_and_consume_queues_are_cleaned_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine's own disk may be fuller than diskMaxUsedSpaceRatio (75 %): then the
    # pressure rule would delete segments outside the deleteWhen hour, which is right for a
    # broker but not what this test is about. Disk use is pinned at half.
    monkeypatch.setattr(FileOps, "disk_usage", _disk_half_full)
    clock = ManualClock()
    async with connected(tmp_path, clock=clock, settings=_retention_settings(clock)) as (
        cluster,
        wire,
    ):
        store = cluster.brokers[0].context.store
        for index in range(30):
            await wire.send("Old", f"old message {index:03d}".encode() * 4)
        for index in range(100):
            await wire.send("New", f"new message {index:03d}".encode() * 4)
        clock.advance_ms(2 * 3_600_000 + 1)
        assert await store.run_retention_once() == 0  # not the deleteWhen hour
        response = await wire.invoke(RemotingCommand.request(R.DELETE_EXPIRED_COMMITLOG))
        assert response.code == ResponseCode.SUCCESS
        deleted = int((response.remark or "").split()[0])
        assert deleted > 0
        assert store.min_offset("Old", 0) == store.max_offset("Old", 0) == 30
        assert store.min_offset("New", 0) < store.max_offset("New", 0) == 100
        response = await wire.invoke(RemotingCommand.request(R.CLEAN_EXPIRED_CONSUMEQUEUE))
        assert response.code == ResponseCode.SUCCESS
        assert response.remark == "expired consume queues: 1 topic(s) Old"
        queues = store.topics_and_queues()
        assert "Old" not in queues and "New" in queues


async def test_unused_topics_lose_their_consume_queues(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, wire):
        context = cluster.brokers[0].context
        await wire.send("Gone", b"one")
        await wire.send("Kept", b"two")
        assert await context.topics.delete_topic("Gone")
        assert "Gone" in context.store.topics_and_queues()
        async with AdminClient(cluster.namesrv_address) as admin:
            answers = await admin.clean_unused_topics()
        assert answers == {"broker-a": "unused topics: 1 topic(s) Gone"}
        queues = context.store.topics_and_queues()
        assert "Gone" not in queues and "Kept" in queues
        again = await wire.invoke(RemotingCommand.request(R.CLEAN_UNUSED_TOPIC))
        assert (again.code, again.remark) == (ResponseCode.SUCCESS, "unused topics: 0 topic(s)")
        async with AdminClient(cluster.namesrv_address) as admin:
            assert await admin.clean_expired_consume_queues() == {
                "broker-a": "expired consume queues: 0 topic(s)"
            }
            assert await admin.delete_expired_commit_log() == {
                "broker-a": "0 expired commit-log segment(s) deleted"
            }


async def test_correction_offsets_take_the_lowest_group_and_the_compared_one(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path) as (cluster, wire):
        await create_topic(cluster, "Orders", 2)
        for _ in range(10):
            await wire.send("Orders", b"x")
        offsets = cluster.brokers[0].context.offsets
        for group, queue0, queue1 in (("A", 5, 9), ("B", 3, 2), ("C", 8, 1), ("D", 1, 5)):
            offsets.set_queue_offsets(group, "Orders", {0: queue0, 1: queue1})

        async def ask(compare: str, filtered: str | None) -> dict[int, int]:
            fields = {"topic": "Orders", "compareGroup": compare}
            if filtered is not None:
                fields["filterGroups"] = filtered
            response = await wire.invoke(RemotingCommand.request(R.QUERY_CORRECTION_OFFSET, fields))
            assert response.code == ResponseCode.SUCCESS
            assert b"{0:" in response.body  # fastjson's unquoted integer keys
            return QueryCorrectionOffsetBody.from_json(response.body).correction_offsets

        assert await ask("A", None) == {0: 1, 1: 1}
        assert await ask("A", "B,D") == {0: 5, 1: 1}
        assert await ask("D", "D") == {0: JAVA_LONG_MAX, 1: 1}
        assert offsets.queue_offsets("D", "Orders") == {0: 1, 1: 5}  # a query deletes nothing
        async with AdminClient(cluster.namesrv_address) as admin:
            answer = await admin.correction_offsets("Orders", "D", filter_groups=["D"])
        assert answer == {"broker-a": {0: JAVA_LONG_MAX, 1: 1}}


async def test_consumer_status_asks_each_online_client(tmp_path: Path) -> None:
    async with Cluster(tmp_path) as cluster:
        await create_topic(cluster, "Orders", 2)
        address = cluster.brokers[0].address
        fields = {"topic": "Orders", "group": "readers"}
        async with AdminClient(cluster.namesrv_address) as admin:
            response = await admin.pool.invoke(
                address,
                RemotingCommand.request(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, fields),
                5_000,
            )
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark == "No Any Consumer online in the consumer group: [readers]"
            async with Producer("writers", namesrv=cluster.namesrv_address) as producer:
                for queue_id in (0, 1, 1):
                    await producer.send(
                        Message("Orders", b"x"), queue=MessageQueue("Orders", "broker-a", queue_id)
                    )
            consumed: list[MessageExt] = []

            def listener(messages: list[MessageExt]) -> ConsumeResult:
                consumed.extend(messages)
                return ConsumeResult.SUCCESS

            push = PushConsumer(
                "readers", namesrv=cluster.namesrv_address, consume_from=ConsumeFrom.FIRST_OFFSET
            )
            push.register_listener(listener)
            push.subscribe("Orders")
            async with push:
                client_id = push.instance.client_id
                queues = {MessageQueue("Orders", "broker-a", q): n for q, n in ((0, 1), (1, 2))}

                async def reported() -> bool:
                    status = await admin.consumer_status("readers", "Orders")
                    return status == {client_id: queues}

                await eventually_answered(reported)
                assert len(consumed) == 3
                response = await admin.pool.invoke(
                    address,
                    RemotingCommand.request(
                        R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                        {**fields, "clientAddr": "someone-else"},
                    ),
                    5_000,
                )
                assert response.code == ResponseCode.SUCCESS
                assert GetConsumerStatusBody.from_json(response.body).consumer_table == {}
                assert await admin.consumer_status("readers", "Orders", client_id=client_id) == {
                    client_id: queues
                }


def test_bodies_read_the_java_forms() -> None:
    java = (
        b'{"consumerTable":{"c@1":{{"brokerName":"b","queueId":1,"topic":"T"}:7}},'
        b'"messageQueueTable":{}}'
    )
    body = GetConsumerStatusBody.from_json(java)
    assert body.consumer_table == {"c@1": {MessageQueue("T", "b", 1): 7}}
    assert GetConsumerStatusBody.from_json(body.to_json()) == body
    correction = QueryCorrectionOffsetBody.from_json(b'{"correctionOffsets":{0:3,1:9}}')
    assert correction.correction_offsets == {0: 3, 1: 9}
    assert correction.to_json() == b'{"correctionOffsets":{0:3,1:9}}'

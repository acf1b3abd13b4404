"""The broker's admin requests over real sockets (docs/protocol.md §2.10, §2.11): topic deletion and
statistics, who consumes a topic, connection lists, consume stats, group deletion, offset
cloning, reset offset (stored on the broker, pushed to each consumer in the form its language
reads) and GET_CONSUMER_RUNNING_INFO forwarded to the client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from bolide.base import limits
from bolide.broker.broker import Broker
from bolide.protocol.bodies import (
    ConsumerConnection,
    ConsumerRunningInfo,
    ConsumeStats,
    GroupList,
    ProducerConnection,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    TopicStatsTable,
)
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumerGroupRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.broker.admin_support import FakeConsumer, admin_cluster, fill, queue
from tests.integration.wire import BrokerWire, heartbeat_request, pull_request

pytestmark = pytest.mark.timeout(60)

TOPIC = "AdminTopic"


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Cluster, Broker, BrokerWire]]:
    async with admin_cluster(tmp_path) as cluster:
        pool = ClientPool()
        broker = cluster.brokers[0]
        wire = BrokerWire(pool, broker.address)
        try:
            await create_topic(wire, TOPIC, 4)
            yield cluster, broker, wire
        finally:
            await pool.close()


async def create_topic(wire: BrokerWire, topic: str, queues: int) -> None:
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6)
    response = await wire.invoke(
        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    )
    assert response.code == ResponseCode.SUCCESS, response.remark


async def commit(wire: BrokerWire, group: str, topic: str, offsets: dict[int, int]) -> None:
    for queue_id, offset in offsets.items():
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        response = await wire.invoke(
            RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
        )
        assert response.code == ResponseCode.SUCCESS


def request(code: RequestCode, fields: dict[str, str], body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, fields, body)


async def reset(
    wire: BrokerWire, group: str, timestamp_ms: int, *, force: bool = True
) -> RemotingCommand:
    header = ResetOffsetRequestHeader(TOPIC, group, timestamp_ms, force)
    return await wire.invoke(
        request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext_fields())
    )


# --- topics ---------------------------------------------------------------------------------------


async def test_topic_stats_give_min_max_and_last_store_time(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    _, broker, wire = setup
    await fill(wire, TOPIC, {0: 3, 2: 1})
    fields = TopicRequestHeader(TOPIC).to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_TOPIC_STATS_INFO, fields))
    assert response.code == ResponseCode.SUCCESS
    table = TopicStatsTable.from_json(response.body).offset_table
    assert sorted(q.queue_id for q in table) == [0, 1, 2, 3]
    assert (table[queue(TOPIC, 0)].min_offset, table[queue(TOPIC, 0)].max_offset) == (0, 3)
    assert table[queue(TOPIC, 1)].max_offset == 0
    assert table[queue(TOPIC, 1)].last_update_timestamp_ms == 0
    store = broker.context.store
    assert table[queue(TOPIC, 0)].last_update_timestamp_ms == store.store_time_at(TOPIC, 0, 2)
    # The Java form: MessageQueue objects inlined as keys.
    assert response.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a"')

    missing = TopicRequestHeader("NoSuchTopic").to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_TOPIC_STATS_INFO, missing))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_delete_topic_drops_config_queues_and_offsets(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    cluster, broker, wire = setup
    await fill(wire, TOPIC, {0: 2})
    await commit(wire, "G_DEL", TOPIC, {0: 2})
    fields = TopicRequestHeader(TOPIC).to_ext_fields()
    response = await wire.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, fields))
    assert response.code == ResponseCode.SUCCESS
    context = broker.context
    assert context.topics.find(TOPIC) is None
    assert TOPIC not in context.store.topics_and_queues()
    assert context.offsets.query_offset("G_DEL", TOPIC, 0) == -1

    # As Java's name server (deleteTopicWithBrokerRegistration=false), the route goes with
    # DELETE_TOPIC_IN_NAMESRV, which admin tools send after the brokers' deletion.
    async def route_code() -> int:
        route = await wire.pool.invoke(
            cluster.namesrv_address,
            request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}),
            5_000,
        )
        return route.code

    assert await route_code() == ResponseCode.SUCCESS
    deleted = await wire.pool.invoke(
        cluster.namesrv_address,
        request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": TOPIC}),
        5_000,
    )
    assert deleted.code == ResponseCode.SUCCESS
    assert await route_code() == ResponseCode.TOPIC_NOT_EXIST
    # A system topic is refused; deleting twice is harmless.
    system = TopicRequestHeader("SCHEDULE_TOPIC_XXXX").to_ext_fields()
    response = await wire.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, system))
    assert response.code == ResponseCode.SYSTEM_ERROR
    response = await wire.invoke(request(RequestCode.DELETE_TOPIC_IN_BROKER, fields))
    assert response.code == ResponseCode.SUCCESS


async def test_who_consumes_a_topic(setup: tuple[Cluster, Broker, BrokerWire]) -> None:
    _, _, wire = setup
    await commit(wire, "G_OFFSETS", TOPIC, {0: 0})
    beat = heartbeat_request("client-1", consumer_groups={"G_ONLINE": {TOPIC: "*"}})
    assert (await wire.invoke(beat)).code == ResponseCode.SUCCESS
    fields = TopicRequestHeader(TOPIC).to_ext_fields()
    response = await wire.invoke(request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, fields))
    assert GroupList.from_json(response.body).group_list == ("G_OFFSETS", "G_ONLINE")


# --- groups ---------------------------------------------------------------------------------------


async def test_connection_lists(setup: tuple[Cluster, Broker, BrokerWire]) -> None:
    _, _, wire = setup
    fields = ConsumerGroupRequestHeader("G_CONN").to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields))
    assert response.code == ResponseCode.CONSUMER_NOT_ONLINE
    producer_fields = GetProducerConnectionListRequestHeader("PG_CONN").to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_PRODUCER_CONNECTION_LIST, producer_fields))
    assert response.code == ResponseCode.SYSTEM_ERROR

    beat = heartbeat_request(
        "client-c", consumer_groups={"G_CONN": {TOPIC: "a || b"}}, producer_groups=["PG_CONN"]
    )
    beat.language = LanguageCode.CPP
    beat.version = 63
    assert (await wire.invoke(beat)).code == ResponseCode.SUCCESS
    response = await wire.invoke(request(RequestCode.GET_CONSUMER_CONNECTION_LIST, fields))
    consumers = ConsumerConnection.from_json(response.body)
    [client] = consumers.connection_set
    assert (client.client_id, client.language, client.version) == ("client-c", LanguageCode.CPP, 63)
    assert consumers.subscription_table[TOPIC].tags_set == ("a", "b")
    response = await wire.invoke(request(RequestCode.GET_PRODUCER_CONNECTION_LIST, producer_fields))
    [producer] = ProducerConnection.from_json(response.body).connection_set
    assert producer.client_id == "client-c"


async def test_consume_stats(setup: tuple[Cluster, Broker, BrokerWire]) -> None:
    _, broker, wire = setup
    fields = GetConsumeStatsRequestHeader("G_UNKNOWN").to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_CONSUME_STATS, fields))
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST

    await fill(wire, TOPIC, {0: 5, 1: 2})
    await commit(wire, "G_STATS", TOPIC, {0: 3})
    fields = GetConsumeStatsRequestHeader("G_STATS").to_ext_fields()
    response = await wire.invoke(request(RequestCode.GET_CONSUME_STATS, fields))
    assert response.code == ResponseCode.SUCCESS
    table = ConsumeStats.from_json(response.body).offset_table
    first, second = table[queue(TOPIC, 0)], table[queue(TOPIC, 1)]
    assert (first.broker_offset, first.consumer_offset) == (5, 3)
    assert first.last_timestamp_ms == broker.context.store.store_time_at(TOPIC, 0, 2)
    assert (second.broker_offset, second.consumer_offset, second.last_timestamp_ms) == (2, 0, 0)
    # An online group shows only what it subscribes.
    beat = heartbeat_request("client-s", consumer_groups={"G_STATS": {"OtherTopic": "*"}})
    await create_topic(wire, "OtherTopic", 1)
    assert (await wire.invoke(beat)).code == ResponseCode.SUCCESS
    response = await wire.invoke(request(RequestCode.GET_CONSUME_STATS, fields))
    topics = {q.topic for q in ConsumeStats.from_json(response.body).offset_table}
    assert topics == {"OtherTopic"}


async def test_delete_group_and_its_offsets(setup: tuple[Cluster, Broker, BrokerWire]) -> None:
    _, broker, wire = setup
    config = SubscriptionGroupConfig("G_GONE", retry_max_times=3)
    response = await wire.invoke(
        request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, config.to_json())
    )
    assert response.code == ResponseCode.SUCCESS
    await commit(wire, "G_GONE", TOPIC, {0: 1})
    await commit(wire, "G_KEEP", TOPIC, {0: 1})
    fields = DeleteSubscriptionGroupRequestHeader("G_GONE", remove_offset=True).to_ext_fields()
    assert (await wire.invoke(request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields))).code == 0
    context = broker.context
    assert context.groups.find("G_GONE") is None
    assert context.offsets.query_offset("G_GONE", TOPIC, 0) == -1
    assert context.offsets.query_offset("G_KEEP", TOPIC, 0) == 1
    fields = DeleteSubscriptionGroupRequestHeader("G_KEEP", remove_offset=False).to_ext_fields()
    assert (await wire.invoke(request(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields))).code == 0
    assert context.offsets.query_offset("G_KEEP", TOPIC, 0) == 1


async def test_clone_group_offsets(setup: tuple[Cluster, Broker, BrokerWire]) -> None:
    _, broker, wire = setup
    await commit(wire, "G_SRC", TOPIC, {0: 4, 1: 7})
    header = CloneGroupOffsetRequestHeader("G_SRC", "G_DST", TOPIC)
    response = await wire.invoke(request(RequestCode.CLONE_GROUP_OFFSET, header.to_ext_fields()))
    assert response.code == ResponseCode.SUCCESS
    assert broker.context.offsets.queue_offsets("G_DST", TOPIC) == {0: 4, 1: 7}


# --- reset offset ---------------------------------------------------------------------------------


async def test_reset_by_time_stores_offsets_for_an_offline_group(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    _, broker, wire = setup
    await fill(wire, TOPIC, {0: 4})
    await commit(wire, "G_RESET", TOPIC, {0: 4})
    store = broker.context.store
    middle_ms = store.store_time_at(TOPIC, 0, 2)

    response = await reset(wire, "G_RESET", middle_ms)
    assert response.code == ResponseCode.SUCCESS
    offsets = ResetOffsetBody.from_json(response.body).offset_table
    expected = store.offset_for_timestamp(TOPIC, 0, middle_ms)
    assert expected <= 2 and store.store_time_at(TOPIC, 0, expected) == middle_ms
    assert offsets[queue(TOPIC, 0)] == expected
    assert broker.context.offsets.query_offset("G_RESET", TOPIC, 0) == expected
    # The new offsets are on disk already (an offline group finds them after a restart).
    saved = orjson.loads(broker.context.offsets.path.read_bytes())
    assert saved["offsetTable"][f"{TOPIC}@G_RESET"]["0"] == expected

    assert (await reset(wire, "G_RESET", -1)).code == ResponseCode.SUCCESS  # latest
    assert broker.context.offsets.query_offset("G_RESET", TOPIC, 0) == 4
    assert (await reset(wire, "G_RESET", 0)).code == ResponseCode.SUCCESS  # earliest
    assert broker.context.offsets.query_offset("G_RESET", TOPIC, 0) == 0
    # Without force a queue only moves backwards.
    assert (await reset(wire, "G_RESET", -1, force=False)).code == ResponseCode.SUCCESS
    assert broker.context.offsets.query_offset("G_RESET", TOPIC, 0) == 0


async def test_reset_refuses_unknown_topic_and_group(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    _, _, wire = setup
    assert (await reset(wire, "G_NEVER_SEEN", 0)).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    header = ResetOffsetRequestHeader("NoSuchTopic", "G", 0, True)
    response = await wire.invoke(
        request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext_fields())
    )
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


async def test_reset_reaches_each_consumer_in_its_language(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    _, broker, wire = setup
    await fill(wire, TOPIC, {0: 3, 1: 3})
    consumers = {
        language: FakeConsumer(f"{language.name}-client", language, 63)
        for language in (LanguageCode.CPP, LanguageCode.JAVA, LanguageCode.PYTHON)
    }
    try:
        for consumer in consumers.values():
            await consumer.connect(broker.address, "G_LANG", TOPIC)
        assert (await reset(wire, "G_LANG", 0)).code == ResponseCode.SUCCESS
        notices = {lang: await consumer.next_reset() for lang, consumer in consumers.items()}
    finally:
        for consumer in consumers.values():
            await consumer.close()
    expected = {queue(TOPIC, queue_id): 0 for queue_id in range(4)}
    for notice in notices.values():
        assert notice.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
        assert notice.is_oneway
        assert ResetOffsetBody.from_json(notice.body).offset_table == expected
        assert (notice.ext_fields["topic"], notice.ext_fields["group"]) == (TOPIC, "G_LANG")
    # C++ reads the list form and isForce with atoi; Python gets the same standard JSON.
    for language in (LanguageCode.CPP, LanguageCode.PYTHON):
        body = orjson.loads(notices[language].body)
        assert body["offsetTable"][0] == {
            "brokerName": "broker-a",
            "offset": 0,
            "queueId": 0,
            "topic": TOPIC,
        }
        assert notices[language].ext_fields["isForce"] == "1"
    # Java reads fastjson's object keys (not JSON) and "true".
    java = notices[LanguageCode.JAVA]
    assert java.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0')
    assert java.ext_fields["isForce"] == "true"


async def test_reset_ends_the_consumers_parked_pulls(
    setup: tuple[Cluster, Broker, BrokerWire],
) -> None:
    _, broker, wire = setup
    consumer = FakeConsumer("parked-client", LanguageCode.CPP, 63)
    try:
        await consumer.connect(broker.address, "G_PARK", TOPIC)
        assert consumer.pool is not None
        parked = asyncio.ensure_future(
            consumer.pool.invoke(
                broker.address,
                pull_request(TOPIC, 0, 0, group="G_PARK", sys_flag=0b110),
                limits.PULL_RPC_TIMEOUT_MS,
            )
        )
        long_polling = broker.context.long_polling
        while long_polling.count == 0:  # noqa: ASYNC110 - the pull parks on the broker's loop
            await asyncio.sleep(0)
        assert (await reset(wire, "G_PARK", 0)).code == ResponseCode.SUCCESS
        await consumer.next_reset()
        answer = await asyncio.wait_for(parked, 10)  # far less than the 15 s hold
        assert answer.code == ResponseCode.PULL_NOT_FOUND
    finally:
        await consumer.close()


# --- running info ---------------------------------------------------------------------------------


async def test_running_info_is_forwarded_to_the_client(
    setup: tuple[Cluster, Broker, BrokerWire], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, broker, wire = setup
    info = ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
        mq_table={queue(TOPIC, 1): {"commitOffset": 17}},
    )
    answering = FakeConsumer("answering", LanguageCode.JAVA, running_info=info)
    silent = FakeConsumer("silent", LanguageCode.CPP, 63)
    monkeypatch.setattr(limits, "BROKER_CALL_CONSUMER_TIMEOUT_MS", 200)
    try:
        await answering.connect(broker.address, "G_INFO", TOPIC)
        await silent.connect(broker.address, "G_INFO", TOPIC)

        async def ask(client_id: str) -> RemotingCommand:
            header = GetConsumerRunningInfoRequestHeader("G_INFO", client_id)
            return await wire.invoke(
                request(RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields())
            )

        response = await ask("answering")
        assert response.code == ResponseCode.SUCCESS
        got = ConsumerRunningInfo.from_json(response.body)
        assert got.mq_table[queue(TOPIC, 1)]["commitOffset"] == 17
        assert (await ask("nobody")).code == ResponseCode.SYSTEM_ERROR
        assert (await ask("silent")).code == ResponseCode.CONSUME_MSG_TIMEOUT
    finally:
        await answering.close()
        await silent.close()

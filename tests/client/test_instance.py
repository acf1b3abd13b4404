"""ClientInstance against a real broker: heartbeats, the four loops on a manual clock, and the
requests a broker sends to its clients over their own connections."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from dataclasses import dataclass, field

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import InvariantViolationError, NameServerUnavailableError
from bolide.client.config import ClientConfig
from bolide.client.instance import PROPERTY_CLIENT_ID, ClientInstance
from bolide.protocol.bodies import (
    ConsumerData,
    ConsumerRunningInfo,
    MessageQueue,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionData,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader
from bolide.remoting import Connection
from bolide.testing.cluster import Cluster
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(60)

GROUP = "billing"
TOPIC = "orders"


@dataclass
class RecordingConsumer:
    """The consumer side of the InstanceConsumer interface, recording what the instance asks."""

    group: str = GROUP
    topics: tuple[str, ...] = (TOPIC,)
    rebalances: int = 0
    persists: int = 0
    resets: list[tuple[str, dict[MessageQueue, int]]] = field(default_factory=list)

    def consumer_data(self) -> ConsumerData:
        subscriptions = tuple(SubscriptionData.from_expression(t, "*", 1) for t in self.topics)
        return ConsumerData(self.group, subscription_data_set=subscriptions)

    def subscribed_topics(self) -> Collection[str]:
        return self.topics

    async def do_rebalance(self) -> None:
        self.rebalances += 1

    async def persist_offsets(self) -> None:
        self.persists += 1

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        self.resets.append((topic, dict(offsets)))

    def running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo(properties={"consumeType": "CONSUME_PASSIVELY"})


def make_instance(cluster: Cluster, name: str, clock: ManualClock) -> ClientInstance:
    config = ClientConfig((cluster.namesrv_address,), "127.0.0.1", 4242, instance_name=name)
    return ClientInstance(config, clock=clock)


@pytest.fixture
async def instance(cluster: Cluster) -> AsyncIterator[ClientInstance]:
    client = make_instance(cluster, "one", ManualClock())
    await client.acquire()
    await client.update_route("TBW102")  # knows the broker from the start
    yield client
    await client.release()


def broker_channel(cluster: Cluster, client_id: str) -> Connection:
    info = cluster.brokers[0].context.consumers.find_channel(GROUP, client_id)
    assert info is not None, "the broker has no channel for the client"
    return info.channel


async def test_heartbeat_registers_producer_and_consumer_groups(
    cluster: Cluster, instance: ClientInstance
) -> None:
    instance.register_producer("pg")
    instance.register_consumer(RecordingConsumer())
    await instance.send_heartbeat_to_all_brokers()
    broker = cluster.brokers[0]
    assert broker.context.consumers.client_ids(GROUP) == [instance.client_id]
    assert broker.context.producers.find_channel_by_client_id(instance.client_id) is not None
    assert instance.broker_versions == {broker.address: 401}
    assert await instance.find_consumer_ids("TBW102", GROUP) == [instance.client_id]


async def test_a_second_member_joining_wakes_the_first_one_s_rebalance(
    cluster: Cluster, instance: ClientInstance
) -> None:
    first = RecordingConsumer()
    instance.register_consumer(first)
    await instance.send_heartbeat_to_all_brokers()
    other = make_instance(cluster, "two", ManualClock())
    await other.acquire()
    try:
        await other.update_route("TBW102")
        other.register_consumer(RecordingConsumer())
        before = first.rebalances
        await other.send_heartbeat_to_all_brokers()  # the broker notifies every member
        await until(lambda: first.rebalances > before)
        assert sorted(await instance.find_consumer_ids("TBW102", GROUP) or []) == sorted(
            [instance.client_id, other.client_id]
        )
        await other.unregister_consumer(GROUP)
        assert cluster.brokers[0].context.consumers.client_ids(GROUP) == [instance.client_id]
    finally:
        await other.release()


async def test_loops_run_on_the_clock(cluster: Cluster) -> None:
    clock = ManualClock()
    client = make_instance(cluster, "clocked", clock)
    consumer = RecordingConsumer()
    client.register_consumer(consumer)

    async def all_loops_asleep() -> None:
        await until(lambda: clock.sleeper_count == 4, max_spins=1_000_000)

    await client.acquire()
    try:
        await all_loops_asleep()
        assert (consumer.persists, consumer.rebalances) == (0, 0)
        clock.advance_ms(limits.CONSUMER_OFFSET_PERSIST_INITIAL_DELAY_MS)  # also routes, heartbeat
        await until(lambda: consumer.persists == 1)
        await all_loops_asleep()
        clock.advance_ms(limits.CONSUMER_OFFSET_PERSIST_INTERVAL_MS - 1)
        await all_loops_asleep()
        assert consumer.persists == 1
        clock.advance_ms(1)
        await until(lambda: consumer.persists == 2)
        await all_loops_asleep()
        clock.advance_ms(limits.REBALANCE_INTERVAL_MS - clock.monotonic_ms())
        await until(lambda: consumer.rebalances == 1)
        await all_loops_asleep()
        client.rebalance_now()
        await until(lambda: consumer.rebalances == 2)
    finally:
        await client.release()
    assert not client.running
    with pytest.raises(InvariantViolationError):
        _ = client.pool


@dataclass
class FailingConsumer(RecordingConsumer):
    """A consumer whose rebalance and offset persistence fail with an operating error."""

    async def do_rebalance(self) -> None:
        self.rebalances += 1
        raise NameServerUnavailableError("no name server answers (test)")

    async def persist_offsets(self) -> None:
        self.persists += 1
        raise NameServerUnavailableError("no name server answers (test)")


async def test_one_consumer_failing_its_step_leaves_the_others_theirs(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_instance(cluster, "failing", ManualClock())
    failing, healthy = FailingConsumer(group="failing"), RecordingConsumer()
    client.register_consumer(failing)
    client.register_consumer(healthy)
    await client.acquire()
    try:
        client.rebalance_now()
        await until(lambda: (failing.rebalances, healthy.rebalances) == (1, 1))
        await client.persist_all_offsets()
        assert (failing.persists, healthy.persists) == (1, 1)
    finally:
        await client.release()
    messages = [record.getMessage() for record in caplog.records]
    assert any(m.startswith("rebalance of group failing failed: ") for m in messages)
    assert any(m.startswith("offset persistence of group failing failed: ") for m in messages)


async def test_route_and_heartbeat_loops_reach_the_servers(cluster: Cluster) -> None:
    clock = ManualClock()
    client = make_instance(cluster, "routes", clock)
    client.register_consumer(RecordingConsumer(topics=("TBW102",)))
    consumers = cluster.brokers[0].context.consumers
    await client.acquire()
    try:
        await until(lambda: clock.sleeper_count == 4)
        clock.advance_ms(limits.ROUTE_POLL_INITIAL_DELAY_MS)
        await until(lambda: client.routes.get("TBW102") is not None, max_spins=1_000_000)
        assert consumers.client_ids(GROUP) == []
        await until(lambda: clock.sleeper_count == 4, max_spins=1_000_000)
        clock.advance_ms(limits.HEARTBEAT_INITIAL_DELAY_MS)
        await until(lambda: consumers.client_ids(GROUP) == [client.client_id], max_spins=1_000_000)
    finally:
        await client.release()


async def test_reset_offsets_in_both_body_forms(cluster: Cluster, instance: ClientInstance) -> None:
    consumer = RecordingConsumer()
    instance.register_consumer(consumer)
    await instance.send_heartbeat_to_all_brokers()
    channel = broker_channel(cluster, instance.client_id)
    table = {MessageQueue(TOPIC, "broker-a", 0): 5, MessageQueue(TOPIC, "broker-a", 1): 9}
    header = ResetOffsetRequestHeader(TOPIC, GROUP, 0, True)
    for body in (ResetOffsetBody(table).to_json(), ResetOffsetBodyForC(table).to_json()):
        request = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header.to_ext_fields(), body
        )
        await channel.invoke_oneway(request)
    await until(lambda: len(consumer.resets) == 2)
    assert consumer.resets == [(TOPIC, table), (TOPIC, table)]


async def test_running_info_is_answered_for_a_registered_group(
    cluster: Cluster, instance: ClientInstance
) -> None:
    instance.register_consumer(RecordingConsumer())
    await instance.send_heartbeat_to_all_brokers()
    channel = broker_channel(cluster, instance.client_id)
    for group, expected in ((GROUP, ResponseCode.SUCCESS), ("nobody", ResponseCode.SYSTEM_ERROR)):
        header = GetConsumerRunningInfoRequestHeader(group, instance.client_id)
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields()
        )
        response = await channel.invoke(request, 3_000)
        assert response.code == expected
        if expected is ResponseCode.SYSTEM_ERROR:
            assert (
                response.remark == f"the consumer group nobody does not run in {instance.client_id}"
            )
    info = ConsumerRunningInfo.from_json(
        (await channel.invoke(RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            GetConsumerRunningInfoRequestHeader(GROUP, instance.client_id).to_ext_fields(),
        ), 3_000)).body
    )  # fmt: skip
    assert info.properties[PROPERTY_CLIENT_ID] == instance.client_id
    assert info.properties["consumeType"] == "CONSUME_PASSIVELY"


async def test_a_group_runs_once_per_instance(instance: ClientInstance) -> None:
    from bolide.base.errors import ConfigError

    instance.register_consumer(RecordingConsumer())
    with pytest.raises(ConfigError, match="already runs"):
        instance.register_consumer(RecordingConsumer())
    instance.register_producer("pg")
    with pytest.raises(ConfigError, match="already runs"):
        instance.register_producer("pg")


@pytest.fixture
def refusing_address() -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


async def test_name_server_fail_over(cluster: Cluster, refusing_address: str) -> None:
    config = ClientConfig((refusing_address, cluster.namesrv_address), "127.0.0.1", 1)
    client = ClientInstance(config)
    await client.acquire()
    try:
        route = await client.fetch_route("TBW102")
        assert route.broker_datas[0].broker_name == "broker-a"
        assert await client.fetch_route("TBW102") == route  # sticks to the one that answered
    finally:
        await client.release()
    only_down = ClientInstance(ClientConfig((refusing_address,), "127.0.0.1", 1))
    await only_down.acquire()
    try:
        with pytest.raises(NameServerUnavailableError, match=refusing_address):
            await only_down.fetch_route("TBW102")
    finally:
        await only_down.release()


async def test_shared_instance_runs_while_any_user_holds_it(cluster: Cluster) -> None:
    client = make_instance(cluster, "shared", ManualClock())
    await client.acquire()
    await client.acquire()
    await client.release()
    assert client.running
    await client.release()
    assert not client.running
    await client.acquire()  # may start again after a full release
    assert client.running
    await client.release()
    with pytest.raises(InvariantViolationError):
        await client.release()

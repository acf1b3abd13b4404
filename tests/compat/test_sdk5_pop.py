"""The official 5.x Python SDK's SimpleConsumer against ``bolide standalone`` (issue 29, POP):
a SQL92 subscription receives only the messages it selects and a bad expression is refused
with the broker's remark; a tag sharing another's hash is not delivered; messages that come
back after their invisible time pass the receive's filter; one undecodable message goes to the
DLQ alone while the ones popped with it are delivered; a new group starts as the broker's
newGroupStartRule says."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bolide
from bolide.base.errors import BolideError
from bolide.protocol.codes import ResponseCode
from bolide.remoting import ClientPool
from tests.compat.sdk5_support import (
    Standalone,
    configuration,
    create_group,
    create_topic,
    sdk_message,
    standalone,
    wait_until,
)
from tests.integration.wire import BrokerWire, send_request

pytestmark = [pytest.mark.compat, pytest.mark.timeout(180)]

rocketmq = pytest.importorskip("rocketmq.v5")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Standalone]:
    conf = tmp_path / "broker.conf"
    conf.write_text("enablePropertyFilter=true\n")
    with standalone(tmp_path / "data", "-c", str(conf)) as running:
        yield running


def _producer(server: Standalone, topic: str) -> Any:
    from rocketmq import Producer

    producer = Producer(configuration(server.proxy), (topic,))
    producer.startup()
    return producer


def _consumer(server: Standalone, group: str, topic: str, expression: Any) -> Any:
    from rocketmq import SimpleConsumer

    consumer = SimpleConsumer(
        configuration(server.proxy), group, {topic: expression}, await_duration=2
    )
    consumer.startup()
    return consumer


def _tags(expression: str) -> Any:
    from rocketmq import FilterExpression

    return FilterExpression(expression)


def _sql(expression: str) -> Any:
    from rocketmq import FilterExpression
    from rocketmq.grpc_protocol import FilterType

    return FilterExpression(expression, FilterType.SQL)


def _receive(consumer: Any, count: int, invisible_s: int = 20, ack: bool = True) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.receive(32, invisible_s):
            got.append(message)
            if ack:
                consumer.ack(message)
    return got


def _nothing_more(consumer: Any) -> bool:
    return not consumer.receive(32, 20)


def test_a_sql92_simple_consumer_gets_only_the_matching_messages(server: Standalone) -> None:
    create_topic(server.namesrv, "Sql5", queues=2)
    producer = _producer(server, "Sql5")
    consumer = _consumer(server, "sql5", "Sql5", _sql("price > 10 AND region = 'eu'"))
    try:
        for index, (price, region) in enumerate(((5, "eu"), (20, "eu"), (30, "us"), (40, "eu"))):
            message = sdk_message(
                "Sql5", f"m{index}".encode(), properties={"price": str(price), "region": region}
            )
            producer.send(message)
        got = _receive(consumer, 2)
        assert sorted(m.body for m in got) == [b"m1", b"m3"]
        assert _nothing_more(consumer)
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_a_bad_sql92_expression_is_refused_with_the_brokers_remark(server: Standalone) -> None:
    create_topic(server.namesrv, "SqlBad5", queues=1)
    consumer = _consumer(server, "sqlbad5", "SqlBad5", _sql("price >>= 10"))
    try:
        with pytest.raises(Exception, match="parse the consumer's subscription failed"):
            consumer.receive(32, 20)
    finally:
        consumer.shutdown()


def test_a_tag_with_the_same_hash_is_not_received(server: Standalone) -> None:
    """``Aa`` and ``BB`` have the same Java hashCode, so the consume queue cannot tell them
    apart: the tag string check must."""
    create_topic(server.namesrv, "Collide5", queues=1)
    producer = _producer(server, "Collide5")
    consumer = _consumer(server, "collide5", "Collide5", _tags("Aa"))
    try:
        for index, tag in enumerate(("Aa", "BB", "Aa", "BB")):
            producer.send(sdk_message("Collide5", f"{tag}{index}".encode(), tag=tag))
        got = _receive(consumer, 2)
        assert sorted(m.body for m in got) == [b"Aa0", b"Aa2"]
        assert _nothing_more(consumer)
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_messages_that_come_back_pass_the_receives_filter(server: Standalone) -> None:
    """A group's first member takes everything and acks nothing; once the invisible time is
    over, a receive subscribed to tag X gets only X (before: every tag came back)."""
    create_topic(server.namesrv, "Back5", queues=1)
    producer = _producer(server, "Back5")
    try:
        for index, tag in enumerate(("X", "Y", "X", "Z")):
            producer.send(sdk_message("Back5", f"{tag}{index}".encode(), tag=tag))
    finally:
        producer.shutdown()
    everything = _consumer(server, "back5", "Back5", _tags("*"))
    try:
        assert len(_receive(everything, 4, invisible_s=1, ack=False)) == 4
    finally:
        everything.shutdown()
    only_x = _consumer(server, "back5", "Back5", _tags("X"))
    try:
        got = _receive(only_x, 2)
        assert sorted(m.body for m in got) == [b"X0", b"X2"]
        assert all(m.delivery_attempt == 2 for m in got)
        assert _nothing_more(only_x)
    finally:
        only_x.shutdown()


def test_one_undecodable_message_goes_to_the_dlq_alone(server: Standalone) -> None:
    """Between two good messages, one whose body says ZLIB-compressed but is not: the good
    ones are received, the bad one is in %DLQ%group (before: every receive failed)."""
    create_topic(server.namesrv, "Broken5", queues=1)
    asyncio.run(_store_with_a_broken_record(server.address("broker")))
    consumer = _consumer(server, "broken5", "Broken5", _tags("*"))
    try:
        got = _receive(consumer, 2)
        assert sorted(m.body for m in got) == [b"first", b"third"]
        assert _nothing_more(consumer)
    finally:
        consumer.shutdown()

    def in_dlq() -> bool:
        with bolide.AdminClient(server.namesrv) as admin:
            try:
                return bool(admin.query_by_key("%DLQ%broken5", "broken-key"))
            except BolideError:
                return False

    wait_until(in_dlq)


async def _store_with_a_broken_record(broker: str) -> None:
    pool = ClientPool()
    try:
        wire = BrokerWire(pool, broker)
        for body, keys, sys_flag in (
            (b"first", "k1", 0),
            (b"\x00not zlib", "broken-key", 0x1),  # COMPRESSED, zlib: does not inflate
            (b"third", "k3", 0),
        ):
            request = send_request("Broken5", body, keys=keys, queue_id=0)
            request.ext_fields["sysFlag"] = str(sys_flag)
            assert (await wire.invoke(request)).code == ResponseCode.SUCCESS
    finally:
        await pool.close()


def test_a_new_group_starts_as_new_group_start_rule_says(tmp_path: Path) -> None:
    """CONSUME_FROM: a new group starts at the newest message, as Java's POP does when the
    queue's start is not to be read (before: from 0 whenever the queue started at 0)."""
    conf = tmp_path / "broker.conf"
    conf.write_text("newGroupStartRule=CONSUME_FROM\n")
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        create_topic(server.namesrv, "Late5", queues=1)
        producer = _producer(server, "Late5")
        try:
            for index in range(3):
                producer.send(sdk_message("Late5", f"m{index}".encode()))
        finally:
            producer.shutdown()
        consumer = _consumer(server, "late5", "Late5", _tags("*"))
        try:
            got = _receive(consumer, 1)
            assert [m.body for m in got] == [b"m2"]
            assert _nothing_more(consumer)
        finally:
            consumer.shutdown()


def test_an_unacked_message_comes_back_through_the_retry_topic(server: Standalone) -> None:
    """Redelivered with the same id and one more attempt, while the group's offset on the
    normal queue moves on (its lag is 0 once the copy is acked); after max attempts the DLQ
    copy says how many times it was delivered."""
    create_topic(server.namesrv, "Retry5", queues=1)
    create_group(server.namesrv, "retry5", retry_max_times=1)
    producer = _producer(server, "Retry5")
    consumer = _consumer(server, "retry5", "Retry5", _tags("*"))
    try:
        producer.send(sdk_message("Retry5", b"again"))
        producer.send(sdk_message("Retry5", b"poison", keys="poison-key"))
        first = _receive(consumer, 2, invisible_s=1, ack=False)
        assert [m.delivery_attempt for m in first] == [1, 1]
        second = _receive(consumer, 2, invisible_s=1, ack=False)
        assert sorted(m.message_id for m in second) == sorted(m.message_id for m in first)
        assert [m.delivery_attempt for m in second] == [2, 2]
        consumer.ack(next(m for m in second if m.body == b"again"))
        with bolide.AdminClient(server.namesrv) as admin:

            def dead_lettered() -> bool:
                try:
                    return bool(admin.query_by_key("%DLQ%retry5", "poison-key"))
                except BolideError:
                    return False

            wait_until(dead_lettered)
            (dead,) = admin.query_by_key("%DLQ%retry5", "poison-key")
            assert dead.body == b"poison" and dead.reconsume_times == 2
            progress = admin.group_progress("retry5", topic="Retry5")
        normal = [row for row in progress.queues if row.queue.topic == "Retry5"]
        assert [(row.broker_offset, row.consumer_offset) for row in normal] == [(2, 2)]
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_a_simple_consumer_is_registered_with_the_broker(server: Standalone) -> None:
    """The proxy registers the SDK's consumer with the brokers of its topic (heartbeats), so
    GET_CONSUMER_CONNECTION_LIST names it with its subscription and `group progress` shows the
    group online with its true lag; it is unregistered when the client shuts down."""
    from bolide.protocol.bodies import ConsumeType

    create_topic(server.namesrv, "Seen5", queues=2)
    producer = _producer(server, "Seen5")
    consumer = _consumer(server, "seen5", "Seen5", _tags("a || b"))
    try:
        for index in range(4):
            producer.send(sdk_message("Seen5", f"m{index}".encode(), tag="a"))
        assert len(_receive(consumer, 4)) == 4
        with bolide.AdminClient(server.namesrv) as admin:
            wait_until(lambda: _members(admin, "seen5") == [consumer.client_id])
            connections = admin.consumer_connections("seen5")
            assert connections is not None
            assert connections.consume_type == ConsumeType.CONSUME_ACTIVELY
            assert set(connections.subscription_table["Seen5"].tags_set) == {"a", "b"}
            progress = admin.group_progress("seen5", topic="Seen5")
            assert progress.online
            assert sum(row.broker_offset for row in progress.queues) == 4
            assert progress.total_lag == 0  # every message acked: as a 4.x group that consumed all
    finally:
        consumer.shutdown()
        producer.shutdown()
    with bolide.AdminClient(server.namesrv) as admin:
        wait_until(lambda: _members(admin, "seen5") == [])


def _members(admin: Any, group: str) -> list[str]:
    connections = admin.consumer_connections(group)
    if connections is None:
        return []
    return [member.client_id for member in connections.connection_set]


def test_two_consumers_of_one_group_through_one_proxy_are_two_members(
    server: Standalone,
) -> None:
    """Each 5.x consumer registers over a connection of its own: the broker lists both clients
    of the group (connections, online count, progress), and one that shuts down leaves the
    other listed."""
    create_topic(server.namesrv, "Pair5", queues=2)
    create_group(server.namesrv, "pair5")
    first = _consumer(server, "pair5", "Pair5", _tags("*"))
    second = _consumer(server, "pair5", "Pair5", _tags("*"))
    both = sorted([first.client_id, second.client_id])
    running = [first, second]
    try:
        assert first.client_id != second.client_id
        with bolide.AdminClient(server.namesrv) as admin:
            wait_until(lambda: sorted(_members(admin, "pair5")) == both)
            (summary,) = [g for g in admin.list_groups() if g.group == "pair5"]
            assert summary.online_clients == 2
            progress = admin.group_progress("pair5", topic="Pair5")
            assert sorted(client.client_id for client in progress.clients) == both
        running.remove(first)
        first.shutdown()
        with bolide.AdminClient(server.namesrv) as admin:
            wait_until(lambda: _members(admin, "pair5") == [second.client_id])
    finally:
        for consumer in running:
            consumer.shutdown()

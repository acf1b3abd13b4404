"""ConsumerManager / ConsumerGroupInfo: change rules, notifications, expiry, C++ heartbeats."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import ProtocolError
from bolide.base.limits import CLIENT_CHANNEL_EXPIRY_MS
from bolide.broker.channels import ClientChannelInfo
from bolide.broker.consumers import ConsumerManager, coerce_enum
from bolide.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher, RemotingServer

PASSIVE = ConsumeType.CONSUME_PASSIVELY
CLUSTERING = MessageModel.CLUSTERING
FROM_LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET


class Notifications:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, group: str, channels: list[str]) -> None:
        self.calls.append((group, list(channels)))

    def take(self) -> list[tuple[str, list[str]]]:
        calls, self.calls = self.calls, []
        return calls


def _info(channel: str, client_id: str | None = None) -> ClientChannelInfo[str]:
    return ClientChannelInfo(
        channel=channel,
        client_id=client_id or f"cid-{channel}",
        language=LanguageCode.JAVA,
        version=401,
        remote_address="10.0.0.5:53211",
    )


def _sub(topic: str, expression: str = "*", version: int = 1) -> SubscriptionData:
    return SubscriptionData.from_expression(topic, expression, version)


def _manager(clock: ManualClock | None = None) -> tuple[ConsumerManager[str], Notifications]:
    notifications = Notifications()
    return ConsumerManager(clock or ManualClock(), notifications), notifications


def _register(
    manager: ConsumerManager[str],
    channel: str,
    subscriptions: list[SubscriptionData],
    *,
    group: str = "G",
    notify: bool = True,
    client_id: str | None = None,
) -> bool:
    return manager.register_consumer(
        group,
        _info(channel, client_id),
        PASSIVE,
        CLUSTERING,
        FROM_LAST,
        subscriptions,
        is_notify_enabled=notify,
    )


def test_new_channel_is_a_change_and_notifies_every_channel_of_the_group() -> None:
    manager, notifications = _manager()
    assert _register(manager, "c1", [_sub("T")])
    assert notifications.take() == [("G", ["c1"])]
    assert _register(manager, "c2", [_sub("T")])
    assert notifications.take() == [("G", ["c1", "c2"])]
    assert manager.client_ids("G") == ["cid-c1", "cid-c2"]


def test_repeated_heartbeat_refreshes_without_a_change() -> None:
    clock = ManualClock()
    manager, notifications = _manager(clock)
    _register(manager, "c1", [_sub("T")])
    notifications.take()
    clock.advance_ms(30_000)
    assert not _register(manager, "c1", [_sub("T")])
    assert notifications.take() == []
    group_info = manager.get_consumer_group_info("G")
    assert group_info is not None
    assert group_info.channels["c1"].last_update_ms == 30_000
    assert group_info.last_update_ms == 30_000


def test_added_topic_is_a_change() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T")])
    notifications.take()
    assert _register(manager, "c1", [_sub("T"), _sub("U")])
    assert notifications.take() == [("G", ["c1"])]
    assert manager.groups_by_topic("U") == ["G"]


def test_removed_topic_is_a_change() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T"), _sub("U")])
    notifications.take()
    assert _register(manager, "c1", [_sub("T")])
    assert notifications.take() == [("G", ["c1"])]
    assert manager.find_subscription("G", "U") is None
    assert manager.groups_by_topic("U") == []


def test_subscription_replaced_only_by_a_larger_sub_version_and_silently() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T", "TagA", version=100)])
    notifications.take()
    assert not _register(manager, "c1", [_sub("T", "TagB", version=99)])
    assert not _register(manager, "c1", [_sub("T", "TagB", version=100)])
    stored = manager.find_subscription("G", "T")
    assert stored is not None and stored.sub_string == "TagA"
    assert not _register(manager, "c1", [_sub("T", "TagB", version=101)])
    stored = manager.find_subscription("G", "T")
    assert stored is not None and stored.sub_string == "TagB" and stored.sub_version == 101
    assert notifications.take() == []


def test_change_without_notify_enabled_is_reported_but_not_sent() -> None:
    manager, notifications = _manager()
    assert _register(manager, "c1", [_sub("T")], notify=False)
    assert notifications.take() == []


def test_unregister_notifies_the_remaining_channels_and_drops_an_empty_group() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T")])
    _register(manager, "c2", [_sub("T")])
    notifications.take()
    assert manager.unregister_consumer("G", "c1")
    assert notifications.take() == [("G", ["c2"])]
    assert manager.client_ids("G") == ["cid-c2"]
    assert not manager.unregister_consumer("G", "c1")
    notifications.take()
    assert manager.unregister_consumer("G", "c2", is_notify_enabled=True)
    assert notifications.take() == []
    assert manager.get_consumer_group_info("G") is None
    assert manager.groups() == []
    assert not manager.unregister_consumer("missing", "c1")


def test_unregister_without_notify() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T")])
    _register(manager, "c2", [_sub("T")])
    notifications.take()
    assert manager.unregister_consumer("G", "c1", is_notify_enabled=False)
    assert notifications.take() == []


def test_channel_close_leaves_every_group_and_notifies_the_rest() -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T")], group="G1")
    _register(manager, "c2", [_sub("T")], group="G1")
    _register(manager, "c1", [_sub("U")], group="G2")
    _register(manager, "c3", [_sub("V")], group="G3")
    notifications.take()
    assert manager.do_channel_close("c1") == ["G1", "G2"]
    assert notifications.take() == [("G1", ["c2"])]
    assert manager.groups() == ["G1", "G3"]
    assert manager.do_channel_close("c1") == []
    assert notifications.take() == []


def test_channel_expires_after_exactly_120_s_without_heartbeat() -> None:
    clock = ManualClock()
    manager, notifications = _manager(clock)
    _register(manager, "quiet", [_sub("T")], group="G1")
    _register(manager, "quiet", [_sub("U")], group="G2")
    _register(manager, "chatty", [_sub("T")], group="G1")
    clock.advance_ms(90_000)
    _register(manager, "chatty", [_sub("T")], group="G1")
    notifications.take()
    clock.advance_ms(CLIENT_CHANNEL_EXPIRY_MS - 90_000 - 1)
    assert manager.scan_not_active_channel() == []
    clock.advance_ms(1)
    assert manager.scan_not_active_channel() == ["quiet"]
    assert notifications.take() == [("G1", ["chatty"])]
    assert manager.groups() == ["G1"]
    assert manager.client_ids("G1") == ["cid-chatty"]
    clock.advance_ms(90_000 - 1)
    assert manager.scan_not_active_channel() == []
    clock.advance_ms(1)
    assert manager.scan_not_active_channel() == ["chatty"]
    assert manager.groups() == []


def test_cpp_heartbeat_with_ordinals_and_untrusted_codes() -> None:
    body = (
        b'{"clientID":"4321-10.0.0.7@DEFAULT",'
        b'"consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"G",'
        b'"messageModel":1,"subscriptionDataSet":['
        b'{"subString":"TagA||TagB","subVersion":"1700000000000","topic":"T",'
        b'"tagsSet":["TagA","TagB"],"codeSet":[0,0]},'
        b'{"subString":"*","subVersion":"1700000000001","topic":"%RETRY%G"}]}],'
        b'"producerDataSet":[{"groupName":"PG"}]}\n'
    )
    heartbeat = HeartbeatData.from_json(body)
    manager, notifications = _manager()
    for consumer in heartbeat.consumer_data_set:
        info = ClientChannelInfo("cpp", heartbeat.client_id, LanguageCode.CPP, 63, "10.0.0.7:1")
        changed = manager.register_consumer(
            consumer.group_name,
            info,
            consumer.consume_type,
            consumer.message_model,
            consumer.consume_from_where,
            consumer.subscription_data_set,
        )
        assert changed
    group_info = manager.get_consumer_group_info("G")
    assert group_info is not None
    assert group_info.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert group_info.message_model is MessageModel.CLUSTERING
    assert group_info.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    tagged = manager.find_subscription("G", "T")
    assert tagged is not None
    assert tagged.sub_version == 1_700_000_000_000
    assert tagged.code_set == (2598919, 2598920)  # Java "TagA".hashCode(), "TagB".hashCode()
    retry = manager.find_subscription("G", "%RETRY%G")
    assert retry is not None and retry.is_all and retry.code_set == ()
    assert manager.client_ids("G") == ["4321-10.0.0.7@DEFAULT"]
    assert notifications.take() == [("G", ["cpp"])]


@pytest.mark.parametrize(
    ("consume_type", "message_model", "consume_from"),
    [
        (1, 0, 4),
        ("1", "0", "4"),
        ("CONSUME_PASSIVELY", "BROADCASTING", "CONSUME_FROM_FIRST_OFFSET"),
    ],
)
def test_register_accepts_enum_ordinals_and_names(
    consume_type: int | str, message_model: int | str, consume_from: int | str
) -> None:
    manager, _ = _manager()
    manager.register_consumer("G", _info("c1"), consume_type, message_model, consume_from, [])
    group_info = manager.get_consumer_group_info("G")
    assert group_info is not None
    assert group_info.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert group_info.message_model is MessageModel.BROADCASTING
    assert group_info.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def test_bad_input_is_refused_before_anything_changes() -> None:
    manager, notifications = _manager()
    with pytest.raises(ProtocolError):
        manager.register_consumer("G", _info("c1"), 7, CLUSTERING, FROM_LAST, [])
    with pytest.raises(ProtocolError):
        manager.register_consumer("G", _info("c1"), "PUSH", CLUSTERING, FROM_LAST, [])
    no_tag = SubscriptionData("T", "||", sub_version=1)
    with pytest.raises(ProtocolError):
        manager.register_consumer("G", _info("c1"), PASSIVE, CLUSTERING, FROM_LAST, [no_tag])
    assert manager.groups() == []
    assert notifications.take() == []
    with pytest.raises(ProtocolError):
        coerce_enum(-1, MessageModel)


def test_lookups() -> None:
    clock = ManualClock()
    manager, _ = _manager(clock)
    _register(manager, "c2", [_sub("T", "TagA")], client_id="b")
    _register(manager, "c1", [_sub("T"), _sub("U")], client_id="a")
    clock.advance_ms(10)
    _register(manager, "c3", [_sub("T"), _sub("U")], client_id="a")  # reconnected client
    _register(manager, "c4", [_sub("U")], group="H", client_id="z")
    assert manager.client_ids("G") == ["a", "b"]
    assert manager.client_ids("missing") == []
    found = manager.find_channel("G", "a")
    assert found is not None and found.channel == "c3"
    assert manager.find_channel("G", "z") is None
    assert manager.find_channel("missing", "a") is None
    assert manager.groups_by_topic("U") == ["G", "H"]
    assert manager.groups_by_topic("T") == ["G"]
    assert manager.find_subscription("missing", "T") is None
    assert manager.groups() == ["G", "H"]


def test_client_id_change_on_a_channel_is_not_a_change(caplog: pytest.LogCaptureFixture) -> None:
    manager, notifications = _manager()
    _register(manager, "c1", [_sub("T")], client_id="old")
    notifications.take()
    with caplog.at_level(logging.WARNING, logger="bolide.broker.consumers"):
        assert not _register(manager, "c1", [_sub("T")], client_id="new")
    assert "changed client id" in caplog.text
    assert manager.client_ids("G") == ["new"]
    assert notifications.take() == []


def test_failing_notify_is_logged_and_the_change_kept(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_group: str, _channels: list[str]) -> None:
        raise ConnectionError("peer gone")

    manager: ConsumerManager[str] = ConsumerManager(ManualClock(), broken)
    with caplog.at_level(logging.ERROR, logger="bolide.broker.consumers"):
        assert _register(manager, "c1", [_sub("T")])
    assert "notifying 1 channels of group G failed" in caplog.text
    assert manager.client_ids("G") == ["cid-c1"]


def test_consumer_connection_body_lists_the_group() -> None:
    manager, _ = _manager()
    manager.register_consumer(
        "G", _info("c2", "b"), PASSIVE, MessageModel.BROADCASTING, FROM_LAST, [_sub("T", "TagA")]
    )
    _register(manager, "c1", [_sub("T", "TagA")], client_id="a")
    group_info = manager.get_consumer_group_info("G")
    assert group_info is not None
    body = ConsumerConnection.from_json(group_info.to_consumer_connection().to_json())
    assert [c.client_id for c in body.connection_set] == ["a", "b"]
    assert body.connection_set[0].language is LanguageCode.JAVA
    assert body.connection_set[0].client_addr == "10.0.0.5:53211"
    assert body.message_model is MessageModel.CLUSTERING  # the latest heartbeat wins
    assert list(body.subscription_table) == ["T"]
    assert body.subscription_table["T"].code_set == (2598919,)


@pytest.mark.timeout(30)
async def test_notifications_reach_real_connections_on_join_and_close() -> None:
    """The broker wiring over real sockets: heartbeats register the server-side
    Connection as the channel key; NOTIFY_CONSUMER_IDS_CHANGED goes out oneway on it."""
    sends: list[asyncio.Task[None]] = []

    def notify(group: str, channels: list[Connection]) -> None:
        for connection in channels:
            command = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            sends.append(asyncio.ensure_future(connection.invoke_oneway(command, 1_000)))

    manager: ConsumerManager[Connection] = ConsumerManager(ManualClock(), notify)

    async def heart_beat(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        heartbeat = HeartbeatData.from_json(request.body)
        for consumer in heartbeat.consumer_data_set:
            info = ClientChannelInfo(
                connection,
                heartbeat.client_id,
                request.language,
                request.version,
                connection.remote_address,
            )
            manager.register_consumer(
                consumer.group_name,
                info,
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                consumer.subscription_data_set,
            )
        return request.make_response(ResponseCode.SUCCESS)

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.HEART_BEAT, heart_beat, family="client")

    def on_close(connection: Connection) -> None:
        manager.do_channel_close(connection)

    server = RemotingServer(dispatcher, on_connection_close=on_close)
    await server.start()
    notified: dict[str, asyncio.Queue[str]] = {"a": asyncio.Queue(), "b": asyncio.Queue()}
    pools: dict[str, ClientPool] = {}
    for name in ("a", "b"):
        pools[name] = ClientPool(Dispatcher())

        async def on_notify(
            _connection: Connection, request: RemotingCommand, name: str = name
        ) -> None:
            notified[name].put_nowait(request.ext_fields["consumerGroup"])

        pools[name].dispatcher.register(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify, family="notify"
        )
    try:
        for name in ("a", "b"):
            body = HeartbeatData(
                f"10.0.0.1@{name}",
                consumer_data_set=(ConsumerData("G", subscription_data_set=(_sub("T"),)),),
            ).to_json()
            request = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
            response = await pools[name].invoke(server.address, request, 5_000)
            assert response.code == ResponseCode.SUCCESS
        assert await notified["a"].get() == "G"  # a joined
        assert await notified["a"].get() == "G"  # b joined
        assert await notified["b"].get() == "G"
        assert manager.client_ids("G") == ["10.0.0.1@a", "10.0.0.1@b"]
        await pools["b"].close()
        assert await notified["a"].get() == "G"  # b's connection closed
        assert manager.client_ids("G") == ["10.0.0.1@a"]
        assert notified["b"].empty()
        await asyncio.gather(*sends)
    finally:
        for pool in pools.values():
            await pool.close()
        await server.stop()

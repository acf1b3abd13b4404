"""Body dataclasses against the JSON documented in docs/protocol.md (Java and C++ forms)."""

from __future__ import annotations

import contextlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bolide.base.errors import ProtocolError
from bolide.protocol import bodies
from bolide.protocol.bodies import (
    BodyError,
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerData,
    ConsumerOffsetSerializeWrapper,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeType,
    DataVersion,
    DelayOffsetSerializeWrapper,
    GetConsumerListByGroupResponseBody,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
)
from bolide.protocol.codes import LanguageCode

JAVA_HEARTBEAT = b"""{"clientID":"10.0.0.5@12345#881234567890123",
 "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY",
   "groupName":"G1","messageModel":"CLUSTERING","unitMode":false,
   "subscriptionDataSet":[
     {"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",
      "subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T1"},
     {"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",
      "subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%G1"}]}],
 "producerDataSet":[{"groupName":"PG1"},{"groupName":"CLIENT_INNER_PRODUCER"}]}"""

CPP_HEARTBEAT = b"""{"clientID":"4321-10.0.0.7@DEFAULT",
 "consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"G","messageModel":1,
     "subscriptionDataSet":[{"subString":"TagA||TagB","subVersion":"1700000000000","topic":"T",
                             "tagsSet":["TagA","TagB"],"codeSet":[0,0]},
                            {"subString":"*","subVersion":"1700000000001","topic":"%RETRY%G"}]}],
 "producerDataSet":[{"groupName":"PG"}]}"""


def test_java_heartbeat() -> None:
    heartbeat = HeartbeatData.from_json(JAVA_HEARTBEAT)
    assert heartbeat.client_id == "10.0.0.5@12345#881234567890123"
    (consumer,) = heartbeat.consumer_data_set
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    tag_a, retry = consumer.subscription_data_set
    assert tag_a == SubscriptionData("T1", "TagA", ("TagA",), (2598919,), 1_700_000_000_000)
    assert retry.is_all and retry.topic == "%RETRY%G1"
    assert [p.group_name for p in heartbeat.producer_data_set] == ["PG1", "CLIENT_INNER_PRODUCER"]
    # What we write is what Java writes (same keys, same values).
    assert orjson.loads(heartbeat.to_json()) == orjson.loads(JAVA_HEARTBEAT)


def test_cpp_heartbeat() -> None:
    heartbeat = HeartbeatData.from_json(CPP_HEARTBEAT)
    (consumer,) = heartbeat.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.unit_mode is False
    tags, retry = consumer.subscription_data_set
    assert tags.sub_version == 1_700_000_000_000 and tags.expression_type == "TAG"
    assert tags.code_set == (0, 0)  # C++'s atoi codes, kept as sent ...
    assert tags.with_recomputed_codes().code_set == (2598919, 2598920)  # ... and recomputed
    assert retry.tags_set == () and retry.code_set == () and retry.is_all
    assert HeartbeatData.from_json(heartbeat.to_json()) == heartbeat


def test_heartbeat_without_sets_and_pull_group_without_subscriptions() -> None:
    heartbeat = HeartbeatData.from_json(b'{"clientID":"c","consumerDataSet":[{"groupName":"P"}]}')
    assert heartbeat.producer_data_set == ()
    assert heartbeat.consumer_data_set == (ConsumerData("P"),)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[]", "not a JSON object"),
        (b"{}", "clientID"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":7}]}', "ConsumeType"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":"X"}]}', "Message"),
        (b'{"clientID":"c","consumerDataSet":{}}', "not a JSON array"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"G","unitMode":"maybe"}]}', "unitMode"),
    ],
)
def test_bad_heartbeats(body: bytes, message: str) -> None:
    with pytest.raises(BodyError, match=message):
        HeartbeatData.from_json(body)


@pytest.mark.parametrize(
    ("expression", "tags", "codes"),
    [
        ("TagA || TagB", ("TagA", "TagB"), (2598919, 2598920)),
        ("TagA||TagA", ("TagA",), (2598919,)),
        (" TagA ||  ", ("TagA",), (2598919,)),
        ("*", (), ()),
        ("", (), ()),
        (None, (), ()),
    ],
)
def test_subscription_from_expression(
    expression: str | None, tags: tuple[str, ...], codes: tuple[int, ...]
) -> None:
    subscription = SubscriptionData.from_expression("T", expression, 5)
    assert (subscription.tags_set, subscription.code_set, subscription.sub_version) == (
        tags,
        codes,
        5,
    )
    assert subscription.is_all == (not tags)
    if not tags:
        assert subscription.sub_string == "*"


def test_subscription_expression_without_tags_is_an_error() -> None:
    with pytest.raises(BodyError, match="no tag"):
        SubscriptionData.from_expression("T", "||", 1)


def test_sql_subscription_is_kept_as_is() -> None:
    subscription = SubscriptionData.from_expression("T", "a > 5", 1, "SQL92")
    assert (subscription.sub_string, subscription.tags_set, subscription.expression_type) == (
        "a > 5",
        (),
        "SQL92",
    )


ROUTE_EXAMPLE = b"""{
  "orderTopicConf": "broker-a:4;broker-b:4",
  "queueDatas": [
    {"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}
  ],
  "brokerDatas": [
    {"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a",
     "cluster":"DefaultCluster"}
  ],
  "filterServerTable": {}
}"""


def test_route_example_and_both_key_forms() -> None:
    route = TopicRouteData.from_json(ROUTE_EXAMPLE)
    assert route.order_topic_conf == "broker-a:4;broker-b:4"
    assert route.queue_datas == (QueueData("broker-a", 4, 4, 6, 0),)
    (broker,) = route.broker_datas
    assert broker.broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert broker.master_addr == "10.0.0.1:10911"
    standard = route.to_json()
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in standard
    assert b'"topicSynFlag":0,"topicSysFlag":0' in standard
    orjson.loads(standard)  # standard JSON indeed
    legacy = route.to_json(standard_json=False)
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in legacy
    assert TopicRouteData.from_json(standard) == route == TopicRouteData.from_json(legacy)


def test_route_reads_the_old_flag_spelling() -> None:
    body = (
        b'{"queueDatas":[{"brokerName":"b","perm":7,"readQueueNums":8,"topicSynFlag":1,'
        b'"writeQueueNums":8}]}'
    )
    assert TopicRouteData.from_json(body).queue_datas == (QueueData("b", 8, 8, 7, 1),)


def test_cluster_info_example() -> None:
    body = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"ip:port"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    info = ClusterInfo.from_json(body)
    assert info.broker_addr_table == {
        "broker-a": BrokerData("DefaultCluster", "broker-a", {0: "ip:port"})
    }
    assert info.cluster_addr_table == {"DefaultCluster": ("broker-a",)}
    assert info.to_json() == body


def test_topic_list_and_group_list() -> None:
    assert TopicList(("T1", "T2")).to_json() == b'{"topicList":["T1","T2"]}'
    with_addr = TopicList(("T",), "10.0.0.1:10911")
    assert TopicList.from_json(with_addr.to_json()) == with_addr
    assert GroupList.from_json(b'{"groupList":["G"]}') == GroupList(("G",))
    assert GetConsumerListByGroupResponseBody(("c1", "c2")).to_json() == (
        b'{"consumerIdList":["c1","c2"]}'
    )


TOPICS_JSON = (
    b'{"dataVersion":{"counter":5,"timestamp":1700000000000},"topicConfigTable":{"T":{"order":false,'
    b'"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,'
    b'"writeQueueNums":4}}}'
)


def test_topics_json_and_register_body() -> None:
    wrapper = TopicConfigSerializeWrapper.from_json(TOPICS_JSON)
    assert wrapper.data_version == DataVersion(1_700_000_000_000, 5)
    assert wrapper.topic_config_table == {"T": TopicConfig("T", 4, 4)}
    assert wrapper.to_json() == TOPICS_JSON
    assert wrapper.data_version.next(1_700_000_000_001) == DataVersion(1_700_000_000_001, 6)
    body = RegisterBrokerBody(wrapper)
    assert body.to_json() == (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":' + TOPICS_JSON + b"}"
    )
    assert RegisterBrokerBody.from_json(body.to_json()) == body


def test_persisted_config_files() -> None:
    offsets = ConsumerOffsetSerializeWrapper.from_json(
        b'{"offsetTable":{"T@G":{0:12,1:7},"%RETRY%G@G":{0:0}}}'
    )
    assert offsets.offset_table == {"T@G": {0: 12, 1: 7}, "%RETRY%G@G": {0: 0}}
    assert offsets.to_json() == b'{"offsetTable":{"T@G":{"0":12,"1":7},"%RETRY%G@G":{"0":0}}}'
    assert ConsumerOffsetSerializeWrapper.from_json(offsets.to_json()) == offsets
    delay = DelayOffsetSerializeWrapper.from_json(b'{"offsetTable":{1:0,2:0,3:17}}')
    assert delay.offset_table == {1: 0, 2: 0, 3: 17}
    assert DelayOffsetSerializeWrapper.from_json(delay.to_json()) == delay
    groups = SubscriptionGroupWrapper.from_json(
        b'{"dataVersion":{"counter":1,"timestamp":2},"subscriptionGroupTable":{"G":{"brokerId":0,'
        b'"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        b'"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,'
        b'"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}}}'
    )
    assert groups.subscription_group_table == {"G": SubscriptionGroupConfig("G")}
    assert SubscriptionGroupWrapper.from_json(groups.to_json()) == groups


def test_subscription_group_config_defaults() -> None:
    config = SubscriptionGroupConfig.from_json(b'{"groupName":"G","retryMaxTimes":3}')
    assert config == SubscriptionGroupConfig("G", retry_max_times=3)
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config


def test_lock_bodies() -> None:
    request = LockBatchRequestBody.from_json(
        b'{"clientId":"c","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}'
    )
    assert request == LockBatchRequestBody("G", "c", frozenset({MessageQueue("T", "broker-a", 0)}))
    assert LockBatchRequestBody.from_json(request.to_json()) == request
    response = LockBatchResponseBody(
        frozenset({MessageQueue("T", "b", 1), MessageQueue("T", "b", 0)})
    )
    assert response.to_json() == (
        b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"},'
        b'{"brokerName":"b","queueId":1,"topic":"T"}]}'
    )
    assert LockBatchResponseBody.from_json(response.to_json()) == response


def test_reset_offset_body_forms() -> None:
    table = {MessageQueue("T", "b", 0): 123}
    java = ResetOffsetBody(table).to_json()
    assert java == b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:123}}'
    cpp = ResetOffsetBodyForC(table).to_json()
    assert cpp == b'{"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T","offset":123}]}'
    assert ResetOffsetBody.from_json(java).offset_table == table
    assert ResetOffsetBody.from_json(cpp).offset_table == table
    assert ResetOffsetBodyForC.from_json(cpp).offset_table == table
    quoted_key = (
        b'{"offsetTable":{"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"T\\"}":123}}'
    )
    assert ResetOffsetBody.from_json(quoted_key).offset_table == table
    with pytest.raises(BodyError, match="not an object"):
        ResetOffsetBody.from_json(b'{"offsetTable":{"T":1}}')


CONSUME_STATS = (
    b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
    b'{"brokerOffset":100,"consumerOffset":90,"lastTimestamp":1700000000000}}}'
)


def test_consume_stats_example() -> None:
    stats = ConsumeStats.from_json(CONSUME_STATS)
    assert stats.offset_table == {
        MessageQueue("T", "broker-a", 0): OffsetWrapper(100, 90, 1_700_000_000_000)
    }
    assert stats.to_json() == CONSUME_STATS


def test_topic_stats_table() -> None:
    table = TopicStatsTable(
        {
            MessageQueue("T", "b", 1): TopicOffset(0, 5, 7),
            MessageQueue("T", "b", 0): TopicOffset(1, 2),
        }
    )
    encoded = table.to_json()
    assert encoded.startswith(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:')
    assert TopicStatsTable.from_json(encoded) == table


def test_consumer_connection_example() -> None:
    body = (
        b'{"connectionSet":[{"clientAddr":"10.0.0.5:53211","clientId":"cid","language":"JAVA",'
        b'"version":401}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":'
        b'"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":'
        b'{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        b'"subVersion":1,"tagsSet":[],"topic":"T"}}}'
    )
    connection = ConsumerConnection.from_json(body)
    assert connection.connection_set == (
        Connection("cid", "10.0.0.5:53211", LanguageCode.JAVA, 401),
    )
    assert connection.subscription_table["T"].is_all
    assert connection.to_json() == body
    producers = ProducerConnection((Connection("p", "a:1", LanguageCode.CPP, 63),))
    assert ProducerConnection.from_json(producers.to_json()) == producers
    odd = b'{"connectionSet":[{"clientId":"x","language":"KLINGON"}]}'
    assert ProducerConnection.from_json(odd).connection_set[0].language is LanguageCode.OTHER


def test_consumer_running_info_stays_generic() -> None:
    info = ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "5"},
        subscription_set=(SubscriptionData.from_expression("T", "A||B", 9),),
        mq_table={MessageQueue("T", "b", 0): {"commitOffset": 3, "locked": False}},
        status_table={"T": {"pullRT": 1.5, "consumeFailedMsgs": 0}},
        jstack=None,
    )
    encoded = info.to_json()
    assert b'"mqTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"commitOffset":3' in encoded
    assert ConsumerRunningInfo.from_json(encoded) == info
    java = b'{"properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,"x":true},"jstack":"..."}'
    parsed = ConsumerRunningInfo.from_json(java)
    assert parsed.properties == {"PROP_CONSUMER_START_TIMESTAMP": "1700000000000", "x": "true"}
    assert parsed.jstack == "..."


def test_kv_table() -> None:
    table = KVTable({"brokerVersion": "401", "brokerVersionDesc": "V4_9_4"})
    assert table.to_json() == b'{"table":{"brokerVersion":"401","brokerVersionDesc":"V4_9_4"}}'
    assert KVTable.from_json(b'{"table":{"n":5}}') == KVTable({"n": "5"})


BODY_CLASSES = sorted(
    {
        value
        for value in vars(bodies).values()
        if isinstance(value, type) and hasattr(value, "from_json")
    },
    key=lambda cls: cls.__name__,
)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda cls: cls.__name__)
@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=40)
    | st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["clientID", "offsetTable", "table", "groupName", "topic", "mqSet", "x"]
                ),
                children,
                max_size=4,
            )
        ),
        max_leaves=10,
    ).map(lambda value: orjson.dumps(value))
)
def test_hostile_bodies_raise_only_protocol_errors(cls: Any, data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        cls.from_json(data)


def test_body_error_is_a_protocol_error() -> None:
    assert issubclass(BodyError, ProtocolError)
    assert len(BODY_CLASSES) >= 20
    assert ProducerData("x").to_object() == {"groupName": "x"}

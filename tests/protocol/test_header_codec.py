"""The declarative header codec (``wire_header``): its rules on a header made for the test,
declaration mistakes refused at decoration, and a round trip of every declared header."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import pkgutil
import typing
from typing import Any

import pytest

from bolide.base.errors import InvariantViolationError
from bolide.protocol import headers
from bolide.protocol.headers.acl import AccessConfigRequestHeader
from bolide.protocol.headers.admin import CloneGroupOffsetRequestHeader
from bolide.protocol.headers.controller import (
    ElectMasterRequestHeader,
    GetMetadataInfoResponseHeader,
)
from bolide.protocol.headers.fields import HeaderError, WireHeader, wire, wire_header


@wire_header
class SampleHeader(WireHeader):
    """Every kind of field the codec knows, mixed so the encoding order is visible."""

    name: str = wire("name")
    count: int = wire("count")
    flag: bool = wire("flag")
    optional_count: int | None = wire("optionalCount", default=None)
    label: str = wire("label", default="none")
    optional_text: str | None = wire("optionalText", default=None)
    limit: int = wire("limit", default=16)
    verbose: bool = wire("verbose", default=False)
    strict: bool = wire("strict", default=True)
    optional_flag: bool | None = wire("optionalFlag", default=None)


REQUIRED = {"name": "n", "count": "3", "flag": "false"}


def test_required_fields_missing_raise_naming_the_wire_key() -> None:
    for key in REQUIRED:
        fields = {k: v for k, v in REQUIRED.items() if k != key}
        with pytest.raises(HeaderError, match=f"'{key}' is required but missing"):
            SampleHeader.from_ext_fields(fields)


@pytest.mark.parametrize("text", ["3x", "", "1.5", str(2**63)])
def test_a_bad_number_raises_naming_the_wire_key(text: str) -> None:
    with pytest.raises(HeaderError, match="'count'"):
        SampleHeader.from_ext_fields({**REQUIRED, "count": text})
    with pytest.raises(HeaderError, match="'optionalCount'") if text else contextlib.nullcontext():
        SampleHeader.from_ext_fields({**REQUIRED, "optionalCount": text})


def test_missing_or_empty_optional_fields_take_their_defaults() -> None:
    expected = SampleHeader("n", 3, False)
    assert SampleHeader.from_ext_fields(REQUIRED) == expected
    empties = {"optionalCount": "", "optionalText": "", "label": "", "limit": ""}
    assert SampleHeader.from_ext_fields({**REQUIRED, **empties, "optionalFlag": ""}) == expected
    assert expected.label == "none" and expected.limit == 16 and expected.strict is True
    given = {"optionalCount": "-2", "optionalText": "t", "label": "l", "limit": "0"}
    header = SampleHeader.from_ext_fields({**REQUIRED, **given})
    assert (header.optional_count, header.optional_text, header.label, header.limit) == (
        -2,
        "t",
        "l",
        0,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False), ("x", False)],
)
def test_booleans_read_as_parse_bool_reads(text: str, expected: bool) -> None:
    header = SampleHeader.from_ext_fields(
        {**REQUIRED, "flag": text, "verbose": text, "strict": text, "optionalFlag": text}
    )
    assert (header.flag, header.verbose, header.strict, header.optional_flag) == (expected,) * 4


def test_none_fields_are_left_out_and_the_rest_written_in_java_form() -> None:
    assert SampleHeader("n", 3, True).to_ext_fields() == {
        "name": "n",
        "count": "3",
        "flag": "true",
        "label": "none",
        "limit": "16",
        "verbose": "false",
        "strict": "true",
    }
    full = SampleHeader("n", 3, False, 7, optional_text="t", optional_flag=False).to_ext_fields()
    assert (full["optionalCount"], full["optionalText"], full["optionalFlag"]) == (
        "7",
        "t",
        "false",
    )


def test_encoding_order_is_declaration_order_with_the_none_able_fields_last() -> None:
    header = SampleHeader("n", 3, True, 7, "l", "t", 1, True, False, True)
    assert list(header.to_ext_fields()) == [
        "name",
        "count",
        "flag",
        "label",
        "limit",
        "verbose",
        "strict",
        "optionalCount",
        "optionalText",
        "optionalFlag",
    ]
    assert SampleHeader.from_ext_fields(header.to_ext_fields()) == header


def test_real_headers_keep_their_hand_written_orders() -> None:
    """The orders the hand-written headers had, which the golden frames pin."""
    clone = CloneGroupOffsetRequestHeader("s", "d", "T", offline=True)
    assert list(clone.to_ext_fields()) == ["srcGroup", "destGroup", "offline", "topic"]
    metadata = GetMetadataInfoResponseHeader("g", "1", "h:1", True, "1:h:1")
    assert list(metadata.to_ext_fields()) == [
        "group",
        "isLeader",
        "peers",
        "controllerLeaderId",
        "controllerLeaderAddress",
    ]
    account = AccessConfigRequestHeader("ak", "sk", topic_perms="T=PUB").to_ext_fields()
    assert list(account) == ["accessKey", "admin", "secretKey", "topicPerms"]


def test_a_field_a_header_overrides_keeps_the_rest_derived() -> None:
    """ElectMaster's ``designateElect`` is required on the wire (Java's @CFNotNull)."""
    header = ElectMasterRequestHeader("c", "b", 2, True, 9)
    fields = header.to_ext_fields()
    assert fields["designateElect"] == "true"
    assert ElectMasterRequestHeader.from_ext_fields(fields) == header
    del fields["designateElect"]
    with pytest.raises(HeaderError, match="designateElect"):
        ElectMasterRequestHeader.from_ext_fields(fields)


def test_a_declared_header_is_a_frozen_slots_dataclass() -> None:
    header = SampleHeader("n", 3, True)
    assert dataclasses.is_dataclass(header) and not hasattr(header, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.name = "m"  # type: ignore[misc]


def test_declaration_mistakes_are_refused_at_decoration() -> None:
    with pytest.raises(InvariantViolationError, match="'plain'"):

        @wire_header
        class NoWireName(WireHeader):
            plain: str = dataclasses.field(default="x")

    with pytest.raises(InvariantViolationError, match="'ratio'"):

        @wire_header
        class UnknownType(WireHeader):
            ratio: float = wire("ratio")

    with pytest.raises(InvariantViolationError, match="'maybe'"):

        @wire_header
        class OptionalWithDefault(WireHeader):
            maybe: int | None = wire("maybe", default=3)


WIRE_KEY_ORDERS = {
    "AccessConfigRequestHeader": (
        "accessKey admin secretKey whiteRemoteAddress defaultTopicPerm defaultGroupPerm "
        "topicPerms groupPerms"
    ),
    "AckMessageRequestHeader": "consumerGroup topic queueId extraInfo offset",
    "AclInfoResponseHeader": "version brokerName brokerAddr clusterName allAclFileVersion",
    "AlterSyncStateSetRequestHeader": "brokerName masterBrokerId masterEpoch invokeTime",
    "AlterSyncStateSetResponseHeader": "newSyncStateSetEpoch",
    "ApplyBrokerIdRequestHeader": "clusterName brokerName appliedBrokerId registerCheckCode",
    "BrokerHeartbeatRequestHeader": (
        "clusterName brokerAddr brokerName brokerId epoch maxOffset confirmOffset "
        "heartbeatTimeoutMills electionPriority"
    ),
    "BrokerIdResponseHeader": "clusterName brokerName nextBrokerId",
    "ChangeInvisibleTimeRequestHeader": (
        "consumerGroup topic queueId extraInfo offset invisibleTime"
    ),
    "ChangeInvisibleTimeResponseHeader": "popTime invisibleTime reviveQid",
    "CheckTransactionStateRequestHeader": (
        "tranStateTableOffset commitLogOffset msgId transactionId offsetMsgId"
    ),
    "CleanBrokerDataRequestHeader": (
        "brokerName isCleanLivingBroker invokeTime clusterName brokerControllerIdsToClean"
    ),
    "CloneGroupOffsetRequestHeader": "srcGroup destGroup offline topic",
    "ConsumeMessageDirectlyResultRequestHeader": "consumerGroup clientId msgId brokerName",
    "ConsumerGroupRequestHeader": "consumerGroup",
    "ConsumerSendMsgBackRequestHeader": (
        "offset group delayLevel unitMode originMsgId originTopic maxReconsumeTimes"
    ),
    "CreateTopicRequestHeader": (
        "topic defaultTopic readQueueNums writeQueueNums perm topicFilterType order "
        "topicSysFlag attributes"
    ),
    "DeleteAccessConfigRequestHeader": "accessKey",
    "DeleteSubscriptionGroupRequestHeader": "groupName removeOffset",
    "DeleteTopicFromNamesrvRequestHeader": "topic clusterName",
    "ElectMasterRequestHeader": "clusterName brokerName brokerId designateElect invokeTime",
    "EndTransactionRequestHeader": (
        "producerGroup tranStateTableOffset commitLogOffset commitOrRollback msgId "
        "fromTransactionCheck transactionId"
    ),
    "GetConsumeStatsRequestHeader": "consumerGroup topic",
    "GetConsumerRunningInfoRequestHeader": "consumerGroup clientId jstackEnable",
    "GetConsumerStatusRequestHeader": "topic group clientAddr",
    "GetEarliestMsgStoretimeResponseHeader": "timestamp",
    "GetMetadataInfoResponseHeader": (
        "group isLeader peers controllerLeaderId controllerLeaderAddress"
    ),
    "GetNextBrokerIdRequestHeader": "clusterName brokerName",
    "GetProducerConnectionListRequestHeader": "producerGroup",
    "GetReplicaInfoRequestHeader": "brokerName",
    "GetRouteInfoRequestHeader": "topic acceptStandardJsonOnly",
    "MasterInfoHeader": (
        "masterBrokerId masterAddress masterEpoch syncStateSetEpoch clusterName brokerName"
    ),
    "OffsetResponseHeader": "offset",
    "PopMessageResponseHeader": (
        "popTime invisibleTime reviveQid restNum startOffsetInfo msgOffsetInfo orderCountInfo"
    ),
    "QueryConsumeQueueRequestHeader": "topic queueId index count consumerGroup",
    "QueryConsumeTimeSpanRequestHeader": "topic group",
    "QueryConsumerOffsetRequestHeader": "consumerGroup topic queueId",
    "QueryCorrectionOffsetHeader": "topic compareGroup filterGroups",
    "QueryMessageResponseHeader": "indexLastUpdateTimestamp indexLastUpdatePhyoffset",
    "QueueRequestHeader": "topic queueId",
    "RecallMessageRequestHeader": "topic recallHandle producerGroup",
    "RecallMessageResponseHeader": "msgId",
    "RegisterBrokerRequestHeader": (
        "brokerName brokerAddr clusterName haServerAddr brokerId compressed bodyCrc32"
    ),
    "RegisterBrokerResponseHeader": "haServerAddr masterAddr",
    "RegisterBrokerToControllerRequestHeader": (
        "clusterName brokerName brokerId brokerAddress invokeTime"
    ),
    "ResetOffsetRequestHeader": "topic group timestamp isForce",
    "SearchOffsetRequestHeader": "topic queueId timestamp",
    "TopicRequestHeader": "topic",
    "UnregisterBrokerRequestHeader": "brokerName brokerAddr clusterName brokerId",
    "UnregisterClientRequestHeader": "clientID producerGroup consumerGroup",
    "UpdateConsumerOffsetRequestHeader": "consumerGroup topic queueId commitOffset",
    "UpdateGlobalWhiteAddrsRequestHeader": "globalWhiteAddrs aclFileFullPath",
    "ViewBrokerStatsDataRequestHeader": "statsName statsKey",
    "ViewMessageRequestHeader": "offset",
}
"""Each declared header's keys as the hand-written header before it wrote them, every field
set (captured from that code, commit b98c87f)."""


def declared_header_classes() -> list[type[WireHeader]]:
    found: set[type[WireHeader]] = set()
    for module_info in pkgutil.iter_modules(headers.__path__):
        module = importlib.import_module(f"{headers.__name__}.{module_info.name}")
        found.update(
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, WireHeader) and value is not WireHeader
        )
    return sorted(found, key=lambda cls: cls.__name__)


def test_the_declared_headers_are_all_found() -> None:
    assert {cls.__name__ for cls in declared_header_classes()} == set(WIRE_KEY_ORDERS)


def non_default_value(annotation: object, field: dataclasses.Field[Any], index: int) -> Any:
    """A value for ``field`` unlike its default (so every field is written and read back)."""
    base = typing.get_args(annotation)[0] if typing.get_args(annotation) else annotation
    if base is bool:
        return not field.default if isinstance(field.default, bool) else True
    if base is int:
        return -(index + 2) * 1_000_003
    return f"v{index}-{field.name}"


@pytest.mark.parametrize("cls", declared_header_classes(), ids=lambda cls: cls.__name__)
def test_every_declared_header_round_trips_with_non_default_values(
    cls: type[WireHeader],
) -> None:
    hints = typing.get_type_hints(cls)
    declared = dataclasses.fields(typing.cast("type[Any]", cls))
    values = [non_default_value(hints[field.name], field, i) for i, field in enumerate(declared)]
    header = cls(*values)
    fields = header.to_ext_fields()
    assert " ".join(fields) == WIRE_KEY_ORDERS[cls.__name__]
    assert all(type(text) is str for text in fields.values())
    assert cls.from_ext_fields(fields) == header

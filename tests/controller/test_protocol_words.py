"""Controller-mode wire words: codes, headers and bodies read back what they write, with
Java's field names."""

from __future__ import annotations

import pytest

from bolide.protocol.bodies.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    broker_names_from_json,
    broker_names_to_json,
)
from bolide.protocol.bodies.fastjson import BodyError, loads
from bolide.protocol.codes import RequestCode, ResponseCode, is_retriable
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerIdResponseHeader,
    CleanBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetadataInfoResponseHeader,
    MasterInfoHeader,
    RegisterBrokerToControllerRequestHeader,
)
from bolide.protocol.headers.fields import HeaderError


def test_codes_have_java_values() -> None:
    assert RequestCode.BROKER_HEARTBEAT == 904
    assert RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET == 1001
    assert RequestCode.NOTIFY_BROKER_ROLE_CHANGED == 1008
    assert RequestCode.CONTROLLER_APPLY_BROKER_ID == 1013
    assert ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH == 2000
    assert ResponseCode.CONTROLLER_NOT_LEADER == 2007
    assert ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS == 2016
    assert is_retriable(ResponseCode.CONTROLLER_NOT_LEADER)
    assert not is_retriable(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH)


def test_heartbeat_header_wire_names() -> None:
    header = BrokerHeartbeatRequestHeader(
        "c", "127.0.0.1:1", "b", 2, epoch=3, max_offset=4, confirm_offset=5,
        heartbeat_timeout_ms=6, election_priority=7,
    )  # fmt: skip
    fields = header.to_ext_fields()
    assert fields["heartbeatTimeoutMills"] == "6"
    assert fields["electionPriority"] == "7"
    assert BrokerHeartbeatRequestHeader.from_ext_fields(fields) == header
    bare = BrokerHeartbeatRequestHeader.from_ext_fields(
        {"clusterName": "c", "brokerAddr": "a", "brokerName": "b"}
    )
    assert bare.broker_id is None
    with pytest.raises(HeaderError, match="brokerName"):
        BrokerHeartbeatRequestHeader.from_ext_fields({"clusterName": "c", "brokerAddr": "a"})


@pytest.mark.parametrize(
    "header",
    [
        AlterSyncStateSetRequestHeader("b", 1, 2, 3),
        ElectMasterRequestHeader("c", "b", -1, designate_elect=True, invoke_time_ms=9),
        RegisterBrokerToControllerRequestHeader("c", "b", 1, "h:1", 5),
        MasterInfoHeader(1, "h:1", 2, 3, "c", "b"),
        MasterInfoHeader(),
        GetMetadataInfoResponseHeader("g", "0", "h:2", True, "0:h:2"),
        CleanBrokerDataRequestHeader("b", "c", "1;2", True, 4),
        BrokerIdResponseHeader("c", "b", 3),
        ApplyBrokerIdRequestHeader("c", "b", 1, "h:1;99"),
    ],
)
def test_headers_round_trip(header: object) -> None:
    fields = header.to_ext_fields()  # type: ignore[attr-defined]
    assert type(header).from_ext_fields(fields) == header  # type: ignore[attr-defined]


def test_elect_master_requires_designate_elect() -> None:
    with pytest.raises(HeaderError, match="designateElect"):
        ElectMasterRequestHeader.from_ext_fields(
            {"clusterName": "c", "brokerName": "b", "brokerId": "1"}
        )


def test_sync_state_set_json() -> None:
    body = SyncStateSet(frozenset({2, 1}), 3)
    assert body.to_json() == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert SyncStateSet.from_json(body.to_json()) == body
    with pytest.raises(BodyError):
        SyncStateSet.from_json(b'{"syncStateSet":["x"]}')


def test_elect_master_body_json() -> None:
    body = ElectMasterResponseBody(
        BrokerMemberGroup("c", "b", {2: "h:2", 1: "h:1"}), frozenset({1})
    )
    obj = loads(body.to_json())
    assert obj["brokerMemberGroup"]["brokerAddrs"] == {"1": "h:1", "2": "h:2"}
    assert ElectMasterResponseBody.from_json(body.to_json()) == body


def test_broker_replicas_info_json() -> None:
    info = ReplicasInfo(
        1, "h:1", 2, 3,
        (ReplicaIdentity("b", 1, "h:1", True),),
        (ReplicaIdentity("b", 2, "h:2", False),),
    )  # fmt: skip
    body = BrokerReplicasInfo({"b": info})
    obj = loads(body.to_json())
    assert obj["replicasInfoTable"]["b"]["notInSyncReplicas"][0]["alive"] is False
    assert BrokerReplicasInfo.from_json(body.to_json()) == body
    no_master = ReplicasInfo(None, None, 1, 1)
    assert "masterBrokerId" not in no_master.to_object()
    assert BrokerReplicasInfo.from_json(BrokerReplicasInfo({"b": no_master}).to_json()) == (
        BrokerReplicasInfo({"b": no_master})
    )


def test_broker_names_body() -> None:
    assert broker_names_from_json(broker_names_to_json(["a", "b"])) == ("a", "b")
    with pytest.raises(BodyError):
        broker_names_from_json(b'{"a":1}')

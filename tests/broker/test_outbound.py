"""bolide.broker.outbound: the one home of the requests the broker sends (issue 31)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bolide.broker import outbound
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader, ResetOffsetRequestHeader
from bolide.protocol.headers.controller import BrokerHeartbeatRequestHeader
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster

BROKER_SOURCES = Path(outbound.__file__).parent
_HAND_BUILT = re.compile(r"RemotingCommand\.request\(")


def test_the_broker_builds_no_request_outside_its_outbound_module() -> None:
    found = [
        f"{path.relative_to(BROKER_SOURCES)}:{number}"
        for path in sorted(BROKER_SOURCES.rglob("*.py"))
        if path.name != "outbound.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if _HAND_BUILT.search(line)
    ]
    assert found == [], f"build these in bolide.broker.outbound: {found}"


def test_oneway_requests_carry_the_oneway_flag() -> None:
    heartbeat = BrokerHeartbeatRequestHeader("c", "127.0.0.1:10911", "b", 1)
    oneway = [
        outbound.broker_heartbeat_request(heartbeat),
        outbound.check_transaction_state_request({"tranStateTableOffset": "1"}, b"record"),
        outbound.notify_consumer_ids_changed_request("g"),
    ]
    assert [command.is_oneway for command in oneway] == [True, True, True]
    assert [command.code for command in oneway] == [
        RequestCode.BROKER_HEARTBEAT,
        RequestCode.CHECK_TRANSACTION_STATE,
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
    ]
    assert oneway[2].ext_fields == {"consumerGroup": "g"}
    assert not outbound.controller_request(RequestCode.BROKER_HEARTBEAT).is_oneway


def test_a_reset_goes_in_the_list_form_to_cpp_and_python_and_the_java_form_to_others() -> None:
    header = ResetOffsetRequestHeader("T", "G", -1, is_force=True)
    offsets = {MessageQueue("T", "broker-a", 0): 7}
    cpp = outbound.reset_offset_request(header, offsets, LanguageCode.CPP)
    java = outbound.reset_offset_request(header, offsets, LanguageCode.JAVA)
    assert cpp.is_oneway and java.is_oneway
    assert cpp.code == java.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET
    assert (cpp.ext_fields["isForce"], java.ext_fields["isForce"]) == ("1", "true")
    listed = json.loads(cpp.body)["offsetTable"]
    assert listed == [{"brokerName": "broker-a", "offset": 7, "queueId": 0, "topic": "T"}]
    assert b'"offsetTable":{{' in java.body


async def test_a_slave_copies_its_masters_tables_with_the_outbound_requests(
    tmp_path: Path,
) -> None:
    """The slave's metadata fetches (outbound.master_metadata_request), answered by a real
    master over its socket: a topic created on the master reaches the slave."""
    async with Cluster(tmp_path, settings={"ha_listen_port": 0}) as cluster:
        master = cluster.broker("broker-a")
        slave = await cluster.add_broker(
            "broker-a", broker_id=1, broker_role="SLAVE",
            store_path_root_dir=tmp_path / "slave" / "store",
        )  # fmt: skip
        pool = ClientPool()
        try:
            create = CreateTopicRequestHeader("CopiedToTheSlave", "TBW102", 2, 2, 6)
            request = RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields()
            )
            assert (await pool.invoke(master.address, request, 3000)).code == ResponseCode.SUCCESS
            sync = slave.replication.sync
            assert sync is not None
            rounds = sync.sync_count
            await sync.sync_all(master.address)
            assert sync.sync_count > rounds
            copied = slave.context.topics.find("CopiedToTheSlave")
            assert copied is not None and copied.write_queue_count == 2
        finally:
            await pool.close()

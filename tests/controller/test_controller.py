"""The controller against a real etcd: every code's answers, Java's error codes, elections on
a dead master, and garbage on the port."""

from __future__ import annotations

import asyncio

import pytest

from bolide.controller.controller import Controller
from bolide.controller.settings import ControllerSettings
from bolide.protocol.bodies.controller import BrokerReplicasInfo, ElectMasterResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.controller import (
    ApplyBrokerIdRequestHeader,
    GetMetadataInfoResponseHeader,
    MasterInfoHeader,
)
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import CLUSTER, FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)


async def test_join_elect_widen_and_fail_over(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        first = FakeBroker(controller.address, "broker-a", "127.0.0.1:20001")
        second = FakeBroker(controller.address, "broker-a", "127.0.0.1:20002")
        try:
            assert await first.join() == 1
            assert await second.join() == 2
            await first.seen_by(controller)
            await second.seen_by(controller)
            elected = await first.elect()
            assert elected.code == ResponseCode.SUCCESS, elected.remark
            master = MasterInfoHeader.from_ext_fields(elected.ext_fields)
            assert (master.master_broker_id, master.master_epoch) == (1, 1)
            assert master.master_address == "127.0.0.1:20001"
            body = ElectMasterResponseBody.from_json(elected.body)
            assert body.broker_member_group.broker_addrs == {1: first.address, 2: second.address}
            assert body.sync_state_set == {1}
            still = await second.elect()
            assert still.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
            registered = MasterInfoHeader.from_ext_fields((await second.register()).ext_fields)
            assert registered.master_broker_id == 1
            widened = await first.alter(master_epoch=1, members={1, 2}, set_epoch=1)
            assert widened.code == ResponseCode.SUCCESS, widened.remark
            assert widened.ext_fields["newSyncStateSetEpoch"] == "2"
            data = await first.call(
                RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b'["broker-a"]'
            )
            info = BrokerReplicasInfo.from_json(data.body).replicas_info_table["broker-a"]
            assert [r.broker_id for r in info.in_sync_replicas] == [1, 2]
            assert all(r.alive for r in info.in_sync_replicas)
            assert MasterInfoHeader.from_ext_fields(second.notified[0].ext_fields).master_epoch == 1
            await first.die()  # its connection closes: inactive at once, re-elected
            await until(lambda: len(second.notified) > 1)
            notice = MasterInfoHeader.from_ext_fields(second.notified[-1].ext_fields)
            assert (notice.master_broker_id, notice.master_epoch) == (2, 2)
            replica = await second.call(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "broker-a"}
            )
            assert MasterInfoHeader.from_ext_fields(replica.ext_fields).master_broker_id == 2
            assert controller.elections == 2
        finally:
            await first.die()
            await second.die()


async def test_alter_sync_state_set_checks_in_java_order(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        master = FakeBroker(controller.address, "broker-b", "127.0.0.1:20011")
        slave = FakeBroker(controller.address, "broker-b", "127.0.0.1:20012")
        stranger = FakeBroker(controller.address, "broker-x", "127.0.0.1:20013")
        try:
            unknown = await stranger.alter(1, {1}, 0, master_id=1)
            assert unknown.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
            await master.join()
            await slave.join()
            await master.seen_by(controller)
            assert (await master.elect()).code == ResponseCode.SUCCESS  # epoch 1, SSS {1}, 1
            cases = [
                ((1, {1}, 1, None), ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
                ((1, {1, 2}, 1, 2), ResponseCode.CONTROLLER_INVALID_MASTER),
                ((0, {1, 2}, 1, None), ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH),
                ((1, {1, 2}, 0, None), ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
                ((1, {1, 9}, 1, None), ResponseCode.CONTROLLER_INVALID_REPLICAS),
            ]
            for (epoch, members, set_epoch, master_id), code in cases:
                answer = await master.alter(epoch, members, set_epoch, master_id=master_id)
                assert answer.code == code, (members, answer.remark)
            await slave.die()
            await until(lambda: not controller.heartbeats.is_alive("broker-b", 2))
            dead = await master.alter(1, {1, 2}, 1)
            assert dead.code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
            slave = FakeBroker(controller.address, "broker-b", "127.0.0.1:20012")
            slave.broker_id = 2
            await slave.beat()
            await slave.seen_by(controller)
            lacks = await master.alter(1, {2}, 1)
            assert lacks.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
            assert (await master.alter(1, {1, 2}, 1)).code == ResponseCode.SUCCESS
        finally:
            for broker in (master, slave, stranger):
                await broker.die()


async def test_broker_ids_registration_and_unknown_sets(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        broker = FakeBroker(controller.address, "broker-c", "127.0.0.1:20021")
        try:
            fields = {"clusterName": CLUSTER, "brokerName": "broker-c"}
            nxt = await broker.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, fields)
            assert nxt.ext_fields["nextBrokerId"] == "1"

            async def apply(broker_id: int, code: str) -> int:
                header = ApplyBrokerIdRequestHeader(CLUSTER, "broker-c", broker_id, code)
                answer = await broker.call(
                    RequestCode.CONTROLLER_APPLY_BROKER_ID, header.to_ext_fields()
                )
                return answer.code

            assert await apply(2, "a;1") == ResponseCode.CONTROLLER_BROKER_ID_INVALID
            assert await apply(1, "a;1") == ResponseCode.SUCCESS
            assert await apply(1, "a;1") == ResponseCode.SUCCESS  # a retry of the same broker
            assert await apply(1, "b;2") == ResponseCode.CONTROLLER_BROKER_ID_INVALID
            nxt = await broker.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, fields)
            assert nxt.ext_fields["nextBrokerId"] == "2"
            broker.broker_id = 7
            unknown_id = await broker.register()
            assert unknown_id.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
            missing = await broker.call(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "nobody"}
            )
            assert missing.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
            no_id = await broker.call(
                RequestCode.BROKER_HEARTBEAT,
                {"clusterName": CLUSTER, "brokerName": "broker-c", "brokerAddr": "a:1"},
            )
            assert no_id.code == ResponseCode.CONTROLLER_INVALID_REQUEST
            unregistered = await broker.elect(broker_id=1, designate=False)
            assert unregistered.code in (
                ResponseCode.SUCCESS,
                ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
            )
            other = FakeBroker(controller.address, "broker-none", "127.0.0.1:20029")
            try:
                never = await other.elect(broker_id=1)
                assert never.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
            finally:
                await other.die()
        finally:
            await broker.die()


async def test_election_ranking_and_no_candidate(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        brokers = [
            FakeBroker(controller.address, "broker-d", f"127.0.0.1:2003{i}") for i in (1, 2, 3)
        ]
        try:
            for broker in brokers:
                await broker.join()
                await broker.seen_by(controller)
            first, second, third = brokers
            assert (await first.elect()).code == ResponseCode.SUCCESS
            assert (await first.alter(1, {1, 2, 3}, 1)).code == ResponseCode.SUCCESS
            # epoch desc, then max offset desc, then priority asc: the third wins on offset
            await second.beat(epoch=1, max_offset=100, priority=1)
            await third.beat(epoch=1, max_offset=200, priority=9)

            def third_beat_seen() -> bool:
                info = controller.heartbeats.get("broker-d", 3)
                return info is not None and info.max_offset == 200

            await until(third_beat_seen)
            await first.die()
            await until(lambda: len(third.notified) > 1)
            notice = MasterInfoHeader.from_ext_fields(third.notified[-1].ext_fields)
            assert notice.master_broker_id == 3
            # the new SSS is {3}; the master dies; 2 is alive but not in sync: nobody eligible
            await third.die()
            replica_info = {"brokerName": "broker-d"}

            async def master_cleared() -> bool:
                answer = await second.call(RequestCode.CONTROLLER_GET_REPLICA_INFO, replica_info)
                return MasterInfoHeader.from_ext_fields(answer.ext_fields).master_broker_id is None

            for _ in range(200):
                if await master_cleared():
                    break
                await asyncio.sleep(0.05)
            assert await master_cleared()
            refused = await second.elect()
            assert refused.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
            unclean = await second.call(
                RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=true\n"
            )
            assert unclean.code == ResponseCode.SUCCESS
            accepted = await second.elect()
            assert accepted.code == ResponseCode.SUCCESS, accepted.remark
            assert MasterInfoHeader.from_ext_fields(accepted.ext_fields).master_epoch == 4
        finally:
            for broker in brokers:
                await broker.die()


async def test_config_clean_and_garbage(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        admin = FakeBroker(controller.address, "broker-e", "127.0.0.1:20041")
        try:
            config = await admin.call(RequestCode.GET_CONTROLLER_CONFIG)
            assert b"enableElectUncleanMaster=false" in config.body
            black = await admin.call(RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"rocketmqHome=/x")
            assert black.code == ResponseCode.NO_PERMISSION
            unknown = await admin.call(RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"noSuchKey=1")
            assert unknown.code == ResponseCode.CONTROLLER_INVALID_REQUEST
            assert "noSuchKey" in (unknown.remark or "")
            await admin.join()
            await admin.seen_by(controller)
            fields = {"brokerName": "broker-e", "brokerControllerIdsToClean": "1"}
            alive = await admin.call(RequestCode.CLEAN_BROKER_DATA, fields)
            assert alive.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
            forced = await admin.call(
                RequestCode.CLEAN_BROKER_DATA, {**fields, "isCleanLivingBroker": "true"}
            )
            assert forced.code == ResponseCode.SUCCESS
            gone = await admin.call(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "broker-e"}
            )
            assert gone.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
            unsupported = await admin.call(99_999)
            assert unsupported.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            host, port = controller.address.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\x00\x00\x00\x10garbage-garbage!")
            await writer.drain()
            await reader.read()  # the controller drops the garbled connection
            writer.close()
            meta = await admin.call(RequestCode.CONTROLLER_GET_METADATA_INFO)
            header = GetMetadataInfoResponseHeader.from_ext_fields(meta.ext_fields)
            assert header.is_leader and header.controller_leader_address == controller.address
        finally:
            await admin.die()


async def test_non_leader_answers_not_leader_and_a_deposed_leader_writes_nothing(
    etcd: EtcdCluster,
) -> None:
    async with running_controller(etcd.endpoints) as first:
        await wait_leader(first)
        async with running_controller(etcd.endpoints) as second:
            broker = FakeBroker(second.address, "broker-f", "127.0.0.1:20051")
            try:
                fields = ApplyBrokerIdRequestHeader(CLUSTER, "broker-f", 1, "a;1").to_ext_fields()
                refused = await broker.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, fields)
                assert refused.code == ResponseCode.CONTROLLER_NOT_LEADER
                meta = await broker.call(RequestCode.CONTROLLER_GET_METADATA_INFO)
                header = GetMetadataInfoResponseHeader.from_ext_fields(meta.ext_fields)
                assert header.controller_leader_address == first.address
                assert not header.is_leader
                assert first.address in header.peers and second.address in header.peers
                # the leader key vanishes (as when the first controller's lease lapses while
                # it is paused): the second takes it, the first still believes it leads
                await first.store._call(lambda client: client.delete(b"/bolide/controller/leader"))
                await wait_leader(second)
                assert first.is_leader
                deposed = FakeBroker(first.address, "broker-f", "127.0.0.1:20052")
                try:
                    answer = await deposed.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, fields)
                    assert answer.code == ResponseCode.CONTROLLER_NOT_LEADER
                finally:
                    await deposed.die()
                assert not first.is_leader
                replica_set, _ = await second.store.read_set("broker-f")
                assert replica_set is None  # nothing was written by the deposed controller
                accepted = await broker.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, fields)
                assert accepted.code == ResponseCode.SUCCESS
            finally:
                await broker.die()


async def test_silent_master_is_replaced_after_its_heartbeat_timeout(etcd: EtcdCluster) -> None:
    settings = ControllerSettings(scan_not_active_broker_interval_ms=100)
    async with running_controller(etcd.endpoints, settings) as controller:
        await wait_leader(controller)
        first = FakeBroker(controller.address, "broker-g", "127.0.0.1:20061")
        second = FakeBroker(controller.address, "broker-g", "127.0.0.1:20062")
        try:
            await first.join()
            await second.join()
            await first.beat(timeout_ms=300)  # then silent, its connection left open
            await first.seen_by(controller)
            await second.seen_by(controller)
            assert (await first.elect()).code == ResponseCode.SUCCESS
            assert (await first.alter(1, {1, 2}, 1)).code == ResponseCode.SUCCESS

            def second_leads() -> bool:
                return any(
                    MasterInfoHeader.from_ext_fields(notice.ext_fields).master_broker_id == 2
                    for notice in second.notified
                )

            await until(second_leads)
            assert not first.pool.connections[controller.address].is_closed
        finally:
            await first.die()
            await second.die()


async def test_wildcard_bind_advertises_the_given_host(etcd: EtcdCluster) -> None:
    controller = Controller(etcd.endpoints, "0.0.0.0", 0, advertised_host="127.0.0.1")
    await controller.start()
    try:
        await wait_leader(controller)
        assert controller.address.startswith("127.0.0.1:")
        assert await controller.store.leader_address() == controller.address
    finally:
        await controller.stop()

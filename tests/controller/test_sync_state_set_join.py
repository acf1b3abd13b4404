"""A replica joining the SyncStateSet counts for acknowledgements before the controller can
hold it (the cause of issue 25's lost messages): a master's ReplicasManager beside a real
controller on a real etcd, its 1001 answers lost or refused on purpose.

Before the fix the master waited for the new member only once the 1001 answer arrived: in
between (or for ever, when the answer was lost) it acknowledged sends the member did not
have, while the controller could already elect that member."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from bolide.base.clock import SystemClock
from bolide.broker.controller_mode.replicas_manager import ReplicasManager
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.controller.controller import Controller
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.testing.etcd import EtcdCluster
from tests.controller.support import CLUSTER, FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)

NAME = "broker-join"


class RecordingRoles:
    """The broker's side as the manager drives it: records the set sends wait for."""

    def __init__(self) -> None:
        self.acking: frozenset[int] = frozenset()
        self.masters: list[int] = []

    async def become_master(self, master_epoch: int, sync_state_set: frozenset[int]) -> None:
        self.masters.append(master_epoch)
        self.acking = sync_state_set

    async def become_slave(self, master_address: str, master_epoch: int, broker_id: int) -> None:
        raise AssertionError("the only master here is never deposed")

    def fence_sends(self, reason: str | None) -> None:
        pass

    def sync_state_set_changed(self, sync_state_set: frozenset[int]) -> None:
        self.acking = sync_state_set

    def max_offset(self) -> int:
        return 0

    def last_epoch(self) -> int:
        return self.masters[-1] if self.masters else 0


class CaughtUp:
    """Every replica asked about is caught up right now."""

    def caught_up(self, replica_ids: list[int]) -> Mapping[int, tuple[bool, int | None]]:
        return {replica: (True, SystemClock().monotonic_ms()) for replica in replica_ids}


async def _master(controller: Controller, root: Path) -> tuple[ReplicasManager, RecordingRoles]:
    settings = ControllerModeSettings.from_properties(
        {
            "enableControllerMode": "true",
            "controllerAddr": controller.address,
            "allAckInSyncStateSet": "true",
        }
    )
    roles = RecordingRoles()
    manager = ReplicasManager(
        settings,
        cluster_name=CLUSTER,
        broker_name=NAME,
        broker_address="127.0.0.1:30911",
        store_root=root,
        roles=roles,
        progress=CaughtUp(),
        clock=SystemClock(),
    )
    assert await manager._register()
    assert manager.is_master and manager.broker_id == 1
    assert roles.acking == {1}
    return manager, roles


async def test_a_joining_replica_is_waited_for_before_and_after_a_lost_1001_answer(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        manager, roles = await _master(controller, tmp_path)
        replica = FakeBroker(controller.address, NAME, "127.0.0.1:30921")
        try:
            assert await replica.join() == 2
            await replica.seen_by(controller)
            acking_when_sent: list[frozenset[int]] = []
            forward = manager._leader_call

            async def answer_lost(
                code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
            ) -> RemotingCommand | None:
                answer = await forward(code, fields, body)
                if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
                    acking_when_sent.append(roles.acking)
                    return None  # the controller wrote it; the master never hears back
                return answer

            manager._leader_call = answer_lost  # type: ignore[method-assign]
            await manager._check_sync_state_set()
            stored, _ = await controller.store.read_set(NAME)
            assert stored is not None and stored.sync_state_set == {1, 2}
            # the controller may elect 2 now: the master already waits for 2
            assert acking_when_sent == [frozenset({1, 2})]
            assert roles.acking == {1, 2} and manager.joining == {2}
            manager._leader_call = forward  # type: ignore[method-assign]
            await manager._poll_replica_info()  # 1004 settles the join
            assert manager.joining == frozenset()
            assert manager.sync_state_set.sync_state_set == {1, 2}
            assert roles.acking == {1, 2}
        finally:
            await replica.die()
            await manager.stop()


async def test_a_refused_join_stops_waiting_for_the_replica(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        manager, roles = await _master(controller, tmp_path)
        replica = FakeBroker(controller.address, NAME, "127.0.0.1:30931")
        try:
            assert await replica.join() == 2
            await replica.seen_by(controller)
            controller.heartbeats.remove(NAME, 2)  # the controller thinks it dead: 2006
            await manager._check_sync_state_set()
            stored, _ = await controller.store.read_set(NAME)
            assert stored is not None and stored.sync_state_set == {1}
            assert manager.joining == frozenset() and roles.acking == {1}
        finally:
            await replica.die()
            await manager.stop()

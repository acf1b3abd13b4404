"""A controller on a three-member etcd keeps serving when the member it talks to dies."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.headers.controller import ApplyBrokerIdRequestHeader
from bolide.testing.etcd import EtcdCluster, etcd_binary
from tests.controller.support import CLUSTER, FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(180)

WAIT_S = 60.0


async def test_controller_survives_the_death_of_its_etcd_member(tmp_path: Path) -> None:
    if etcd_binary() is None:
        pytest.skip("etcd is not installed: `make test` installs Debian's etcd-server")
    (tmp_path / "etcd").mkdir()
    async with (
        EtcdCluster(tmp_path / "etcd", members=3) as etcd,
        running_controller(etcd.endpoints) as controller,
    ):
        await wait_leader(controller)
        broker = FakeBroker(controller.address, "broker-h", "127.0.0.1:20071")
        try:
            assert await broker.join() == 1
            etcd.kill(0)  # the first endpoint, the one the controller uses
            header = ApplyBrokerIdRequestHeader(CLUSTER, "broker-h", 2, "h:2;1")
            deadline = time.monotonic() + WAIT_S
            code = -1
            while time.monotonic() < deadline:
                answer = await broker.call(
                    RequestCode.CONTROLLER_APPLY_BROKER_ID, header.to_ext_fields()
                )
                code = answer.code
                if code == ResponseCode.SUCCESS:
                    break
                await asyncio.sleep(0.2)
            assert code == ResponseCode.SUCCESS
            replica_set, _ = await controller.store.read_set("broker-h")
            assert replica_set is not None and set(replica_set.replicas) == {1, 2}
        finally:
            await broker.die()

"""The controller reads a client sends (client/rpc/controller.py) and ``bolide ha status``
over them, against a real controller on a real etcd."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import orjson
import pytest

from bolide.client.rpc.controller import get_controller_metadata, get_sync_state_data
from bolide.protocol.codes import ResponseCode
from bolide.remoting import ClientPool
from bolide.testing.etcd import EtcdCluster
from tests.controller.support import FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)

BOLIDE = str(Path(sys.executable).parent / "bolide")
SOURCE = str(Path(__file__).resolve().parents[2] / "src")
TIMEOUT_MS = 5_000


async def test_metadata_and_sync_state_data_through_client_rpc(
    etcd: EtcdCluster, tmp_path: Path
) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        master = FakeBroker(controller.address, "broker-r", "127.0.0.1:20031")
        pool = ClientPool()
        try:
            assert await master.join() == 1
            await master.seen_by(controller)
            elected = await master.elect()
            assert elected.code == ResponseCode.SUCCESS, elected.remark
            header = await get_controller_metadata(pool, controller.address, TIMEOUT_MS)
            assert header.controller_leader_address == controller.address
            replicas = await get_sync_state_data(pool, controller.address, TIMEOUT_MS)
            info = replicas.replicas_info_table["broker-r"]
            assert [r.broker_id for r in info.in_sync_replicas] == [1]
            assert info.master_broker_id == 1
            process = await asyncio.create_subprocess_exec(
                BOLIDE, "ha", "status", "--controller", controller.address, "--json",
                cwd=tmp_path, env={**os.environ, "PYTHONPATH": SOURCE},
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            stdout, _ = await process.communicate()
            assert process.returncode == 0
            status = orjson.loads(stdout)
            assert status["leader"] == controller.address
            assert status["brokerSets"]["broker-r"]["masterBrokerId"] == 1
        finally:
            await master.die()
            await pool.close()

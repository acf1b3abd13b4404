"""Requests to a controller for the tests: a broker's-eye view over a real connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from bolide.controller.controller import Controller
from bolide.controller.settings import ControllerSettings
from bolide.protocol.bodies.controller import SyncStateSet
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from bolide.remoting import ClientPool, Dispatcher
from bolide.testing.waiting import until

CLUSTER = "DefaultCluster"


def controller_mode_settings(controller: Controller, root: Path) -> dict[str, object]:
    """broker.conf keys of an in-process controller-mode broker (Cluster.add_broker) under
    ``root``, with short SyncStateSet and metadata periods for the tests."""
    return {
        "enableControllerMode": "true",
        "controllerAddr": controller.address,
        "brokerId": "-1",
        "brokerRole": "SLAVE",
        "allAckInSyncStateSet": "true",
        "checkSyncStateSetPeriod": "200",
        "syncBrokerMetadataPeriod": "200",
        "store_path_root_dir": root,
        "listen_port": 0,
        "haListenPort": "0",
    }


@asynccontextmanager
async def running_controller(
    endpoints: str, settings: ControllerSettings | None = None
) -> AsyncIterator[Controller]:
    """A controller on a free port, stopped on exit."""
    controller = Controller(endpoints, "127.0.0.1", 0, settings=settings)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


async def wait_leader(controller: Controller) -> None:
    await until(lambda: controller.is_leader)


class FakeBroker:
    """One replica talking to a controller: its own connection (closing it = dying)."""

    def __init__(self, controller_address: str, broker_name: str, address: str) -> None:
        self.controller_address = controller_address
        self.broker_name = broker_name
        self.address = address
        self.notified: list[RemotingCommand] = []
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._notified, family="t")
        self.pool = ClientPool(dispatcher)
        self.broker_id = 0

    async def _notified(self, _connection: object, request: RemotingCommand) -> None:
        self.notified.append(request)

    async def call(
        self, code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return await self.pool.invoke(
            self.controller_address, RemotingCommand.request(code, fields, body), 10_000
        )

    async def join(self) -> int:
        """1012 → 1013 → 1003 → 904; returns the id."""
        answer = await self.call(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            {"clusterName": CLUSTER, "brokerName": self.broker_name},
        )
        broker_id = int(answer.ext_fields["nextBrokerId"])
        applied = await self.call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(
                CLUSTER, self.broker_name, broker_id, f"{self.address};1"
            ).to_ext_fields(),
        )
        assert applied.code == 0, applied.remark
        self.broker_id = broker_id
        registered = await self.register()
        assert registered.code == 0, registered.remark
        await self.beat()
        return broker_id

    async def register(self) -> RemotingCommand:
        return await self.call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            RegisterBrokerToControllerRequestHeader(
                CLUSTER, self.broker_name, self.broker_id, self.address
            ).to_ext_fields(),
        )

    async def beat(
        self,
        epoch: int = 0,
        max_offset: int = 0,
        priority: int | None = None,
        timeout_ms: int = 10_000,
    ) -> None:
        header = BrokerHeartbeatRequestHeader(
            CLUSTER, self.address, self.broker_name, self.broker_id,
            epoch=epoch, max_offset=max_offset, heartbeat_timeout_ms=timeout_ms,
            election_priority=priority,
        )  # fmt: skip
        await self.pool.invoke_oneway(
            self.controller_address,
            RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, header.to_ext_fields()),
        )

    async def elect(self, broker_id: int | None = None, designate: bool = False) -> RemotingCommand:
        header = ElectMasterRequestHeader(
            CLUSTER, self.broker_name, self.broker_id if broker_id is None else broker_id,
            designate_elect=designate,
        )  # fmt: skip
        return await self.call(RequestCode.CONTROLLER_ELECT_MASTER, header.to_ext_fields())

    async def alter(
        self, master_epoch: int, members: set[int], set_epoch: int, master_id: int | None = None
    ) -> RemotingCommand:
        header = AlterSyncStateSetRequestHeader(
            self.broker_name, self.broker_id if master_id is None else master_id, master_epoch
        )
        body = SyncStateSet(frozenset(members), set_epoch).to_json()
        return await self.call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header.to_ext_fields(), body
        )

    async def die(self) -> None:
        await self.pool.close()

    async def seen_by(self, controller: Controller) -> None:
        await until(lambda: controller.heartbeats.is_alive(self.broker_name, self.broker_id))


async def settle() -> None:
    await asyncio.sleep(0)

"""GET_BROKER_RUNTIME_INFO carries the sizes bench/soak.py watches for growth (issue 30)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.protocol.bodies import KVTable
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from tests.broker.test_pop import _ack, _pop
from tests.integration.wire import BrokerWire, connected, records


async def _sizes(wire: BrokerWire) -> dict[str, int]:
    response = await wire.invoke(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert response.code == ResponseCode.SUCCESS
    table = dict(KVTable.from_json(response.body).table)
    return {key: int(table[key]) for key in ("bolideAsyncioTasks", "bolidePopInFlightMessages")}


async def test_the_pop_in_flight_table_and_the_loop_tasks_are_reported(tmp_path: Path) -> None:
    async with connected(tmp_path, clock=ManualClock()) as (_, wire):
        for index in range(3):
            await wire.send("Sized", f"m{index}".encode(), queue_id=0)
        assert (await _sizes(wire))["bolidePopInFlightMessages"] == 0
        popped = records(await _pop(wire, "Sized", invisible_ms=60_000))
        assert len(popped) == 3

        during = await _sizes(wire)
        assert during["bolidePopInFlightMessages"] == 3
        await _ack(wire, popped[0])
        assert (await _sizes(wire))["bolidePopInFlightMessages"] == 2
        # the broker runs on this loop: its figure is this loop's live tasks at the answer
        assert 0 < during["bolideAsyncioTasks"] <= len(asyncio.all_tasks()) + 10

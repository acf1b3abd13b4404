"""RECALL_MESSAGE (370) over a real socket: a recall of a pending timer message, and the
answers to bad handles, another broker's handle and a recall that comes too late."""

from __future__ import annotations

import time
from pathlib import Path

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.recall import RecallHandle, RecallMessageRequestHeader
from tests.integration.wire import BrokerWire, connected


async def _recall(wire: BrokerWire, topic: str, handle: str) -> RemotingCommand:
    header = RecallMessageRequestHeader(topic, handle)
    return await wire.invoke(
        RemotingCommand.request(RequestCode.RECALL_MESSAGE, header.to_ext_fields())
    )


async def test_recall_answers(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, wire):
        broker = cluster.brokers[0].config.broker_name
        due_ms = int(time.time() * 1000) + 60_000
        handle = RecallHandle("Timed", broker, due_ms, "ID-1")
        assert RecallHandle.decode(handle.encode()) == handle
        recalled = await _recall(wire, "Timed", handle.encode())
        assert recalled.code == ResponseCode.SUCCESS
        assert recalled.ext_fields["msgId"] == "ID-1"
        bad = await _recall(wire, "Timed", "%%%not base64")
        assert bad.code == ResponseCode.MESSAGE_ILLEGAL
        other_topic = await _recall(wire, "Other", handle.encode())
        assert other_topic.code == ResponseCode.MESSAGE_ILLEGAL
        elsewhere = RecallHandle("Timed", "broker-z", due_ms, "ID-1").encode()
        assert (await _recall(wire, "Timed", elsewhere)).code == ResponseCode.SYSTEM_ERROR
        late = RecallHandle("Timed", broker, int(time.time() * 1000) - 1, "ID-2").encode()
        too_late = await _recall(wire, "Timed", late)
        assert too_late.code == ResponseCode.SYSTEM_ERROR
        assert "already delivered" in (too_late.remark or "")

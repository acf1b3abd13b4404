"""``settle_batch``: each send of a natural batch gets its own SendResult; the compiled twin
(``_results.pyx``) against the pure-Python one (``results.py``): same results, same errors.

The compiled module is imported directly, so these run whatever BOLIDE_PURE_PYTHON says; they
skip only where the extension was not built (no compiler).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from bolide.base import compiled
from bolide.base.errors import ProtocolError
from bolide.client.message import SendResult, SendStatus
from bolide.client.producer import results
from bolide.protocol.bodies import MessageQueue

QUEUE = MessageQueue("orders", "broker-a", 3)


class _Waiting:
    def __init__(self, future: asyncio.Future[SendResult], msg_id: str) -> None:
        self.future = future
        self.msg_id = msg_id


def _twins() -> list[Callable[..., Any]]:
    twins = [compiled.pure_twin("bolide.client.producer.results", "settle_batch")]
    try:
        fast: ModuleType = importlib.import_module("bolide.client.producer._compiled")
    except ImportError:  # pragma: no cover - a build without a C compiler
        pass
    else:
        twins.append(fast.settle_batch)
    return twins


def _settle(settle: Callable[..., Any], offset_ids: str, cancelled: int | None) -> list[Any]:
    loop = asyncio.new_event_loop()
    try:
        group = [_Waiting(loop.create_future(), f"KEY{index}") for index in range(4)]
        if cancelled is not None:
            group[cancelled].future.cancel()
        try:
            settle(group, offset_ids, SendStatus.FLUSH_DISK_TIMEOUT, QUEUE, 40, "tx", "region")
        except ProtocolError as error:
            return ["error", str(error), [waiting.future.done() for waiting in group]]
        return [
            "cancelled" if waiting.future.cancelled() else waiting.future.result()
            for waiting in group
        ]
    finally:
        loop.close()


def test_each_send_gets_its_own_result() -> None:
    assert callable(results.settle_batch)
    for settle in _twins():
        got = _settle(settle, "O0,O1,O2,O3", cancelled=None)
        assert got == [
            SendResult(
                SendStatus.FLUSH_DISK_TIMEOUT, f"KEY{i}", f"O{i}", QUEUE, 40 + i, "tx", "region"
            )
            for i in range(4)
        ]
        assert all(type(result) is SendResult for result in got)
        with pytest.raises(AttributeError):  # still frozen
            got[0].queue_offset = 1


@pytest.mark.parametrize(
    ("offset_ids", "cancelled"), [("O0,O1,O2,O3", 2), ("O0,O1,O2", None), ("", None)]
)
def test_the_twins_agree(offset_ids: str, cancelled: int | None) -> None:
    outcomes = [_settle(settle, offset_ids, cancelled) for settle in _twins()]
    assert all(outcome == outcomes[0] for outcome in outcomes)
    if offset_ids.count(",") != 3:
        assert outcomes[0][0] == "error" and outcomes[0][2] == [False] * 4

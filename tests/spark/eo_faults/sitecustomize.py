"""Fault injection for ``tests/spark/test_exactly_once_faults.py``, loaded at start by every
Python process of a Spark driver whose PYTHONPATH starts with this directory (the driver, the
workers Spark starts for the sink's commit) when ``BOLIDE_EO_FAULT`` is set.

``BOLIDE_EO_FAULT=N``: the first commit of an exactly-once batch (in any of those processes)
that has sent N END_TRANSACTION commits pauses before its next one (N=0: right after its
ledger record, before any commit) and creates ``$BOLIDE_EO_FAULT_DIR/paused``; it goes on
when ``$BOLIDE_EO_FAULT_DIR/go`` exists (the test killed the broker meanwhile). Only one
commit pauses per directory. Nothing in ``src/`` knows about this.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

GO_WAIT_S = 300.0
"""Bound on the pause: a test that never says go does not leave a commit hanging."""


def _install(after: int, directory: Path) -> None:
    from bolide.client.producer.transaction import LocalTransactionState
    from bolide.spark import exactly_once

    original = getattr(exactly_once, "end_transaction")  # noqa: B009 (not exported)
    state: dict[str, Any] = {"sent": 0, "claimed": None}

    def claim() -> bool:
        try:
            os.close(os.open(directory / "paused", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def go_given() -> None:
        deadline = time.monotonic() + GO_WAIT_S
        while not (directory / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    async def wait_for_go() -> None:
        await asyncio.to_thread(go_given)

    async def end_transaction(producer: Any, target: Any, decision: Any, timeout_ms: int) -> bool:
        if decision is LocalTransactionState.COMMIT_MESSAGE:
            if state["sent"] >= after:
                if state["claimed"] is None:
                    state["claimed"] = claim()
                if state["claimed"]:
                    await wait_for_go()
            state["sent"] += 1
        result: bool = await original(producer, target, decision, timeout_ms)
        return result

    setattr(exactly_once, "end_transaction", end_transaction)  # noqa: B010 (not exported)


_fault = os.environ.get("BOLIDE_EO_FAULT")
if _fault:
    _install(int(_fault), Path(os.environ["BOLIDE_EO_FAULT_DIR"]))

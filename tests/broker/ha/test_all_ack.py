"""allAckInSyncStateSet over the AutoSwitch stream, real sockets: a send waits for every
replica id it must (each connection matched by the id its handshake named, never by order or
by the best ack), and a smaller set releases what the remaining replicas already hold."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock, SystemClock
from bolide.broker.ha.master import HaMaster
from bolide.broker.ha.slave import HaSlave
from bolide.store.api import PutStatus
from bolide.store.epoch_file import EPOCH_FILE_NAME, EpochEntry, EpochFile
from bolide.store.file_store import FileMessageStore
from tests.client.conftest import eventually
from tests.store.conftest import STORE_HOST, ControlledFileOps, request, tiny_config

pytestmark = pytest.mark.timeout(60)

SLAVE_TIMEOUT_MS = 2_000
"""The sends that must not be acknowledged give up after this long."""


async def _store(root: Path) -> FileMessageStore:
    store = FileMessageStore(
        tiny_config(root),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )
    await store.start()
    return store


def _copier(store: FileMessageStore, root: Path, ha: HaMaster, broker_id: int) -> HaSlave:
    store.refuse_puts = "this broker is a SLAVE"
    copier = HaSlave(
        store,
        lambda: f"127.0.0.1:{ha.port}",
        clock=SystemClock(),
        epochs=EpochFile(root / EPOCH_FILE_NAME),
        broker_id=broker_id,
        reconnect_interval_ms=50,
    )
    copier.start()
    return copier


async def test_a_send_waits_for_every_required_replica_by_its_handshake_id(
    tmp_path: Path,
) -> None:
    master = await _store(tmp_path / "m")
    epochs = EpochFile(tmp_path / "m" / EPOCH_FILE_NAME)
    epochs.append(EpochEntry(1, 0))
    required: set[int] = {2, 3}
    ha = HaMaster(
        master,
        host="127.0.0.1",
        port=0,
        clock=SystemClock(),
        epochs=epochs,
        slave_timeout_ms=SLAVE_TIMEOUT_MS,
        required_acks=lambda: frozenset(required),
    )
    await ha.start()
    replica_2 = await _store(tmp_path / "r2")
    replica_7 = await _store(tmp_path / "r7")
    copiers = [
        _copier(replica_2, tmp_path / "r2", ha, 2),
        _copier(replica_7, tmp_path / "r7", ha, 7),  # connected, caught up, not a member
    ]
    try:
        await eventually(lambda: _ids_are(ha, {2, 7}))
        result = await master.put_message(request(body=b"needs-2-and-3"))
        await ha.wait_replicated(result)
        # two connections acknowledged it, yet member 3 has none: not acknowledged
        assert result.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        end = result.commit_log_offset + result.wrote_bytes
        assert ha.ack_offset_of(2) >= end and ha.ack_offset_of(7) >= end
        assert ha.ack_offset_of(3) == -1
        # the set shrinks to {2}: a waiting send is released at once by 2's ack
        pending = await master.put_message(request(body=b"released"))
        waiting = asyncio.ensure_future(ha.wait_replicated(pending))
        await eventually(lambda: _acked_by(ha, 2, pending.commit_log_offset + pending.wrote_bytes))
        assert not waiting.done()
        required.discard(3)
        ha.requirements_changed()
        await waiting
        assert pending.status is PutStatus.PUT_OK
        # member 2 gone: the next send is not acknowledged even though 7 still copies it
        await copiers[0].stop()
        await eventually(lambda: _ids_are(ha, {7}))
        after = await master.put_message(request(body=b"after-2-left"))
        await ha.wait_replicated(after)
        assert after.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        # no member left to wait for: acknowledged as stored
        required.clear()
        last = await master.put_message(request(body=b"alone"))
        await ha.wait_replicated(last)
        assert last.status is PutStatus.PUT_OK
    finally:
        for copier in copiers:
            await copier.stop()
        await ha.stop()
        for store in (master, replica_2, replica_7):
            await store.shutdown()


async def _ids_are(ha: HaMaster, expected: set[int]) -> bool:
    return {link.slave_broker_id for link in ha.links} == expected


async def _acked_by(ha: HaMaster, broker_id: int, offset: int) -> bool:
    return ha.ack_offset_of(broker_id) >= offset

"""The controller-mode HA stream (AutoSwitch) over real sockets: epochs in the handshake, a
deposed master's records the new master never had are truncated when it rejoins as a slave,
and it then holds the new master's bytes exactly; frames never span two epochs."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bolide.base.clock import ManualClock, SystemClock
from bolide.base.errors import ProtocolError
from bolide.broker.broker import Broker
from bolide.broker.ha.autoswitch_wire import (
    MasterStreamDecoder,
    SlaveStreamDecoder,
    encode_master_handshake,
    encode_slave_handshake,
    encode_slave_report,
    encode_transfer_header,
)
from bolide.broker.ha.master import HaMaster
from bolide.broker.ha.slave import HaSlave
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader
from bolide.remoting import ClientPool
from bolide.store.epoch_file import EPOCH_FILE_NAME, EpochEntry, EpochFile
from bolide.store.file_store import FileMessageStore
from bolide.testing.cluster import Cluster
from tests.client.conftest import eventually
from tests.integration.wire import BrokerWire
from tests.store.conftest import STORE_HOST, ControlledFileOps, request, tiny_config

pytestmark = pytest.mark.timeout(60)

SEGMENT_BYTES = 8 * 1024


def test_frame_layouts_are_java_sizes_and_split_feeds_decode() -> None:
    assert len(encode_slave_handshake(7)) == 16
    assert len(encode_slave_report(5)) == 12
    epochs = [EpochEntry(1, 0), EpochEntry(3, 4096)]
    handshake = encode_master_handshake(9000, epochs)
    assert len(handshake) == 20 + 2 * 12
    assert struct.unpack_from(">iiqi", handshake) == (1, 24, 9000, 3)
    frame = encode_transfer_header(4096, 3, 3, 4096, 4000) + b"abc"
    assert len(frame) == 36 + 3
    decoder = SlaveStreamDecoder()
    stream = handshake + frame
    frames = []
    for position in range(len(stream)):  # one byte at a time
        frames += decoder.feed(stream[position : position + 1])
    assert decoder.handshake is not None and decoder.handshake.epochs == tuple(epochs)
    assert decoder.handshake.last_epoch == 3
    assert [
        (f.offset, f.epoch, f.epoch_start_offset, f.confirm_offset, f.body) for f in frames
    ] == [(4096, 3, 4096, 4000, b"abc")]
    master = MasterStreamDecoder()
    assert master.feed(encode_slave_handshake(7)[:10]) is None
    assert master.feed(encode_slave_handshake(7)[10:] + encode_slave_report(5)) == 5
    assert master.handshake is not None and master.handshake.slave_broker_id == 7


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x02" + b"\x00" * 16,  # a report before the handshake
        encode_slave_handshake(1) + struct.pack(">iq", 2, -5),  # a negative offset
        encode_slave_handshake(1) + struct.pack(">iq", 9, 5),  # an unknown state
    ],
)
def test_garbage_from_a_slave_is_a_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        MasterStreamDecoder().feed(garbage)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">iiqi", 1, 13, 0, 0) + b"\x00" * 13,  # a body not a multiple of 12
        struct.pack(">iiqi", 1, 24, 0, 2) + struct.pack(">iqiq", 2, 0, 1, 10),  # out of order
        encode_master_handshake(0, []) + struct.pack(">iiqiqq", 2, 1 << 30, 0, 1, 0, 0),
    ],
)
def test_garbage_from_a_master_is_a_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        SlaveStreamDecoder().feed(garbage)


async def _store(root: Path) -> FileMessageStore:
    store = FileMessageStore(
        tiny_config(root, commit_log_segment_bytes=SEGMENT_BYTES),
        clock=ManualClock(),
        store_host=STORE_HOST,
        file_ops=ControlledFileOps(sync=False),
    )
    await store.start()
    return store


async def _put(store: FileMessageStore, prefix: str, count: int) -> None:
    for index in range(count):
        body = f"{prefix}-{index} ".encode() * (1 + index % 9)
        result = await store.put_message(request("orders", index % 2, body))
        assert result.status.value == "PUT_OK"


@asynccontextmanager
async def _replicating(
    master: FileMessageStore,
    master_epochs: EpochFile,
    slave: FileMessageStore,
    slave_epochs: EpochFile,
) -> AsyncIterator[tuple[HaMaster, HaSlave]]:
    """An AutoSwitch master on ``master`` and a slave (id 2) on ``slave``, over loopback."""
    clock = SystemClock()
    ha = HaMaster(master, host="127.0.0.1", port=0, clock=clock, epochs=master_epochs)
    await ha.start()
    slave.refuse_puts = "this broker is a SLAVE"
    copier = HaSlave(
        slave,
        lambda: f"127.0.0.1:{ha.port}",
        clock=clock,
        epochs=slave_epochs,
        broker_id=2,
        reconnect_interval_ms=50,
    )
    copier.start()
    try:
        yield ha, copier
    finally:
        await copier.stop()
        await ha.stop()


def _log_bytes(store: FileMessageStore) -> bytes:
    chunks, offset = [], 0
    while (data := store.read_commit_log(offset, 4096)) is not None:
        chunks.append(data)
        offset += len(data)
    return b"".join(chunks)


def _entries(store: FileMessageStore) -> list[list[tuple[int, int, int]]]:
    return [store.consume_queue_entries("orders", q, 0, 10_000) for q in range(2)]


async def test_a_deposed_master_truncates_what_its_successor_never_had(tmp_path: Path) -> None:
    old, new = await _store(tmp_path / "a"), await _store(tmp_path / "b")
    old_epochs = EpochFile(tmp_path / "a" / EPOCH_FILE_NAME)
    new_epochs = EpochFile(tmp_path / "b" / EPOCH_FILE_NAME)
    try:
        # epoch 1: a is master, b copies it
        old_epochs.append(EpochEntry(1, 0))
        await _put(old, "epoch1", 40)
        async with _replicating(old, old_epochs, new, new_epochs) as (ha, copier):
            await eventually(lambda: _caught_up(new, old))
            assert copier.confirm_offset == old.commit_log_max_offset
            await eventually(lambda: _acked(ha, old.commit_log_max_offset))
            assert ha.confirm_offset({2}, 7) == old.commit_log_max_offset
            assert ha.confirm_offset(set(), 7) == old.commit_log_max_offset
            assert ha.confirm_offset({2, 3}, 7) == 7  # member 3 has no connection
        assert new_epochs.entries == [EpochEntry(1, 0)]
        agreed = new.commit_log_max_offset
        # a, cut off, keeps taking sends nobody copies; b is elected with epoch 2
        await _put(old, "lost", 120)
        assert old.commit_log_max_offset > agreed + SEGMENT_BYTES
        new_epochs.append(EpochEntry(2, agreed))
        new.refuse_puts = None
        await _put(new, "epoch2", 30)
        # a comes back as a slave of b: it cuts back to where the two agree, then copies
        async with _replicating(new, new_epochs, old, old_epochs) as (_, copier):
            await eventually(lambda: _caught_up(old, new))
            [cut] = copier.truncations
        assert cut.offset == agreed and cut.old_max_offset > agreed + SEGMENT_BYTES
        assert old_epochs.entries == [EpochEntry(1, 0), EpochEntry(2, agreed)]
        assert _log_bytes(old) == _log_bytes(new)
        assert _entries(old) == _entries(new)
        assert b"lost-" not in _log_bytes(old)
    finally:
        await old.shutdown()
    restarted = await _store(tmp_path / "a")
    try:
        assert _log_bytes(restarted) == _log_bytes(new)
        assert _entries(restarted) == _entries(new)
        assert EpochFile(tmp_path / "a" / EPOCH_FILE_NAME).entries == new_epochs.entries
    finally:
        await restarted.shutdown()
        await new.shutdown()


async def _acked(ha: HaMaster, offset: int) -> bool:
    return any(link.ack_offset >= offset for link in ha.links)


async def _caught_up(replica: FileMessageStore, master: FileMessageStore) -> bool:
    return replica.commit_log_max_offset == master.commit_log_max_offset


async def test_frames_never_span_two_epochs(tmp_path: Path) -> None:
    master, slave = await _store(tmp_path / "m"), await _store(tmp_path / "s")
    master_epochs = EpochFile(tmp_path / "m" / EPOCH_FILE_NAME)
    slave_epochs = EpochFile(tmp_path / "s" / EPOCH_FILE_NAME)
    try:
        master_epochs.append(EpochEntry(1, 0))
        await _put(master, "one", 3)
        master_epochs.append(EpochEntry(4, master.commit_log_max_offset))
        await _put(master, "four", 3)
        async with _replicating(master, master_epochs, slave, slave_epochs):
            await eventually(lambda: _caught_up(slave, master))
        # the slave learned the epoch boundary from the frames alone
        assert slave_epochs.entries == master_epochs.entries
        assert _log_bytes(slave) == _log_bytes(master)
    finally:
        await master.shutdown()
        await slave.shutdown()


async def test_brokers_swap_roles_and_the_deposed_master_rejoins(tmp_path: Path) -> None:
    """Two real brokers: a is master of epoch 1, b its slave; b is promoted (epoch 2) while a,
    cut off, takes more sends; a then follows b, truncates, and both hold the same log."""
    settings = {"broker_role": "ASYNC_MASTER", "ha_listen_port": 0}
    async with Cluster(tmp_path, settings=settings) as cluster:
        a = cluster.broker("broker-a")
        b = await cluster.add_broker(
            "broker-a", broker_id=1, broker_role="SLAVE", store_path_root_dir=tmp_path / "b"
        )
        pool = ClientPool()
        try:
            a.replication.epoch_file = EpochFile(tmp_path / "a.epochs")
            b.replication.epoch_file = EpochFile(tmp_path / "b.epochs")
            await a.replication.become_master(master_epoch=1)
            a_ha = f"127.0.0.1:{a.replication.ha_port}"
            await b.replication.become_slave(a.address, a_ha)
            wire_a, wire_b = BrokerWire(pool, a.address), BrokerWire(pool, b.address)
            await _create(wire_a)
            for index in range(20):
                assert (await wire_a.send("Swap", f"one-{index}".encode())).code == 0
            await eventually(lambda: _caught_up(_files(b), _files(a)))
            # b is elected; a does not know yet and acknowledges sends nobody copies
            await b.replication.become_master(master_epoch=2)
            await _create(wire_b)
            for index in range(30):
                assert (await wire_a.send("Swap", f"lost-{index}".encode())).code == 0
                assert (await wire_b.send("Swap", f"two-{index}".encode())).code == 0
            await a.replication.become_slave(b.address, f"127.0.0.1:{b.replication.ha_port}")
            await eventually(lambda: _caught_up(_files(a), _files(b)))
            assert a.replication.slave is not None and a.replication.slave.truncations
            assert _log_bytes(_files(a)) == _log_bytes(_files(b))
            assert b"lost-" not in _log_bytes(_files(a))
            refused = await wire_a.send("Swap", b"to the deposed master")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert a.replication.epoch_file.entries == b.replication.epoch_file.entries
            info = a.replication.runtime_info()
            assert info["haMasterEpoch"] == "2" and info["haEpochEntries"].startswith("1-0,2-")
            assert int(info["haTruncatedBytes"]) > 0
            assert info["haConfirmOffset"] == str(_files(b).commit_log_max_offset)
        finally:
            await pool.close()


def _files(broker: Broker) -> FileMessageStore:
    store = broker.context.store
    assert isinstance(store, FileMessageStore)
    return store


async def _create(wire: BrokerWire) -> None:
    create = CreateTopicRequestHeader("Swap", "TBW102", 1, 1, 6)
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create.to_ext_fields())
    assert (await wire.invoke(request)).code == ResponseCode.SUCCESS

"""The slave's HA client: copies the master's commit log into the local store.

A loop (re)connects to the master's HA address (``haMasterAddress``, else what the name
server's REGISTER_BROKER answer names), reports the local commit-log end, then:

* every transfer frame must start where the local log (plus a partial record held in memory)
  ends: otherwise the stream is out of step, the connection is closed and opened again, and
  the report after reconnecting tells the master where to resume;
* the bytes go to :meth:`FileMessageStore.append_replicated`, which writes whole records and
  builds consume queues and the index from them;
* after each read that wrote something, and at least every 5 s, the slave reports its offset
  (whole records only: an ack means the records are stored);
* a master silent for 20 s is left, and the slave reconnects after a short pause.

A record half-received when the connection breaks is discarded: the master sends it again.

With ``epochs`` (controller mode) the stream is AutoSwitch's (autoswitch_wire.py): the slave
sends its handshake, reads the master's epoch list, truncates its own log to the last offset
both agree on (:func:`~bolide.store.epoch_file.compute_truncate_offset`; the cut is logged
and never served), reports, then appends each new epoch a frame names and follows the
master's confirm offset. No common epoch: the connection fails and is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ProtocolError, ReplicaOffsetError, StoreError
from bolide.broker.ha.autoswitch_wire import (
    SlaveStreamDecoder,
    TransferFrame,
    encode_slave_handshake,
    encode_slave_report,
)
from bolide.broker.ha.master import ReplicationLag
from bolide.broker.ha.wire import FrameDecoder, encode_offset_report
from bolide.store.epoch_file import (
    EpochEntry,
    EpochFile,
    NoCommonEpochError,
    compute_truncate_offset,
)
from bolide.store.file_store import FileMessageStore
from bolide.store.file_store_replication import TruncateReport

__all__ = ["HaSlave"]

_log = logging.getLogger("bolide.broker.ha.slave")


class HaSlave:
    """Keeps ``store`` a copy of the master named by ``master_address()`` (``host:port`` of
    its haListenPort, or None while unknown)."""

    def __init__(
        self,
        store: FileMessageStore,
        master_address: Callable[[], str | None],
        *,
        clock: Clock,
        heartbeat_interval_ms: int = limits.HA_HEARTBEAT_INTERVAL_MS,
        housekeeping_interval_ms: int = limits.HA_HOUSEKEEPING_INTERVAL_MS,
        reconnect_interval_ms: int = limits.HA_RECONNECT_INTERVAL_MS,
        epochs: EpochFile | None = None,
        broker_id: int = 0,
    ) -> None:
        self._store = store
        self._epochs = epochs
        self._broker_id = broker_id
        self.confirm_offset = 0
        """Controller mode: min(the master's confirm offset, this log's end)."""
        self.truncations: list[TruncateReport] = []
        """Controller mode: every cut made to agree with a master, oldest first."""
        self._master_address = master_address
        self._clock = clock
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._housekeeping_interval_ms = housekeeping_interval_ms
        self._reconnect_interval_ms = reconnect_interval_ms
        self._task: asyncio.Task[None] | None = None
        self.connected_to: str | None = None
        """The master's HA address while a connection is up."""
        self.connections = 0
        """Connections opened so far."""
        self.master_offset_seen = 0
        """The highest master offset a frame named (where its data reached)."""
        self.failures = 0
        """Failed connections since the last good one."""
        self._last_frame_ms = 0
        self._reported = -1

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def lag(self) -> ReplicationLag:
        """Bytes the master named that are not copied yet, and for how long data has been
        missing (ms since the last frame while behind)."""
        behind = max(0, self.master_offset_seen - self._store.commit_log_max_offset)
        if behind == 0:
            return ReplicationLag(0, 0)
        return ReplicationLag(behind, max(0, self._clock.monotonic_ms() - self._last_frame_ms))

    async def _run(self) -> None:
        while True:
            address = self._master_address()
            if address is not None:
                try:
                    await self._session(address)
                except (
                    OSError,
                    TimeoutError,
                    ProtocolError,
                    ReplicaOffsetError,
                    NoCommonEpochError,
                ) as error:
                    self.failures += 1
                    # Once per outage at WARNING: a dead master is retried every second.
                    level = logging.WARNING if self.failures == 1 else logging.DEBUG
                    _log.log(level, "HA: connection to master %s ended: %s", address, error)
                except StoreError as error:
                    _log.error("HA: the local store refuses copies: %s", error)
                finally:
                    self.connected_to = None
                    self._store.replica.forget_pending()
            await self._clock.sleep_ms(self._reconnect_interval_ms)

    async def _session(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        # asyncio.timeout, not wait_for: wait_for of 3.11 can swallow a cancellation.
        async with asyncio.timeout(self._housekeeping_interval_ms / 1000):
            reader, writer = await asyncio.open_connection(
                host, int(port), limit=limits.HA_READ_BUFFER_BYTES
            )
        self.connections += 1
        self.failures = 0
        self.connected_to = address
        _log.info("HA: connected to master %s", address)
        reporter = asyncio.get_running_loop().create_task(
            self._report_loop(writer), name="ha-slave-report"
        )
        try:
            self._reported = -1
            if self._epochs is not None:
                await self._auto_switch_session(self._epochs, reader, writer)
                return
            await self._report(writer)
            await self._receive(reader, writer)
        finally:
            # Not awaited: awaiting a cancelled child here would swallow our own cancellation.
            reporter.cancel()
            writer.close()

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        replica = self._store.replica
        while True:
            data = await self._read(reader)
            for offset, body in decoder.feed(data):
                if not replica.in_step(offset):
                    raise ReplicaOffsetError(
                        f"master sent offset {offset}, this slave continues at "
                        f"{replica.end_offset}: reconnecting"
                    )
                self.master_offset_seen = max(self.master_offset_seen, offset + len(body))
                if body:
                    self._store.append_replicated(offset, body)
            if self._store.commit_log_max_offset > self._reported:
                await self._report(writer)

    async def _auto_switch_session(
        self, epochs: EpochFile, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        writer.write(encode_slave_handshake(self._broker_id))
        await writer.drain()
        decoder = SlaveStreamDecoder()
        frames: list[TransferFrame] = []
        while decoder.handshake is None:
            async with asyncio.timeout(self._housekeeping_interval_ms / 1000):
                data = await reader.read(limits.HA_READ_BUFFER_BYTES)
            if not data:
                raise ConnectionResetError("the master closed the connection in the handshake")
            frames = decoder.feed(data)
        master = decoder.handshake
        store = self._store
        local_max = store.commit_log_max_offset
        cut = compute_truncate_offset(
            epochs.entries, local_max, list(master.epochs), master.max_offset
        )
        if cut < local_max:
            report = store.truncate_commit_log_to(cut)
            self.truncations.append(report)
            _log.warning(
                "HA: this log parted from master %s's at %d: %d bytes (%d..%d) cut, never "
                "served; epochs %s -> master's %s",
                self.connected_to,
                cut,
                report.bytes_cut,
                cut,
                report.old_max_offset,
                epochs.entries[-3:],
                list(master.epochs[-3:]),
            )
        agreed = set(master.epochs)
        if any(e.start_offset >= cut and e not in agreed for e in epochs.entries):
            epochs.truncate_from(cut)  # epochs only this log had; frames bring the master's
        await self._report(writer)
        self._take_frames(epochs, frames)
        while True:
            data = await self._read(reader)
            self._take_frames(epochs, decoder.feed(data))
            if store.commit_log_max_offset > self._reported:
                await self._report(writer)

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        """The master's next bytes.

        Raises:
            TimeoutError: none within the housekeeping interval.
            ConnectionResetError: the master closed the connection.
        """
        async with asyncio.timeout(self._housekeeping_interval_ms / 1000):
            data = await reader.read(limits.HA_READ_BUFFER_BYTES)
        if not data:
            raise ConnectionResetError("the master closed the connection")
        self._last_frame_ms = self._clock.monotonic_ms()
        return data

    def _take_frames(self, epochs: EpochFile, frames: list[TransferFrame]) -> None:
        replica = self._store.replica
        for frame in frames:
            if not replica.in_step(frame.offset):
                raise ReplicaOffsetError(
                    f"master sent offset {frame.offset}, this slave continues at "
                    f"{replica.end_offset}: reconnecting"
                )
            if frame.epoch > epochs.last_epoch:
                epochs.append(EpochEntry(frame.epoch, frame.epoch_start_offset))
            end = frame.offset + len(frame.body)
            self.master_offset_seen = max(self.master_offset_seen, end)
            if frame.body:
                self._store.append_replicated(frame.offset, frame.body)
            self.confirm_offset = min(frame.confirm_offset, self._store.commit_log_max_offset)

    async def _report(self, writer: asyncio.StreamWriter) -> None:
        offset = self._store.commit_log_max_offset
        writer.write(self._encode_report(offset))
        self._reported = offset
        await writer.drain()

    async def _report_loop(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await self._clock.sleep_ms(self._heartbeat_interval_ms)
            # 8 bytes, no drain: the receive loop drains, and a stuck master is dropped by it.
            offset = self._store.commit_log_max_offset
            writer.write(self._encode_report(offset))
            self._reported = offset

    def _encode_report(self, offset: int) -> bytes:
        if self._epochs is None:
            return encode_offset_report(offset)
        return encode_slave_report(offset)

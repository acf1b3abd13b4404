"""The master's HA service: streams the commit log to slaves, counts their acks.

One :class:`HaMaster` listens on haListenPort. Per slave connection (wire.py for the bytes):

* the first offset the slave reports says where to start: 0 (a brand-new slave) starts at
  the beginning of the master's last commit-log segment, as Java does, so a new slave does not
  copy the whole history; any other offset must lie inside the master's log. A slave *ahead*
  of the master (the master lost data the slave has, e.g. it restarted from an older disk
  image) or behind the master's oldest segment is refused: the connection is closed and the
  refusal is logged and shown in the runtime info. Nothing is truncated automatically
  (docs/replication.md: how to bring such a master back);
* later reports are acks: they must not pass what was sent (garbage otherwise), and the
  highest ack of any slave releases SYNC_MASTER sends waiting for it (group commit: one ack
  answers every send it covers, like one fsync under SYNC_FLUSH). In controller mode under
  ``allAckInSyncStateSet`` (``required_acks`` given) a send waits instead for every replica id
  it names, each matched by the id its AutoSwitch handshake carried;
* a transfer task sends frames of at most 32 KiB from the slave's offset, a header-only
  heartbeat after 5 s without data, and waits for new data otherwise (woken by puts);
* a peer silent for 20 s, a negative or impossible offset, or bytes that do not parse are
  dropped with one log line; the listener keeps serving.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ProtocolError, invariant
from bolide.broker.ha.autoswitch_wire import (
    MasterStreamDecoder,
    encode_master_handshake,
    encode_transfer_header,
)
from bolide.broker.ha.wire import OffsetReportDecoder, encode_frame_header
from bolide.store.api import PutResult, PutStatus
from bolide.store.epoch_file import EpochFile
from bolide.store.file_store import FileMessageStore

__all__ = ["HaMaster", "ReplicationLag", "SlaveLink"]

_log = logging.getLogger("bolide.broker.ha.master")


@dataclass(frozen=True, slots=True)
class ReplicationLag:
    """How far a replica is behind its master: commit-log bytes and the age (ms) of the
    oldest record it lacks (0 and 0 when in step)."""

    bytes_behind: int
    time_behind_ms: int


@dataclass(slots=True)
class SlaveLink:
    """One slave connection as the master sees it."""

    peer: str
    connected_at_ms: int
    start_offset: int | None = None
    """Where the transfer started (None until the slave's first report)."""
    sent_offset: int = 0
    """Next byte to send."""
    ack_offset: int = -1
    """The slave's last report after the first (-1: none yet)."""
    last_read_ms: int = 0
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    writer: asyncio.StreamWriter | None = None
    slave_broker_id: int | None = None
    """Controller mode: the id the slave's handshake named (None: 4.x stream)."""


@dataclass(order=True, slots=True)
class _Waiter:
    end_offset: int
    sequence: int
    future: asyncio.Future[bool] = field(compare=False)


class HaMaster:
    """Serves slaves on ``host``:``port`` (0 picks a free port, see :attr:`port`).

    The intervals default to RocketMQ's (heartbeat 5 s, housekeeping 20 s, slave timeout
    3 s, fall-behind 256 MiB); tests shorten them.

    With ``epochs`` (controller mode) the stream is AutoSwitch's (autoswitch_wire.py): the
    slave's handshake is answered with this store's epoch list, frames carry the epoch and
    ``confirm_offset()`` (default: the commit-log end) and never span two epochs.
    """

    def __init__(
        self,
        store: FileMessageStore,
        *,
        host: str,
        port: int,
        clock: Clock,
        heartbeat_interval_ms: int = limits.HA_HEARTBEAT_INTERVAL_MS,
        housekeeping_interval_ms: int = limits.HA_HOUSEKEEPING_INTERVAL_MS,
        slave_timeout_ms: int = limits.HA_SYNC_SLAVE_TIMEOUT_MS,
        fall_behind_max_bytes: int = limits.HA_SLAVE_FALL_BEHIND_MAX_BYTES,
        epochs: EpochFile | None = None,
        confirm_offset: Callable[[], int] | None = None,
        required_acks: Callable[[], frozenset[int] | None] | None = None,
        on_released: Callable[[], object] | None = None,
    ) -> None:
        self._store = store
        self._epochs = epochs
        self._required_acks = required_acks or (lambda: None)
        self._on_released = on_released
        self._confirm_offset = confirm_offset or (lambda: store.commit_log_max_offset)
        self._host = host
        self._requested_port = port
        self._clock = clock
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._housekeeping_interval_ms = housekeeping_interval_ms
        self._slave_timeout_ms = slave_timeout_ms
        self.fall_behind_max_bytes = fall_behind_max_bytes
        """haSlaveFallbehindMax (settable: tests and operators shrink it)."""
        self._server: asyncio.Server | None = None
        self._links: dict[int, SlaveLink] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiters: list[_Waiter] = []
        self._sequence = itertools.count()
        self.acked_offset = 0
        """push2SlaveMaxOffset: the highest offset any slave acknowledged."""
        self.released_offset = 0
        """Sends ending at or before this offset are acknowledged (their waiters released)."""
        self.refusals = 0
        self.last_refusal = ""
        """Why the last slave was refused (empty: none was)."""

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on haListenPort. Raises OSError when the port cannot be bound."""
        self._server = await asyncio.start_server(
            self._serve, self._host, self._requested_port, limit=limits.HA_READ_BUFFER_BYTES
        )
        self._store.add_arrival_listener(self._on_arrival)
        _log.info("HA service listening on %s:%d", self._host, self.port)

    @property
    def port(self) -> int:
        invariant(self._server is not None, "HA port read before start()")
        assert self._server is not None  # for mypy; the invariant says why
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        """Close the listener and every slave connection; waiting sends time out now."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Closing a connection ends its read loop (end of stream), which ends the rest; the
        # connection tasks belong to asyncio's server and are not cancelled from here.
        for link in list(self._links.values()):
            if link.writer is not None:
                link.writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=limits.REMOTING_STOP_GRACE_MS / 1000)
        if server is not None:
            await server.wait_closed()
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_result(False)
        self._waiters.clear()

    # --- what the broker asks -------------------------------------------------------------

    @property
    def auto_switch(self) -> bool:
        """Whether this master speaks controller mode's stream (it has an epoch file)."""
        return self._epochs is not None

    @property
    def links(self) -> list[SlaveLink]:
        """The connected slaves (started or not)."""
        return list(self._links.values())

    def confirm_offset(self, in_sync_slave_ids: set[int], previous: int) -> int:
        """Controller mode's confirmOffset: the least ack of the connected SyncStateSet
        slaves (acks of 0 ignored), capped by this log's end; ``previous`` when a member
        has no connection; the log's end when the set holds no slave. Consume-queue dispatch
        and the frames' confirm offset follow it (round3-facts §1.5)."""
        master_max = self._store.commit_log_max_offset
        if not in_sync_slave_ids:
            return master_max
        acks: dict[int, int] = {}
        for link in self._links.values():
            if link.slave_broker_id in in_sync_slave_ids and link.ack_offset > 0:
                acks[link.slave_broker_id] = max(acks.get(link.slave_broker_id, 0), link.ack_offset)
        connected = {link.slave_broker_id for link in self._links.values()}
        if not in_sync_slave_ids <= connected:
            return previous
        return min(master_max, *acks.values()) if acks else previous

    def slave_ok(self) -> bool:
        """isSlaveOK: a slave is connected and within the fall-behind bound."""
        if not self._links:
            return False
        behind = self._store.commit_log_max_offset - self.acked_offset
        return behind < self.fall_behind_max_bytes

    def lag(self) -> ReplicationLag:
        """The best connected slave's lag (bytes and time); the whole log when none is."""
        acks = [link.ack_offset for link in self._links.values() if link.ack_offset >= 0]
        master_max = self._store.commit_log_max_offset
        if not acks:
            return ReplicationLag(master_max, self._age_ms(0) if master_max else 0)
        ack = max(acks)
        return ReplicationLag(max(0, master_max - ack), self._age_ms(ack))

    def _age_ms(self, offset: int) -> int:
        if offset >= self._store.commit_log_max_offset:
            return 0
        stored_ms = self._store.store_timestamp_at_offset(offset)
        return max(0, self._clock.now_ms() - stored_ms) if stored_ms >= 0 else 0

    def ack_offset_of(self, broker_id: int) -> int:
        """The highest ack of the replica whose AutoSwitch handshake named ``broker_id``
        (-1: none connected, or none acknowledged yet)."""
        return max(
            (link.ack_offset for link in self._links.values() if link.slave_broker_id == broker_id),
            default=-1,
        )

    def _release_offset(self) -> int:
        """Where waiting sends are acknowledged: the highest ack of any slave, or, with
        ``required_acks`` naming ids, the least ack over those ids (a missing one: -1; none
        named: the log's end)."""
        required = self._required_acks()
        if required is None:
            return self.acked_offset
        if not required:  # no replica to wait for: everything stored is acknowledged
            return self._store.commit_log_max_offset
        return min(self.ack_offset_of(broker_id) for broker_id in required)

    def requirements_changed(self) -> None:
        """The replicas a send waits for changed (a SyncStateSet shrank): release what the
        remaining ones already hold."""
        self._release(self._release_offset())

    async def wait_replicated(self, result: PutResult) -> None:
        """Under SYNC_MASTER: hold a stored put until a slave has its bytes (every required
        replica, see the module docstring). Sets its status to SLAVE_NOT_AVAILABLE (no slave
        connected: answered at once) or FLUSH_SLAVE_TIMEOUT (not acknowledged within the slave
        timeout); leaves PUT_OK otherwise."""
        end_offset = result.commit_log_offset + result.wrote_bytes
        if self._release_offset() >= end_offset:
            return
        if not self.slave_ok():
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
            result.remark = "no slave in sync with this SYNC_MASTER; the message is stored here"
            return
        if len(self._waiters) >= limits.HA_SYNC_WAITERS_MAX_COUNT:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            result.remark = "too many sends wait for the slave"
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._waiters, _Waiter(end_offset, next(self._sequence), future))
        timer = loop.call_later(self._slave_timeout_ms / 1000, _expire, future)
        self._wake_transfers()
        try:
            acknowledged = await future
        finally:
            timer.cancel()
        if not acknowledged:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            result.remark = f"the slave did not acknowledge within {self._slave_timeout_ms} ms"

    # --- acks -----------------------------------------------------------------------------

    def _acked(self, offset: int) -> None:
        self.acked_offset = max(self.acked_offset, offset)
        self._release(self._release_offset())

    def _release(self, offset: int) -> None:
        if offset <= self.released_offset:
            return
        self.released_offset = offset
        if self._on_released is not None:
            self._on_released()  # controller mode: reads stopped at the confirm offset go on
        waiters = self._waiters
        while waiters and waiters[0].end_offset <= offset:
            waiter = heapq.heappop(waiters)
            if not waiter.future.done():
                waiter.future.set_result(True)
        # Timed-out waiters stay in the heap until an ack passes them; drop them in bulk.
        if len(waiters) > 1024 and all(w.future.done() for w in waiters[:64]):
            self._waiters = [w for w in waiters if not w.future.done()]
            heapq.heapify(self._waiters)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        for link in self._links.values():  # _wake_transfers inline: called for every put
            link.wakeup.set()

    def _wake_transfers(self) -> None:
        for link in self._links.values():
            link.wakeup.set()

    # --- one slave ------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        invariant(task is not None, "a connection runs in a task")
        assert task is not None  # for mypy
        self._tasks.add(task)
        peer = _peer_name(writer)
        if len(self._links) >= limits.HA_SLAVE_CONNECTIONS_MAX_COUNT:
            _log.warning("HA: refusing %s, %d slaves already connected", peer, len(self._links))
            writer.close()
            self._tasks.discard(task)
            return
        now = self._clock.monotonic_ms()
        link = SlaveLink(peer, self._clock.now_ms(), last_read_ms=now, writer=writer)
        key = id(link)
        self._links[key] = link
        transfer = asyncio.get_running_loop().create_task(
            self._transfer_loop(link, writer), name=f"ha-transfer-{peer}"
        )
        self._tasks.add(transfer)
        transfer.add_done_callback(self._tasks.discard)
        try:
            await self._read_loop(link, reader)
        except (OSError, asyncio.IncompleteReadError) as error:
            _log.info("HA: slave %s disconnected: %s", peer, error)
        finally:
            self._links.pop(key, None)
            # Not awaited: awaiting a cancelled child here would swallow our own cancellation.
            transfer.cancel()
            writer.close()
            self._tasks.discard(task)
            _log.info("HA: slave %s connection closed", peer)

    async def _read_loop(self, link: SlaveLink, reader: asyncio.StreamReader) -> None:
        decoder: OffsetReportDecoder | MasterStreamDecoder = (
            OffsetReportDecoder() if self._epochs is None else MasterStreamDecoder()
        )
        while True:
            silent_ms = self._clock.monotonic_ms() - link.last_read_ms
            remaining_ms = self._housekeeping_interval_ms - silent_ms
            try:
                # asyncio.timeout, not wait_for: wait_for of 3.11 can swallow a cancellation.
                async with asyncio.timeout(max(0.001, remaining_ms / 1000)):
                    data = await reader.read(limits.HA_READ_BUFFER_BYTES)
            except TimeoutError:
                _log.warning(
                    "HA: slave %s silent for %d ms: dropped",
                    link.peer,
                    self._housekeeping_interval_ms,
                )
                return
            if not data:
                return
            link.last_read_ms = self._clock.monotonic_ms()
            try:
                offset = decoder.feed(data)
            except ProtocolError as error:
                _log.warning("HA: closing %s: %s", link.peer, error)
                return
            if isinstance(decoder, MasterStreamDecoder):
                self._answer_handshake(link, decoder)
            if offset is None:
                continue
            if link.start_offset is None:
                if not self._start(link, offset):
                    return
                continue
            if offset > link.sent_offset:
                _log.warning(
                    "HA: closing %s: it acknowledged %d but only %d was sent (not a slave?)",
                    link.peer,
                    offset,
                    link.sent_offset,
                )
                return
            link.ack_offset = offset
            self._acked(offset)

    def _answer_handshake(self, link: SlaveLink, decoder: MasterStreamDecoder) -> None:
        """Controller mode: answer the slave's handshake once with this store's epochs."""
        if link.slave_broker_id is not None or decoder.handshake is None:
            return
        if self._epochs is None or link.writer is None:
            return
        link.slave_broker_id = decoder.handshake.slave_broker_id
        link.writer.write(
            encode_master_handshake(self._store.commit_log_max_offset, self._epochs.entries)
        )
        _log.info(
            "HA: slave %s (id %d) handshake; epochs %s",
            link.peer,
            link.slave_broker_id,
            self._epochs.entries[-3:],
        )

    def _start(self, link: SlaveLink, reported: int) -> bool:
        """Decide where ``link``'s transfer starts from its first report; False: refused."""
        store = self._store
        master_max = store.commit_log_max_offset
        master_min = store.commit_log_min_offset
        if reported == 0:
            start = master_max - master_max % store.commit_log_segment_bytes
        elif reported > master_max:
            return self._refuse(
                link,
                f"slave {link.peer} has the commit log up to {reported}, ahead of this master's "
                f"{master_max}: it holds data this master lost. Refused; nothing is truncated "
                "(docs/replication.md, 'bringing a master back')",
            )
        elif reported < master_min:
            return self._refuse(
                link,
                f"slave {link.peer} continues at {reported}, before this master's oldest data "
                f"at {master_min}: empty the slave's store to copy again",
            )
        else:
            start = reported
        link.start_offset = link.sent_offset = start
        link.ack_offset = reported
        self._acked(reported)
        link.wakeup.set()
        _log.info("HA: slave %s reported %d; transfer starts at %d", link.peer, reported, start)
        return True

    def _refuse(self, link: SlaveLink, reason: str) -> bool:
        self.refusals += 1
        self.last_refusal = reason
        _log.error("HA: %s", reason)
        return False

    async def _transfer_loop(self, link: SlaveLink, writer: asyncio.StreamWriter) -> None:
        heartbeat_s = self._heartbeat_interval_ms / 1000
        while link.start_offset is None:
            link.wakeup.clear()
            await link.wakeup.wait()
        try:
            while True:
                link.wakeup.clear()
                limit_bytes = self._frame_limit_bytes(link.sent_offset)
                data = self._store.read_commit_log(link.sent_offset, limit_bytes)
                if data is not None:
                    writer.write(self._frame_header(link.sent_offset, len(data)))
                    writer.write(data)
                    link.sent_offset += len(data)
                    await writer.drain()
                    continue
                try:
                    async with asyncio.timeout(heartbeat_s):
                        await link.wakeup.wait()
                except TimeoutError:
                    writer.write(self._frame_header(link.sent_offset, 0))
                    await writer.drain()
        except OSError as error:
            _log.info("HA: transfer to %s stopped: %s", link.peer, error)
            writer.close()

    def _frame_limit_bytes(self, offset: int) -> int:
        """A frame's most bytes from ``offset``: the batch size, and (controller mode) never
        past the end of the epoch holding ``offset``."""
        limit = limits.HA_TRANSFER_BATCH_BYTES
        if self._epochs is None:
            return limit
        for entry in self._epochs.entries:
            if entry.start_offset > offset:
                return min(limit, entry.start_offset - offset)
        return limit

    def _frame_header(self, offset: int, size: int) -> bytes:
        if self._epochs is None:
            return encode_frame_header(offset, size)
        entry = self._epochs.entry_for(offset)
        epoch, start = (entry.epoch, entry.start_offset) if entry is not None else (0, 0)
        confirm = min(self._confirm_offset(), self._store.commit_log_max_offset)
        return encode_transfer_header(offset, size, epoch, start, confirm)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


def _peer_name(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)

"""SlaveSynchronize: a slave copies its master's tables 3 s after start, then every 10 s.

============================================ ============================================
request (to the master's remoting port)      what the slave does with the answer
============================================ ============================================
GET_ALL_TOPIC_CONFIG (21)                    replaces topics.json when the data version
                                             differs
GET_ALL_CONSUMER_OFFSET (43)                 merges into consumerOffset.json (per key)
GET_ALL_DELAY_OFFSET (45)                    writes delayOffset.json and reloads it
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)       replaces subscriptionGroup.json when the data
                                             version differs
============================================ ============================================

So a slave's consumer offsets lag its master's by up to 10 s (plus the master's own 5 s
persistence does not matter: the master answers from memory): a consumer that fails over to
the slave, or a slave promoted later, re-delivers at most that window.

:class:`ReplicationHandlers` answers GET_ALL_CONSUMER_OFFSET (43) on every broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError
from bolide.base.fileio import atomic_write_with_backup
from bolide.base.service import CrashHandler, Service
from bolide.broker.context import BrokerContext
from bolide.broker.offsets import decode_offset_table
from bolide.broker.outbound import master_metadata_request
from bolide.protocol.bodies import BodyError, SubscriptionGroupWrapper, TopicConfigSerializeWrapper
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher
from bolide.store.config_files import MetadataFile

__all__ = ["ReplicationHandlers", "SlaveSynchronize"]

_log = logging.getLogger("bolide.broker.ha.sync")


class ReplicationHandlers:
    """GET_ALL_CONSUMER_OFFSET (43): the consumerOffset.json document, from memory."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(
            RequestCode.GET_ALL_CONSUMER_OFFSET, self.get_all_consumer_offset, family="admin"
        )

    async def get_all_consumer_offset(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=self._context.offsets.encode())


class SlaveSynchronize:
    """The slave's copy loop; ``master_address()`` is the master's remoting address (None
    while the name server has not named it)."""

    def __init__(
        self,
        context: BrokerContext,
        pool: ClientPool,
        master_address: Callable[[], str | None],
        *,
        clock: Clock,
        interval_ms: int = limits.HA_SLAVE_SYNC_INTERVAL_MS,
        initial_delay_ms: int = limits.HA_SLAVE_SYNC_INITIAL_DELAY_MS,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._context = context
        self._pool = pool
        self._master_address = master_address
        self.sync_count = 0
        """Rounds in which every table was copied."""
        self._copying = asyncio.Lock()
        """One copy at a time: two would write the same files through one temporary name."""
        self._service = Service(
            "ha-slave-sync",
            self._step,
            interval_ms=interval_ms,
            clock=clock,
            initial_delay_ms=initial_delay_ms,
            on_crash=on_crash,
        )

    def start(self) -> None:
        self._service.start()

    async def stop(self) -> None:
        await self._service.stop()

    def sync_soon(self) -> None:
        """Copy now (the master address just became known)."""
        self._service.wakeup()

    async def _step(self) -> None:
        address = self._master_address()
        if address is None:
            return
        try:
            await self.sync_all(address)
        except (BolideError, BodyError, ValueError, OSError) as error:
            _log.warning("slave sync from master %s failed: %s", address, error)

    async def sync_all(self, address: str) -> None:
        """Copy the four tables from the master at ``address`` once (after a copy in
        progress, the periodic one included).

        Raises:
            BolideError: the master could not be reached or refused a request.
            BodyError, ValueError: an answer did not parse.
            OSError: a file could not be written.
        """
        async with self._copying:
            await self._copy(address)

    async def _copy(self, address: str) -> None:
        context = self._context
        topics = TopicConfigSerializeWrapper.from_json(
            await self._fetch(address, RequestCode.GET_ALL_TOPIC_CONFIG)
        )
        if context.topics.replace_from_master(topics.topic_config_table, topics.data_version):
            await context.topics.persist()
            _log.info("slave sync: topics replaced by the master's (%d)", len(context.topics))
        offsets = decode_offset_table(
            await self._fetch(address, RequestCode.GET_ALL_CONSUMER_OFFSET)
        )
        context.offsets.merge_from_master(offsets)
        delay = await self._fetch(address, RequestCode.GET_ALL_DELAY_OFFSET)
        if context.schedule is not None:
            path = context.config.metadata_path(MetadataFile.DELAY_OFFSETS)
            await asyncio.to_thread(atomic_write_with_backup, path, delay)
            context.schedule.load()
        groups = SubscriptionGroupWrapper.from_json(
            await self._fetch(address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        )
        if context.groups.replace_from_master(groups.subscription_group_table, groups.data_version):
            await context.groups.persist()
        self.sync_count += 1

    async def _fetch(self, address: str, code: RequestCode) -> bytes:
        response = await self._pool.invoke(
            address, master_metadata_request(code), limits.CLIENT_API_TIMEOUT_MS
        )
        if response.code != ResponseCode.SUCCESS:
            raise BolideError(
                f"master answered {code.name} with {response.code}: {response.remark}"
            )
        return bytes(response.body)

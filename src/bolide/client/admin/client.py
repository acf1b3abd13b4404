"""AdminClient: the operations of mqadmin and the RocketMQ dashboard, as coroutines.

One object per session: it keeps a connection pool to the name servers and brokers and asks
them with the admin requests (:mod:`bolide.client.rpc.admin`); the connections, fan-out and
single-request queries are its base class :class:`.session.AdminSession`, the multi-step
operations live in :mod:`.operations`, :mod:`.progress` and :mod:`.messages`. It works
against Bolide and against Apache RocketMQ 4.x brokers. Used by the ``bolide`` command line
and the dashboard; ``bolide.AdminClient`` is its blocking facade.

::

    async with AdminClient("127.0.0.1:9876") as admin:
        await admin.create_topic("orders", queue_count=8)
        progress = await admin.group_progress("billing")
        await admin.reset_offset("billing", "orders", RESET_TO_EARLIEST)

Which brokers an operation asks: topic operations the masters in the topic's route (creation:
every master, or those of ``cluster`` / ``brokers``); group operations every master of every
cluster the name servers know (a group lives on every broker its consumers talk to). Requests
fan out with at most ADMIN_IN_FLIGHT_MAX_REQUESTS in flight. Every request has the client's
``timeout_ms`` (default ADMIN_REQUEST_TIMEOUT_MS, 5 s).

Errors: :class:`~bolide.base.errors.NameServerUnavailableError` when no name server answers,
:class:`~bolide.base.errors.TopicNotFoundError` / :class:`~bolide.base.errors.GroupNotFoundError`
/ :class:`~bolide.base.errors.MessageNotFoundError` for what does not exist,
:class:`~bolide.base.errors.RemoteError` for a broker's refusal, transport errors for a
broker that cannot be reached.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence

from bolide.base import limits
from bolide.base.errors import BolideError, GroupNotFoundError
from bolide.client.admin import maintenance, messages, operations, progress, transactions
from bolide.client.admin.session import AdminSession
from bolide.client.admin.views import (
    DEFAULT_QUEUE_COUNT,
    RESET_TO_LATEST,
    BrokerSummary,
    GroupProgress,
    GroupSummary,
    ProgressCallback,
    QueueStatus,
    ResendOutcome,
    ResetResult,
)
from bolide.client.rpc import admin as requests
from bolide.client.rpc.stats_history import get_stats_history
from bolide.protocol.bodies import (
    PERM_READ,
    PERM_WRITE,
    Connection,
    ConsumeStats,
    SubscriptionGroupConfig,
    TopicConfig,
)
from bolide.protocol.bodies.queue import MessageQueue
from bolide.protocol.bodies.stats_history import GetStatsHistoryRequestHeader, StatsHistory
from bolide.protocol.bodies.transaction import HalfMessageList
from bolide.protocol.codes import RequestCode
from bolide.protocol.headers import CloneGroupOffsetRequestHeader
from bolide.protocol.message import MessageExt

__all__ = ["AdminClient"]


class AdminClient(AdminSession):
    """Administration of a Bolide (or RocketMQ 4.x) cluster reached through ``namesrv``
    (``"host:port;host:port"``). See the module docstring. With ``namespace`` (Java's
    withNamespace, as the producer's and consumers') every topic and group an operation is
    given is taken in that namespace; listings of the whole cluster keep the stored names.

    Raises ConfigError for a malformed name-server list or namespace.
    """

    async def list_brokers(self) -> list[BrokerSummary]:
        """Every broker address of every cluster, with version and today's put/get counts
        (a broker that does not answer has ``error`` set)."""
        return await operations.list_brokers(self)

    async def create_topic(
        self,
        topic: str,
        *,
        queue_count: int = DEFAULT_QUEUE_COUNT,
        read_queue_count: int | None = None,
        write_queue_count: int | None = None,
        perm: int = PERM_READ | PERM_WRITE,
        order: bool = False,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
        attributes: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Create (or replace) ``topic`` on the given brokers, else on every master of
        ``cluster``, else on every master; returns the broker names. Each broker registers
        the topic with the name servers before it answers.

        Raises RemoteError (an invalid or system topic), NotFoundError (unknown broker or
        cluster), transport errors.
        """
        topic = self.ns(topic)
        targets = await self.targets(cluster, brokers)
        config = TopicConfig(
            topic,
            read_queue_count if read_queue_count is not None else queue_count,
            write_queue_count if write_queue_count is not None else queue_count,
            perm,
            order=order,
            attributes=tuple(sorted((attributes or {}).items())),
        )
        await self._ask_each(
            targets, requests.create_or_update_topic, config, f"creating topic {topic!r}"
        )
        return sorted(targets)

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the brokers holding it (of ``cluster`` when given) and from
        every name server; returns the broker names. Raises TopicNotFoundError when no broker
        holds it, RemoteError (a system topic)."""
        topic = self.ns(topic)
        return await operations.delete_topic(self, topic, cluster)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Every queue of ``topic``: min/max offset and last store time. Raises
        TopicNotFoundError."""
        topic = self.ns(topic)
        masters = await self.topic_masters(topic)
        tables = await self._ask_each(
            masters, requests.get_topic_stats, topic, f"reading the status of {topic!r}"
        )
        rows = [
            QueueStatus(queue, item.min_offset, item.max_offset, item.last_update_timestamp_ms)
            for table in tables.values()
            for queue, item in table.offset_table.items()
        ]
        return sorted(rows, key=lambda row: row.queue)

    async def topic_consumer_groups(self, topic: str) -> list[str]:
        """The groups consuming ``topic`` (subscribed now or holding offsets), sorted; a
        group in the client's namespace is named without it."""
        topic = self.ns(topic)
        masters = await self.topic_masters(topic)
        lists = await self._ask_each(
            masters, requests.query_topic_consumers, topic, f"finding the consumers of {topic!r}"
        )
        return sorted({self.bare(group) for groups in lists.values() for group in groups})

    async def list_groups(self, *, include_system: bool = False) -> list[GroupSummary]:
        """Every subscription group with the brokers holding it and its online clients;
        the brokers' built-in groups only with ``include_system``."""
        return await operations.list_groups(self, include_system)

    async def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> list[str]:
        """Create (or replace) a subscription group on the given brokers, else those of
        ``cluster``, else every master; returns the broker names."""
        config = dataclasses.replace(config, group_name=self.ns(config.group_name))
        targets = await self.targets(cluster, brokers)
        await self._ask_each(
            targets,
            requests.create_or_update_group,
            config,
            f"creating group {config.group_name!r}",
        )
        return sorted(targets)

    async def update_group(self, group: str, **changes: object) -> list[str]:
        """Change settings (SubscriptionGroupConfig field names, e.g. ``retry_max_times=3``)
        of an existing group on every broker holding it; returns the broker names. Raises
        GroupNotFoundError, RemoteError; TypeError for an unknown field name (a bug)."""
        group = self.ns(group)
        configs = (await self.group_configs()).get(group)
        if not configs:
            raise GroupNotFoundError(f"no broker has the subscription group {group!r}")
        masters = await self.master_addresses()
        updated = {
            name: dataclasses.replace(config, **changes)  # type: ignore[arg-type]
            for name, config in configs.items()
        }
        await self._on_each(
            {name: masters[name] for name in updated if name in masters},
            lambda name, address: requests.create_or_update_group(
                self.pool, address, updated[name], self.timeout_ms
            ),
            f"updating group {group!r}",
        )
        return sorted(updated)

    async def delete_group(
        self, group: str, *, remove_offsets: bool = True, cluster: str | None = None
    ) -> list[str]:
        """Delete the subscription group (and, by default, its offsets) from every master of
        ``cluster`` or of every cluster; returns the brokers that had it. Raises
        GroupNotFoundError when none had it."""
        group = self.ns(group)
        await self.ensure_group(group)
        configs = (await self.group_configs()).get(group, {})
        masters = await self.master_addresses(cluster=cluster)
        holders = {name: address for name, address in masters.items() if name in configs}
        await self._on_each(
            masters,
            lambda _name, address: requests.delete_group(
                self.pool, address, group, self.timeout_ms, remove_offsets=remove_offsets
            ),
            f"deleting group {group!r}",
        )
        return sorted(holders)

    async def producer_connections(self, group: str) -> list[Connection]:
        """The producer group's online clients over every master (empty when none)."""
        group = self.ns(group)
        masters = await self.master_addresses()
        results = await self.fan_out(
            [
                requests.get_producer_connections(self.pool, address, group, self.timeout_ms)
                for address in masters.values()
            ]
        )
        clients: dict[str, Connection] = {}
        for result in results:
            if isinstance(result, BolideError):
                continue
            for client in result.connection_set:
                clients.setdefault(client.client_id, client)
        return [clients[key] for key in sorted(clients)]

    async def group_progress(self, group: str, *, topic: str | None = None) -> GroupProgress:
        """Per queue broker offset, consumer offset, lag and the owning client, over every
        broker; for a broadcasting group the offsets each client reports. Raises
        GroupNotFoundError when no broker knows the group."""
        topic = None if topic is None else self.ns(topic)
        return await progress.group_progress(self, self.ns(group), topic)

    async def ensure_group(self, group: str) -> None:
        """Return when some broker has ``group`` (settings, an online client or committed
        offsets); raise GroupNotFoundError otherwise."""
        group = self.ns(group)
        if group in await self.group_configs():
            return
        if await self.consumer_connections(group) is not None:
            return
        masters = await self.master_addresses()
        results = await self.fan_out(
            [
                requests.get_consume_stats(self.pool, address, group, self.timeout_ms)
                for address in masters.values()
            ]
        )
        if any(isinstance(result, ConsumeStats) and result.offset_table for result in results):
            return
        raise GroupNotFoundError(
            f"no broker knows the consumer group {group!r}: no subscription group, "
            "no online consumer, no committed offset"
        )

    async def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> ResetResult:
        """Move ``group`` on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (RESET_TO_EARLIEST, RESET_TO_LATEST, or ms since the epoch) on every
        broker holding the topic. The brokers store the new offsets and tell the online
        consumers, each in the form its language reads; an offline group finds them when it
        starts. Without ``force`` a queue only moves backwards.

        Raises TopicNotFoundError, GroupNotFoundError (no broker knows the group).
        """
        return await operations.reset_offset(
            self, self.ns(group), self.ns(topic), timestamp_ms, force
        )

    async def clone_offsets(
        self, source_group: str, destination_group: str, *, topic: str | None = None
    ) -> list[str]:
        """Copy ``source_group``'s offsets (of ``topic``, or all) to ``destination_group`` on
        every master; returns the broker names."""
        masters = await self.master_addresses()
        header = CloneGroupOffsetRequestHeader(
            self.ns(source_group),
            self.ns(destination_group),
            None if topic is None else self.ns(topic),
            True,
        )
        await self._ask_each(
            masters, requests.clone_group_offset, header, f"cloning the offsets of {source_group!r}"
        )
        return sorted(masters)

    async def get_message(self, msg_id: str, *, topic: str | None = None) -> list[MessageExt]:
        """The message(s) with ``msg_id``: an offset message id, or with ``topic`` a message
        id (UNIQ_KEY). Raises MessageNotFoundError."""
        return await messages.get_message(self, msg_id, None if topic is None else self.ns(topic))

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_count: int = limits.ADMIN_QUERY_BY_KEY_MAX_MESSAGES,
        unique: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS hold ``key`` (``unique``: whose UNIQ_KEY is
        ``key``) stored in [begin_ms, end_ms], newest first, at most ``max_count``."""
        return await messages.query_by_key(
            self, self.ns(topic), key, begin_ms, end_ms, max_count, unique
        )

    async def query_by_time(
        self,
        topic: str,
        begin_ms: int,
        end_ms: int,
        *,
        max_count: int = limits.ADMIN_QUERY_BY_TIME_MAX_MESSAGES,
        on_progress: ProgressCallback | None = None,
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored in [begin_ms, end_ms), oldest first per queue, at most
        ``max_count``; ``on_progress(queues done, queues)`` follows the reading."""
        return await messages.query_by_time(
            self, self.ns(topic), begin_ms, end_ms, max_count, on_progress
        )

    def tail(
        self, topic: str, *, start_ms: int = RESET_TO_LATEST, expression: str = "*"
    ) -> AsyncGenerator[MessageExt, None]:
        """Messages of ``topic`` as they arrive, from ``start_ms`` (RESET_TO_LATEST: only new
        ones; RESET_TO_EARLIEST: everything stored), matching the tag ``expression``."""
        return messages.tail(self, self.ns(topic), start_ms, expression)

    async def resend_dead_letters(
        self,
        group: str,
        *,
        msg_ids: Sequence[str] = (),
        begin_ms: int = 0,
        end_ms: int | None = None,
        max_count: int = limits.ADMIN_RESEND_MAX_MESSAGES,
        on_progress: ProgressCallback | None = None,
    ) -> list[ResendOutcome]:
        """Send dead letters of ``group`` (those with ``msg_ids``, else those stored in
        [begin_ms, end_ms]) back to the group through its retry topic: only that group
        consumes them again, with their original topic and a fresh retry count."""
        return await messages.resend_dead_letters(
            self, self.ns(group), msg_ids, begin_ms, end_ms, max_count, on_progress
        )

    async def consumer_status(
        self, group: str, topic: str, *, client_id: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """Client id -> the committed offsets of ``topic`` each online client of ``group``
        (or only ``client_id``) reports itself (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, 223).
        Raises RemoteError SYSTEM_ERROR when no client of the group is online."""
        return await maintenance.consumer_status(self, self.ns(group), self.ns(topic), client_id)

    async def correction_offsets(
        self, topic: str, compare_group: str, *, filter_groups: Iterable[str] = ()
    ) -> dict[str, dict[int, int]]:
        """Broker name -> queue id -> the lowest committed offset of ``topic``'s groups but
        ``filter_groups``, or Java's Long.MAX_VALUE where ``compare_group`` is behind it
        (QUERY_CORRECTION_OFFSET, 308). Raises TopicNotFoundError."""
        return await maintenance.correction_offsets(
            self, self.ns(topic), self.ns(compare_group), [self.ns(g) for g in filter_groups]
        )

    async def clean_expired_consume_queues(
        self, *, cluster: str | None = None, brokers: Iterable[str] = ()
    ) -> dict[str, str]:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306) on the given brokers, else every master of
        ``cluster``, else every master: destroy consume queues whose messages all expired.
        Broker name -> what it did."""
        code = RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE
        return await maintenance.run_maintenance(self, code, cluster, brokers)

    async def clean_unused_topics(
        self, *, cluster: str | None = None, brokers: Iterable[str] = ()
    ) -> dict[str, str]:
        """CLEAN_UNUSED_TOPIC (316): destroy the consume queues of topics a broker no longer
        has a configuration for. Targets and answer as :meth:`clean_expired_consume_queues`."""
        code = RequestCode.CLEAN_UNUSED_TOPIC
        return await maintenance.run_maintenance(self, code, cluster, brokers)

    async def delete_expired_commit_log(
        self, *, cluster: str | None = None, brokers: Iterable[str] = ()
    ) -> dict[str, str]:
        """DELETE_EXPIRED_COMMITLOG (329): delete commit-log segments older than
        fileReservedTime now, whatever the hour. Targets and answer as
        :meth:`clean_expired_consume_queues`."""
        code = RequestCode.DELETE_EXPIRED_COMMITLOG
        return await maintenance.run_maintenance(self, code, cluster, brokers)

    # ---- stats history -----------------------------------------------------------------------

    async def stats_history(
        self, address: str, topic: str, *, group: str | None = None
    ) -> StatsHistory:
        """The broker at ``address``'s per-minute history over the last hour: ``topic``'s
        put count and TPS, or with ``group`` that group's lag, get count and TPS on it.

        Raises RemoteError TOPIC_NOT_EXIST when the broker lacks the topic."""
        header = GetStatsHistoryRequestHeader(
            self.ns(topic), None if group is None else self.ns(group)
        )
        return await get_stats_history(self.pool, address, header, self.timeout_ms)

    # ---- transactions ------------------------------------------------------------------------

    async def pending_transactions(
        self,
        *,
        group: str | None = None,
        topic: str | None = None,
        max_count: int | None = None,
        given_up: bool = False,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> dict[str, HalfMessageList]:
        """Broker name -> its undecided transactions (oldest first, with age and check count;
        only ``group``'s / ``topic``'s when given) and transaction counters. With
        ``given_up``, the newest messages given up to TRANS_CHECK_MAX_TIME_TOPIC instead."""
        return await transactions.pending_transactions(
            self,
            group=None if group is None else self.ns(group),
            topic=None if topic is None else self.ns(topic),
            max_count=max_count,
            given_up=given_up,
            cluster=cluster,
            brokers=brokers,
        )

    async def resume_transaction(self, offset_msg_id: str) -> str:
        """Have the broker check a given-up transaction again (RESUME_CHECK_HALF_MESSAGE);
        ``offset_msg_id`` names it and its broker. Returns the broker address.

        Raises InvalidMessageError for an id that is no offset message id; RemoteError when
        the broker refuses (not a given-up message, already pending or committed)."""
        return await transactions.resume_transaction(self, offset_msg_id)

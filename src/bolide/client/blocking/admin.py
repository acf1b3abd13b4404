"""``bolide.AdminClient``: the blocking facade of :class:`bolide.client.admin.AdminClient`.

Every method runs the async core on a private event-loop thread
(:class:`~bolide.client.blocking.loop.LoopThread`) and blocks until it is done; arguments,
results and errors are the core's. ``with AdminClient("127.0.0.1:9876") as admin:`` starts
and closes it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Iterable, Mapping, Sequence

from bolide.base import limits
from bolide.client.admin.client import AdminClient as AsyncAdminClient
from bolide.client.admin.views import (
    RESET_TO_LATEST,
    BrokerSummary,
    GroupProgress,
    GroupSummary,
    ProgressCallback,
    QueueStatus,
    ResendOutcome,
    ResetResult,
)
from bolide.client.blocking.loop import BlockingFacade
from bolide.client.message import SendResult
from bolide.client.security import TlsClientSettings
from bolide.protocol.bodies import (
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumerRunningInfo,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicRouteData,
)
from bolide.protocol.bodies.transaction import HalfMessageList
from bolide.protocol.message import Message, MessageExt

__all__ = ["AdminClient"]


class AdminClient(BlockingFacade[AsyncAdminClient]):
    """Blocking administration client; see :class:`bolide.client.admin.AdminClient`."""

    def __init__(
        self,
        namesrv: str | Iterable[str],
        *,
        timeout_ms: int = limits.ADMIN_REQUEST_TIMEOUT_MS,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: TlsClientSettings | bool | None = None,
        namespace: str | None = None,
    ) -> None:
        core = AsyncAdminClient(
            namesrv,
            timeout_ms=timeout_ms,
            access_key=access_key,
            secret_key=secret_key,
            tls=tls,
            namespace=namespace,
        )
        super().__init__(core, "bolide-admin")

    def close(self) -> None:
        """Close the connections and stop the loop thread. Idempotent."""
        self._finish(self._core.close)

    def _close(self) -> None:
        self.close()

    # ---- clusters and topics -----------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        return self._runner.run(self._core.cluster_info())

    def list_brokers(self) -> list[BrokerSummary]:
        return self._runner.run(self._core.list_brokers())

    def broker_runtime_info(self, address: str) -> dict[str, str]:
        return self._runner.run(self._core.broker_runtime_info(address))

    def topic_list(self) -> list[str]:
        return self._runner.run(self._core.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._runner.run(self._core.topic_route(topic))

    def create_topic(
        self,
        topic: str,
        *,
        queue_count: int = 8,
        perm: int = 6,
        order: bool = False,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
        attributes: Mapping[str, str] | None = None,
    ) -> list[str]:
        coroutine = self._core.create_topic(
            topic,
            queue_count=queue_count,
            perm=perm,
            order=order,
            cluster=cluster,
            brokers=brokers,
            attributes=attributes,
        )
        return self._runner.run(coroutine)

    def update_topic(
        self,
        topic: str,
        *,
        read_queue_count: int | None = None,
        write_queue_count: int | None = None,
        perm: int | None = None,
        order: bool | None = None,
    ) -> list[str]:
        coroutine = self._core.update_topic(
            topic,
            read_queue_count=read_queue_count,
            write_queue_count=write_queue_count,
            perm=perm,
            order=order,
        )
        return self._runner.run(coroutine)

    def topic_configs(self, topic: str) -> dict[str, TopicConfig]:
        return self._runner.run(self._core.topic_configs(topic))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        return self._runner.run(self._core.delete_topic(topic, cluster=cluster))

    def topic_status(self, topic: str) -> list[QueueStatus]:
        return self._runner.run(self._core.topic_status(topic))

    def topic_consumer_groups(self, topic: str) -> list[str]:
        return self._runner.run(self._core.topic_consumer_groups(topic))

    # ---- groups and offsets ------------------------------------------------------------------

    def list_groups(self, *, include_system: bool = False) -> list[GroupSummary]:
        return self._runner.run(self._core.list_groups(include_system=include_system))

    def create_group(
        self,
        config: SubscriptionGroupConfig,
        *,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> list[str]:
        return self._runner.run(self._core.create_group(config, cluster=cluster, brokers=brokers))

    def update_group(self, group: str, **changes: object) -> list[str]:
        return self._runner.run(self._core.update_group(group, **changes))

    def delete_group(
        self, group: str, *, remove_offsets: bool = True, cluster: str | None = None
    ) -> list[str]:
        coroutine = self._core.delete_group(group, remove_offsets=remove_offsets, cluster=cluster)
        return self._runner.run(coroutine)

    def consumer_connections(self, group: str) -> ConsumerConnection | None:
        return self._runner.run(self._core.consumer_connections(group))

    def producer_connections(self, group: str) -> list[Connection]:
        return self._runner.run(self._core.producer_connections(group))

    def consumer_running_info(self, group: str, client_id: str) -> ConsumerRunningInfo:
        return self._runner.run(self._core.consumer_running_info(group, client_id))

    def group_progress(self, group: str, *, topic: str | None = None) -> GroupProgress:
        return self._runner.run(self._core.group_progress(group, topic=topic))

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> ResetResult:
        coroutine = self._core.reset_offset(group, topic, timestamp_ms, force=force)
        return self._runner.run(coroutine)

    def clone_offsets(
        self, source_group: str, destination_group: str, *, topic: str | None = None
    ) -> list[str]:
        coroutine = self._core.clone_offsets(source_group, destination_group, topic=topic)
        return self._runner.run(coroutine)

    # ---- messages ----------------------------------------------------------------------------

    def pending_transactions(
        self,
        *,
        group: str | None = None,
        topic: str | None = None,
        max_count: int | None = None,
        given_up: bool = False,
        cluster: str | None = None,
        brokers: Iterable[str] = (),
    ) -> dict[str, HalfMessageList]:
        return self._run(
            self._core.pending_transactions(
                group=group,
                topic=topic,
                max_count=max_count,
                given_up=given_up,
                cluster=cluster,
                brokers=brokers,
            )
        )

    def resume_transaction(self, offset_msg_id: str) -> str:
        return self._run(self._core.resume_transaction(offset_msg_id))

    def send_message(self, message: Message) -> SendResult:
        return self._runner.run(self._core.send_message(message))

    def get_message(self, msg_id: str, *, topic: str | None = None) -> list[MessageExt]:
        return self._runner.run(self._core.get_message(msg_id, topic=topic))

    def query_by_key(
        self, topic: str, key: str, *, max_count: int = limits.ADMIN_QUERY_BY_KEY_MAX_MESSAGES
    ) -> list[MessageExt]:
        return self._runner.run(self._core.query_by_key(topic, key, max_count=max_count))

    def query_by_time(
        self,
        topic: str,
        begin_ms: int,
        end_ms: int,
        *,
        max_count: int = limits.ADMIN_QUERY_BY_TIME_MAX_MESSAGES,
        on_progress: ProgressCallback | None = None,
    ) -> list[MessageExt]:
        coroutine = self._core.query_by_time(
            topic, begin_ms, end_ms, max_count=max_count, on_progress=on_progress
        )
        return self._runner.run(coroutine)

    def tail(
        self, topic: str, *, start_ms: int = RESET_TO_LATEST, expression: str = "*"
    ) -> Generator[MessageExt, None, None]:
        """Messages as they arrive; stop iterating (or close the generator) to end it."""
        stream = self._core.tail(topic, start_ms=start_ms, expression=expression)
        try:
            while True:
                try:
                    yield self._runner.run(_next(stream))
                except StopAsyncIteration:
                    return
        finally:
            self._runner.run(stream.aclose())

    def resend_dead_letters(
        self,
        group: str,
        *,
        msg_ids: Sequence[str] = (),
        begin_ms: int = 0,
        end_ms: int | None = None,
    ) -> list[ResendOutcome]:
        coroutine = self._core.resend_dead_letters(
            group, msg_ids=msg_ids, begin_ms=begin_ms, end_ms=end_ms
        )
        return self._runner.run(coroutine)


async def _next(stream: AsyncGenerator[MessageExt, None]) -> MessageExt:
    return await anext(stream)

"""In-memory peers for the consumer parts' unit tests: each implements one of the narrow
protocols the parts talk through (offset broker, rebalance client, send-back, pull client,
queue owner) and records what it was asked, so a test can check the exact calls."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from bolide.base.errors import ConnectionClosedError, RemoteError
from bolide.client.consumer.process_queue import ProcessQueue
from bolide.client.rpc import PullResult
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import remote_error
from bolide.protocol.headers import PullMessageRequestHeader
from bolide.protocol.message import Message, MessageExt


def queues(topic: str, count: int, broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, queue_id) for queue_id in range(count)]


def message(topic: str, queue_id: int, offset: int, *, tags: str | None = None) -> MessageExt:
    properties = {"TAGS": tags} if tags else {}
    properties["UNIQ_KEY"] = f"ID-{topic}-{queue_id}-{offset}"
    return MessageExt(
        topic,
        f"body-{offset}".encode(),
        properties=properties,
        queue_id=queue_id,
        queue_offset=offset,
        commit_log_offset=1000 + offset,
        store_host=("127.0.0.1", 10911),
    )


@dataclass
class MemoryOffsetBroker:
    """Committed offsets as a broker would keep them."""

    committed: dict[MessageQueue, int] = field(default_factory=dict)
    updates: list[tuple[MessageQueue, int]] = field(default_factory=list)
    unreachable: bool = False
    error_code: int | None = None

    async def query_consumer_offset(self, queue: MessageQueue) -> int | None:
        self._fail_if_asked()
        return self.committed.get(queue)

    async def update_consumer_offset_oneway(self, queue: MessageQueue, offset: int) -> None:
        if self.unreachable:
            raise ConnectionClosedError("broker unreachable")
        self.updates.append((queue, offset))
        self.committed[queue] = offset

    def _fail_if_asked(self) -> None:
        if self.unreachable:
            raise ConnectionClosedError("broker unreachable")
        if self.error_code is not None:
            raise remote_error(self.error_code, "refused")


@dataclass
class MemoryRebalanceClient:
    """Routes, group members and queue bounds as name servers and brokers would give them."""

    client_id: str = "10.0.0.1@1#a"
    routes: dict[str, list[MessageQueue]] = field(default_factory=dict)
    members: list[str] = field(default_factory=list)
    max_offsets: dict[MessageQueue, int] = field(default_factory=dict)
    offsets_by_time: dict[tuple[MessageQueue, int], int] = field(default_factory=dict)
    broker_down: bool = False
    searches: list[tuple[MessageQueue, int]] = field(default_factory=list)

    async def subscribe_queues(self, topic: str) -> list[MessageQueue] | None:
        route = self.routes.get(topic)
        return None if route is None else list(route)

    async def find_consumer_ids(self, topic: str, group: str) -> list[str] | None:
        if self.broker_down:
            return None
        return list(self.members)

    async def max_offset(self, queue: MessageQueue) -> int:
        if self.broker_down:
            raise ConnectionClosedError("broker down")
        return self.max_offsets.get(queue, 0)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        if self.broker_down:
            raise ConnectionClosedError("broker down")
        self.searches.append((queue, timestamp_ms))
        return self.offsets_by_time[(queue, timestamp_ms)]


@dataclass
class RecordingOwner:
    """A queue owner that records what the rebalance told it."""

    added: list[tuple[MessageQueue, int]] = field(default_factory=list)
    removed: list[MessageQueue] = field(default_factory=list)
    assignments: list[tuple[str, frozenset[MessageQueue]]] = field(default_factory=list)

    def on_queue_added(
        self, queue: MessageQueue, process_queue: ProcessQueue, next_offset: int
    ) -> None:
        self.added.append((queue, next_offset))

    def on_queue_removed(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        assert process_queue.dropped
        self.removed.append(queue)

    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        self.assignments.append((topic, assigned))


@dataclass
class MemorySendBack:
    """Send-back that records calls; ``broker_fails`` / ``resend_fails`` make either fail."""

    sent_back: list[tuple[str, str, int, int]] = field(default_factory=list)
    resent: list[Message] = field(default_factory=list)
    broker_fails: bool = False
    resend_fails: bool = False

    async def send_back(
        self, message: MessageExt, broker_name: str, delay_level: int, max_reconsume_times: int
    ) -> None:
        if self.broker_fails:
            raise remote_error(3, "request type 36 not supported")
        self.sent_back.append((message.msg_id, broker_name, delay_level, max_reconsume_times))

    async def send_to_retry_topic(self, message: Message) -> None:
        if self.resend_fails:
            raise ConnectionClosedError("no broker")
        self.resent.append(message)


@dataclass
class ScriptedPullClient:
    """Answers pulls from a script of results (or errors); a pull beyond the script parks
    until the test adds an answer, as a long poll does."""

    answers: deque[PullResult | Exception] = field(default_factory=deque)
    requests: list[PullMessageRequestHeader] = field(default_factory=list)
    _more: asyncio.Event = field(default_factory=asyncio.Event)

    def answer(self, *results: PullResult | Exception) -> None:
        self.answers.extend(results)
        self._more.set()

    async def pull_message(
        self, queue: MessageQueue, header: PullMessageRequestHeader, timeout_ms: int
    ) -> PullResult:
        self.requests.append(header)
        while not self.answers:
            self._more.clear()
            await self._more.wait()
        answer = self.answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer


def remote(code: int) -> RemoteError:
    return remote_error(code, "scripted")

"""The canonical example of the README (producer half), blocking and with bolide.aio, and the
blocking facade's own behaviour. The cluster runs on its own loop thread, as a server would."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import bolide
import bolide.aio
from bolide.base.errors import InvalidMessageError, InvariantViolationError, MessageTooLargeError
from bolide.client.blocking.loop import LoopThread
from bolide.testing.cluster import Cluster
from tests.client.conftest import pull_all

pytestmark = pytest.mark.timeout(60)


class ClusterThread:
    """A cluster on a private loop, plus an aio client there to read what was stored."""

    def __init__(self, root: Path) -> None:
        self.thread = LoopThread("test-cluster")
        self.cluster = Cluster(root)
        self.thread.run(self.cluster.start())
        self.reader = bolide.aio.Producer("reader", namesrv=self.cluster.namesrv_address)
        self.thread.run(self.reader.start())

    def stored(self, result: bolide.SendResult) -> list[bolide.MessageExt]:
        return self.thread.run(pull_all(self.reader.instance, result.queue, result.queue_offset))

    def close(self) -> None:
        try:
            self.thread.run(self.reader.shutdown())
            self.thread.run(self.cluster.stop())
        finally:
            self.thread.stop()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[ClusterThread]:
    started = ClusterThread(tmp_path)
    yield started
    started.close()


def test_canonical_example_blocking(servers: ClusterThread) -> None:
    namesrv = servers.cluster.namesrv_address

    producer = bolide.Producer("order-producers", namesrv=namesrv)
    producer.start()
    result = producer.send(bolide.Message("orders", b'{"id": 17}', tags="paid", keys="order-17"))
    producer.shutdown()

    assert result.status is bolide.SendStatus.SEND_OK
    [stored] = servers.stored(result)
    assert (stored.body, stored.tags, stored.keys) == (b'{"id": 17}', "paid", "order-17")
    assert stored.msg_id == result.msg_id


def test_canonical_example_with_aio(servers: ClusterThread) -> None:
    namesrv = servers.cluster.namesrv_address

    async def main() -> bolide.aio.SendResult:
        producer = bolide.aio.Producer("order-producers", namesrv=namesrv)
        await producer.start()
        result = await producer.send(
            bolide.aio.Message("orders", b'{"id": 17}', tags="paid", keys="order-17")
        )
        await producer.shutdown()
        return result

    user_loop = LoopThread("user-loop")
    try:
        sent = user_loop.run(main())
    finally:
        user_loop.stop()
    [stored] = servers.stored(sent)
    assert (stored.body, stored.tags, stored.keys) == (b'{"id": 17}', "paid", "order-17")


def test_context_manager_async_sends_batches_and_orderly(servers: ClusterThread) -> None:
    seen: list[concurrent.futures.Future[bolide.SendResult]] = []
    with bolide.Producer("pg", namesrv=servers.cluster.namesrv_address) as producer:
        futures = [
            producer.send_async(bolide.Message("sync-t", f"{i}".encode()), callback=seen.append)
            for i in range(20)
        ]
        results = [future.result() for future in futures]
        batch = producer.send_batch(
            [bolide.Message("sync-t", b"b1"), bolide.Message("sync-t", b"b2")]
        )
        first = producer.send_orderly(bolide.Message("sync-t", b"o1"), "key-1")
        second = producer.send_orderly(bolide.Message("sync-t", b"o2"), "key-1")
        producer.send_oneway(bolide.Message("sync-t", b"one way"))
        with pytest.raises(MessageTooLargeError):
            producer.send(bolide.Message("sync-t", b"x" * (4 * 1024 * 1024 + 1)))
    assert len({r.msg_id for r in results}) == 20 and len(seen) == 20
    assert [m.body for m in servers.stored(batch)][:2] == [b"b1", b"b2"]
    assert first.queue == second.queue and second.queue_offset > first.queue_offset
    assert not producer.loop_thread.started


def test_blocking_call_from_the_loop_thread_is_refused() -> None:
    runner = LoopThread("self-call")

    async def nested() -> None:
        async def inner() -> None:
            return None

        runner.run(inner())

    try:
        with pytest.raises(InvariantViolationError, match="own loop thread"):
            runner.run(nested())
    finally:
        runner.stop()


def test_the_blocking_producer_batches_send_async(servers: ClusterThread) -> None:
    namesrv = servers.cluster.namesrv_address
    bodies = [f"t{i}".encode() for i in range(50)]
    with bolide.Producer("batching", namesrv=namesrv) as producer:
        batcher = producer.core.batcher
        assert batcher is not None
        producer.send(bolide.Message("blocking", b"warm"))
        futures = [producer.send_async(bolide.Message("blocking", body)) for body in bodies]
        results = [future.result(timeout=30) for future in futures]
        assert batcher.requests_sent <= 51
    assert len({result.msg_id for result in results}) == 50
    for result, body in zip(results, bodies, strict=True):
        assert servers.stored(result)[0].body == body
    with bolide.Producer("no-batching", namesrv=namesrv, auto_batch=False) as producer:
        assert producer.core.batcher is None
        assert producer.send(bolide.Message("blocking", b"one")).status is bolide.SendStatus.SEND_OK


def test_the_blocking_producer_recalls_a_delayed_message(servers: ClusterThread) -> None:
    due_ms = int(time.time() * 1000) + 60_000
    with bolide.Producer("recalling-producers", namesrv=servers.cluster.namesrv_address) as p:
        sent = p.send(bolide.Message("orders", b"later", deliver_at_ms=due_ms))
        assert sent.recall_handle is not None
        assert p.recall_message("orders", sent.recall_handle) == sent.msg_id
        with pytest.raises(InvalidMessageError):
            p.recall_message("orders", "not a handle")

"""Natural batching of the producer (``auto_batch``) against a real in-process cluster: sends that
wait behind a request in flight go out as one batch request (counted at the broker), each send
gets its own result or error, and the order of a queue holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bolide.base import limits
from bolide.base.errors import InvalidMessageError, MessageTooLargeError
from bolide.client.message import Message, SendResult, SendStatus
from bolide.client.producer.batching import SendBatcher
from bolide.client.producer.prepare import PreparedSend, SendSettings, prepare_message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import PropertyKey
from bolide.testing.cluster import Cluster
from tests.client.conftest import pull_all

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def producer(cluster: Cluster) -> AsyncIterator[Producer]:
    async with Producer("pg", namesrv=cluster.namesrv_address) as started:
        yield started


def _put_requests(cluster: Cluster) -> int:
    return cluster.broker("broker-a").context.stats.put_request_count


async def _check_stored(producer: Producer, results: list[SendResult], bodies: list[bytes]) -> None:
    """Each result names its own stored message: body, UNIQ_KEY, offset id and queue offset."""
    stored = {}
    for queue in {result.queue for result in results}:
        for message in await pull_all(producer.instance, queue):
            stored[(queue, message.queue_offset)] = message
    for result, body in zip(results, bodies, strict=True):
        message = stored[(result.queue, result.queue_offset)]
        assert message.body == body
        assert message.msg_id == result.msg_id == message.properties[PropertyKey.UNIQ_KEY]
        assert message.offset_msg_id == result.offset_msg_id


async def test_sends_waiting_behind_a_request_go_as_one_batch(
    cluster: Cluster, producer: Producer
) -> None:
    await producer.send(Message("natural", b"warm"))  # the route is known from here on
    before = _put_requests(cluster)
    bodies = [f"m{i}".encode() for i in range(64)]
    results = await asyncio.gather(*(producer.send(Message("natural", b)) for b in bodies))
    # The first ones go alone (up to the lane's bound of single sends in flight); the rest,
    # made while those are on the wire, go as one batch request.
    alone = limits.PRODUCER_AUTO_BATCH_MAX_IN_FLIGHT_REQUESTS
    assert _put_requests(cluster) - before == alone + 1
    assert producer.batcher is not None and producer.batcher.waiting_count == 0
    assert all(result.status is SendStatus.SEND_OK for result in results)
    assert len({result.msg_id for result in results}) == 64
    assert len({result.offset_msg_id for result in results}) == 64
    batch = results[alone:]
    assert len({result.queue for result in batch}) == 1
    first = batch[0].queue_offset
    assert [result.queue_offset for result in batch] == list(range(first, first + 64 - alone))
    await _check_stored(producer, results, bodies)


async def test_auto_batch_off_sends_one_request_per_send(cluster: Cluster) -> None:
    async with Producer("pg", namesrv=cluster.namesrv_address, auto_batch=False) as producer:
        assert producer.batcher is None
        await producer.send(Message("single", b"warm"))
        before = _put_requests(cluster)
        bodies = [f"s{i}".encode() for i in range(40)]
        results = await asyncio.gather(*(producer.send(Message("single", b)) for b in bodies))
        assert _put_requests(cluster) - before == 40
        await _check_stored(producer, results, bodies)


async def test_the_order_of_each_sharding_key_holds(producer: Producer) -> None:
    await producer.send(Message("keyed", b"warm"))
    sends = [(f"key-{i % 3}", f"{i % 3}:{i}".encode()) for i in range(300)]
    results = await asyncio.gather(
        *(producer.send(Message("keyed", body), sharding_key=key) for key, body in sends)
    )
    for key_index in range(3):
        mine = [
            (result, body)
            for result, (key, body) in zip(results, sends, strict=True)
            if key == f"key-{key_index}"
        ]
        assert len({r.queue for r, _ in mine}) == 1
        offsets = [r.queue_offset for r, _ in mine]
        assert offsets == sorted(offsets)
        stored = await pull_all(producer.instance, mine[0][0].queue)
        in_queue = [m.body for m in stored if m.body.startswith(f"{key_index}:".encode())]
        assert in_queue == [body for _, body in mine]
    await _check_stored(producer, results, [body for _, body in sends])


async def test_topics_and_queues_batch_apart(cluster: Cluster, producer: Producer) -> None:
    await producer.send(Message("alpha", b"warm"))
    await producer.send(Message("beta", b"warm"))
    queue = MessageQueue("alpha", "broker-a", 2)
    before = _put_requests(cluster)
    plan = [("alpha", None), ("beta", None), ("alpha", queue)] * 20
    bodies = [f"{topic}-{i}".encode() for i, (topic, _) in enumerate(plan)]
    results = await asyncio.gather(
        *(
            producer.send(Message(topic, body), queue=chosen)
            for (topic, chosen), body in zip(plan, bodies, strict=True)
        )
    )
    # Three lanes (alpha, beta, alpha queue 2): each sends what it may alone (one for the
    # chosen queue), then one batch.
    alone = limits.PRODUCER_AUTO_BATCH_MAX_IN_FLIGHT_REQUESTS
    assert _put_requests(cluster) - before == 2 * (alone + 1) + 2
    for (topic, chosen), result in zip(plan, results, strict=True):
        assert result.queue.topic == topic
        if chosen is not None:
            assert result.queue == chosen
    await _check_stored(producer, results, bodies)


async def test_a_message_the_client_refuses_fails_alone(producer: Producer) -> None:
    await producer.send(Message("mixed", b"warm"))
    big = Message("mixed", b"x" * (producer.settings.max_message_bytes + 1))
    messages = [Message("mixed", f"ok{i}".encode()) for i in range(10)]
    outcomes = await asyncio.gather(
        *(producer.send(m) for m in [*messages[:5], big, *messages[5:]]), return_exceptions=True
    )
    assert isinstance(outcomes[5], MessageTooLargeError)
    fine = [o for i, o in enumerate(outcomes) if i != 5]
    assert all(isinstance(o, SendResult) for o in fine)
    await _check_stored(producer, fine, [m.body for m in messages])  # type: ignore[arg-type]


async def test_a_message_the_broker_refuses_fails_alone(tmp_path: Path) -> None:
    async with (
        Cluster(tmp_path, settings={"max_message_size_bytes": 1024}) as cluster,
        Producer("pg", namesrv=cluster.namesrv_address) as producer,
    ):
        await producer.send(Message("strict", b"warm"))
        queue = MessageQueue("strict", "broker-a", 1)
        bodies = [b"a0", b"a1", b"b" * 2_000, b"a3", b"a4"]  # under the client's limits
        outcomes = await asyncio.gather(
            *(producer.send(Message("strict", b), queue=queue) for b in bodies),
            return_exceptions=True,
        )
        assert isinstance(outcomes[2], InvalidMessageError)
        fine = [o for i, o in enumerate(outcomes) if i != 2]
        assert all(isinstance(o, SendResult) for o in fine)
        stored = await pull_all(producer.instance, queue, outcomes[0].queue_offset)  # type: ignore[union-attr]
        assert [m.body for m in stored] == [b"a0", b"a1", b"a3", b"a4"]  # order kept
        await _check_stored(producer, fine, [b"a0", b"a1", b"a3", b"a4"])  # type: ignore[arg-type]


async def test_unbatchable_sends_keep_their_place_in_the_queue(producer: Producer) -> None:
    await producer.send(Message("places", b"warm"))
    queue = MessageQueue("places", "broker-a", 0)
    compressed = b"z" * (producer.settings.compress_over_bytes + 10)
    messages = [
        Message("places", b"p0"),
        Message("places", b"p1"),
        Message("places", compressed),  # compressed: goes alone
        Message("places", b"p3"),
        Message("places", b"p4", properties={PropertyKey.WAIT: "false"}),  # no wait: alone
        Message("places", b"p5"),
    ]
    results = await asyncio.gather(*(producer.send(m, queue=queue) for m in messages))
    batch_result = await producer.send_batch(
        [Message("places", b"b0"), Message("places", b"b1")], queue=queue
    )
    stored = await pull_all(producer.instance, queue, results[0].queue_offset)
    assert [m.body for m in stored] == [m.body for m in messages] + [b"b0", b"b1"]
    assert batch_result.queue_offset == results[-1].queue_offset + 1
    await _check_stored(producer, results, [m.body for m in messages])


async def test_a_cancelled_waiting_send_is_never_sent(producer: Producer) -> None:
    await producer.send(Message("cancel", b"warm"))
    queue = MessageQueue("cancel", "broker-a", 3)
    batcher = producer.batcher
    assert batcher is not None
    first = asyncio.create_task(producer.send(Message("cancel", b"c0"), queue=queue))
    dropped = asyncio.create_task(producer.send(Message("cancel", b"c1"), queue=queue))
    kept = asyncio.create_task(producer.send(Message("cancel", b"c2"), queue=queue))
    for _ in range(1_000):
        if batcher.waiting_count == 2:
            break
        await asyncio.sleep(0)
    assert batcher.waiting_count == 2 and not first.done()
    dropped.cancel()
    await asyncio.gather(first, kept)
    assert dropped.cancelled()
    stored = await pull_all(producer.instance, queue, (await first).queue_offset)
    assert [m.body for m in stored] == [b"c0", b"c2"]


async def test_a_lane_without_a_queue_may_have_more_requests_in_flight() -> None:
    answers: list[asyncio.Future[None]] = []
    sent: list[tuple[str, MessageQueue | None]] = []

    async def send_prepared(
        prepared: object, queue: MessageQueue | None, timeout_ms: int
    ) -> SendResult:
        assert isinstance(prepared, PreparedSend)
        sent.append((prepared.msg_id, queue))
        answer = asyncio.get_running_loop().create_future()
        answers.append(answer)
        await answer
        count = prepared.msg_id.count(",") + 1
        ids = ",".join(f"OFF{i}" for i in range(count))
        target = queue or MessageQueue(prepared.topic, "b", 0)
        return SendResult(SendStatus.SEND_OK, prepared.msg_id, ids, target, 10)

    settings = SendSettings("pg")
    batcher = SendBatcher(send_prepared, max_in_flight=2)
    chosen = MessageQueue("t", "b", 3)

    def send(key: str, queue: MessageQueue | None) -> asyncio.Future[SendResult]:
        prepared = prepare_message(Message("t", b"x"), key, 1, settings)
        return asyncio.ensure_future(batcher.send(prepared, queue, 3_000))

    free = [send(f"F{i}", None) for i in range(5)]
    ordered = [send(f"Q{i}", chosen) for i in range(3)]
    for _ in range(100):
        await asyncio.sleep(0)
    # Two requests without a queue and one to the chosen queue are on the wire; the rest wait.
    assert sent == [("F0", None), ("F1", None), ("Q0", chosen)]
    assert batcher.waiting_count == 5
    while not all(task.done() for task in [*free, *ordered]):
        for answer in answers:
            if not answer.done():
                answer.set_result(None)
        await asyncio.sleep(0)
    assert ("F2,F3,F4", None) in sent and ("Q1,Q2", chosen) in sent
    assert [task.result().queue_offset for task in free[2:]] == [10, 11, 12]
    assert [task.result().offset_msg_id for task in ordered[1:]] == ["OFF0", "OFF1"]


async def test_single_sends_overlap_but_a_batch_goes_alone() -> None:
    answers: dict[str, asyncio.Future[None]] = {}

    async def send_prepared(
        prepared: PreparedSend, queue: MessageQueue | None, timeout_ms: int
    ) -> SendResult:
        answer = answers[prepared.msg_id] = asyncio.get_running_loop().create_future()
        await answer
        ids = ",".join(f"OFF-{key}" for key in prepared.msg_id.split(","))
        return SendResult(SendStatus.SEND_OK, prepared.msg_id, ids, MessageQueue("t", "b", 0), 0)

    batcher = SendBatcher(send_prepared, max_in_flight=3)
    settings = SendSettings("pg")

    def send(key: str) -> asyncio.Future[SendResult]:
        prepared = prepare_message(Message("t", b"x"), key, 1, settings)
        return asyncio.ensure_future(batcher.send(prepared, None, 3_000))

    async def settle() -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    tasks = [send(f"A{i}") for i in range(5)]
    await settle()
    assert list(answers) == ["A0", "A1", "A2"]  # sparse sends never wait for an answer
    answers["A0"].set_result(None)
    await settle()
    assert list(answers)[-1] == "A3,A4"  # what waited goes as one batch
    tasks.append(send("A5"))  # room for a request, but a batch is on the wire: A5 waits
    await settle()
    assert "A5" not in answers and batcher.waiting_count == 1
    answers["A3,A4"].set_result(None)
    await settle()
    assert "A5" in answers
    for answer in answers.values():
        if not answer.done():
            answer.set_result(None)
    results = await asyncio.gather(*tasks)
    assert [result.offset_msg_id for result in results] == [f"OFF-A{i}" for i in range(6)]


async def test_a_run_of_batches_is_one_task_and_the_lane_goes_when_idle() -> None:
    """Callers that send again as soon as they are answered (a window of in-flight sends):
    each round after the first goes as one batch, each send gets its own id and offset, one
    task carries the whole run, and the lane is dropped once nothing is in flight."""
    offset = 0
    requests: list[int] = []

    async def send_prepared(
        prepared: PreparedSend, queue: MessageQueue | None, timeout_ms: int
    ) -> SendResult:
        nonlocal offset
        await asyncio.sleep(0)  # on the wire for a loop pass
        count = prepared.msg_id.count(",") + 1
        requests.append(count)
        ids = ",".join(f"OFF-{key}" for key in prepared.msg_id.split(","))
        first, offset = offset, offset + count
        return SendResult(SendStatus.SEND_OK, prepared.msg_id, ids, MessageQueue("t", "b", 0),
                          first)  # fmt: skip

    batcher = SendBatcher(send_prepared, max_in_flight=1)
    settings = SendSettings("pg")
    results: list[SendResult] = []
    created: list[asyncio.Task[Any]] = []
    loop = asyncio.get_running_loop()

    def count_lane_tasks(
        loop: asyncio.AbstractEventLoop, coroutine: Any, **options: Any
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coroutine, loop=loop, **options)
        created.append(task)  # named by create_task after the factory returns
        return task

    loop.set_task_factory(count_lane_tasks)

    async def window_slot(slot: int) -> None:
        for round_ in range(5):
            key = f"S{slot}R{round_}"
            prepared = prepare_message(Message("t", b"x"), key, 1, settings)
            results.append(await batcher.send(prepared, None, 3_000))

    try:
        slots = [asyncio.ensure_future(window_slot(slot)) for slot in range(8)]
        await asyncio.gather(*slots)
    finally:
        loop.set_task_factory(None)
    lane_tasks = [task.get_name() for task in created if task.get_name().startswith("bolide")]
    assert lane_tasks == ["bolide-producer-batch-t"]  # one task carried every batch
    assert sum(requests) == 40 and requests[0] == 1 and max(requests) == 8
    assert sorted(result.queue_offset for result in results) == list(range(40))
    assert all(result.offset_msg_id == f"OFF-{result.msg_id}" for result in results)
    await batcher.wait_idle()
    assert batcher.waiting_count == 0 and not batcher._lanes

"""Long polling: parked pulls wake on matching arrivals, at their exact deadline, on the
periodic check, and on cancellation; the table is bounded."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bolide.base.clock import ManualClock
from bolide.base.errors import BolideError, ConnectionClosedError, StoreError
from bolide.base.limits import LONG_POLL_HEAP_COMPACT_MIN_ENTRIES
from bolide.base.service import Service
from bolide.broker.long_polling import LongPollingService, WakeReason
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher, RemotingServer
from bolide.testing.waiting import until

TOPIC = "orders"


def _future() -> asyncio.Future[WakeReason]:
    return asyncio.get_running_loop().create_future()


async def test_arrival_wakes_a_pull_waiting_on_that_queue() -> None:
    service = LongPollingService(ManualClock())
    future = _future()
    assert service.park(TOPIC, 1, 5, service.deadline_after(15_000), future)
    assert service.count == 1
    assert service.notify_message_arriving(TOPIC, 1, 6, tags_code=42) == 1
    assert future.result() is WakeReason.ARRIVED
    assert service.count == 0
    assert service.count_for_queue(TOPIC, 1) == 0


async def test_arrival_on_another_queue_or_topic_wakes_nothing() -> None:
    service = LongPollingService(ManualClock())
    future = _future()
    service.park(TOPIC, 1, 5, service.deadline_after(15_000), future)
    assert service.notify_message_arriving(TOPIC, 2, 100) == 0
    assert service.notify_message_arriving("payments", 1, 100) == 0
    assert not future.done()
    assert service.count_for_queue(TOPIC, 1) == 1


async def test_offset_still_ahead_of_the_new_data_keeps_the_pull_parked() -> None:
    service = LongPollingService(ManualClock())
    future = _future()
    service.park(TOPIC, 0, 10, service.deadline_after(15_000), future)
    # max offset 10 means offsets 0..9 exist: the pull at 10 still has nothing to read.
    assert service.notify_message_arriving(TOPIC, 0, 10) == 0
    assert service.notify_message_arriving(TOPIC, 0, 3) == 0
    assert not future.done()
    assert service.notify_message_arriving(TOPIC, 0, 11) == 1
    assert future.result() is WakeReason.ARRIVED


async def test_tag_filter_decides_which_arrivals_wake() -> None:
    service = LongPollingService(ManualClock())
    filtered, everything, empty_set = _future(), _future(), _future()
    deadline_ms = service.deadline_after(15_000)
    service.park(TOPIC, 0, 0, deadline_ms, filtered, tag_codes=[101, 202])
    service.park(TOPIC, 0, 0, deadline_ms, everything, tag_codes=None)
    service.park(TOPIC, 0, 0, deadline_ms, empty_set, tag_codes=set())
    assert service.notify_message_arriving(TOPIC, 0, 1, tags_code=303) == 2
    assert not filtered.done()
    assert everything.result() is WakeReason.ARRIVED
    assert empty_set.result() is WakeReason.ARRIVED
    assert service.notify_message_arriving(TOPIC, 0, 2, tags_code=202) == 1
    assert filtered.result() is WakeReason.ARRIVED


async def test_unknown_tags_code_wakes_a_filtered_pull() -> None:
    service = LongPollingService(ManualClock())
    future = _future()
    service.park(TOPIC, 0, 0, service.deadline_after(15_000), future, tag_codes=[7])
    assert service.notify_message_arriving(TOPIC, 0, 1, tags_code=None) == 1
    assert future.result() is WakeReason.ARRIVED


async def test_expire_due_wakes_at_the_deadline_and_not_before() -> None:
    clock = ManualClock()
    service = LongPollingService(clock)
    future = _future()
    service.park(TOPIC, 0, 0, service.deadline_after(15_000), future)
    clock.advance_ms(14_999)
    assert service.expire_due() == 0
    assert not future.done()
    clock.advance_ms(1)
    assert service.expire_due() == 1
    assert future.result() is WakeReason.EXPIRED
    assert service.count == 0


async def test_running_service_wakes_at_the_exact_deadline() -> None:
    clock = ManualClock()
    service = LongPollingService(clock, check_interval_ms=5_000)
    service.start()
    try:
        # 7.3 s is between two periodic checks (5 s, 10 s): only the deadline timer is on time.
        task = asyncio.create_task(service.hold(TOPIC, 0, 0, 7_300))
        await until(lambda: service.count == 1 and clock.sleeper_count == 2)
        clock.advance_ms(7_299)
        await until(lambda: clock.sleeper_count == 2)
        assert not task.done()
        assert service.count == 1
        clock.advance_ms(1)
        await until(task.done)
        assert task.result() is WakeReason.EXPIRED
        assert clock.monotonic_ms() == 7_300
    finally:
        await service.stop()


async def test_an_earlier_deadline_rearms_the_timer() -> None:
    clock = ManualClock()
    service = LongPollingService(clock, check_interval_ms=60_000)
    service.start()
    try:
        late = asyncio.create_task(service.hold(TOPIC, 0, 0, 20_000))
        await until(lambda: service.count == 1)
        early = asyncio.create_task(service.hold(TOPIC, 1, 0, 2_000))
        await until(lambda: service.count == 2)
        await until(lambda: clock.sleeper_count == 2)  # check service + one deadline timer
        clock.advance_ms(2_000)
        await until(early.done)
        assert early.result() is WakeReason.EXPIRED
        assert not late.done()
        await until(lambda: clock.sleeper_count == 2)
        clock.advance_ms(18_000)
        await until(late.done)
        assert late.result() is WakeReason.EXPIRED
    finally:
        await service.stop()


async def test_timer_skips_deadlines_of_pulls_woken_by_arrival() -> None:
    clock = ManualClock()
    service = LongPollingService(clock, check_interval_ms=60_000)
    service.start()
    try:
        first = asyncio.create_task(service.hold(TOPIC, 0, 0, 1_000))
        second = asyncio.create_task(service.hold(TOPIC, 1, 0, 3_000))
        await until(lambda: service.count == 2)
        service.notify_message_arriving(TOPIC, 0, 1)
        await until(first.done)
        assert first.result() is WakeReason.ARRIVED
        await until(lambda: clock.sleeper_count == 2)
        clock.advance_ms(1_000)
        await until(lambda: clock.sleeper_count == 2)
        assert not second.done()
        clock.advance_ms(2_000)
        await until(second.done)
        assert second.result() is WakeReason.EXPIRED
    finally:
        await service.stop()


async def test_periodic_check_wakes_pulls_whose_data_arrived_unnotified() -> None:
    clock = ManualClock()
    max_offsets = {(TOPIC, 0): 0, (TOPIC, 1): 0}

    def lookup(topic: str, queue_id: int) -> int:
        if (topic, queue_id) not in max_offsets:
            raise StoreError(f"no queue {topic}/{queue_id}")
        return max_offsets[(topic, queue_id)]

    service = LongPollingService(clock, max_offset_lookup=lookup, check_interval_ms=5_000)
    service.start()
    try:
        arrived = asyncio.create_task(service.hold(TOPIC, 0, 0, 15_000, tag_codes=[9]))
        waiting = asyncio.create_task(service.hold(TOPIC, 1, 0, 15_000))
        missing = asyncio.create_task(service.hold("gone", 0, 0, 15_000))
        await until(lambda: service.count == 3 and clock.sleeper_count == 2)
        max_offsets[(TOPIC, 0)] = 4
        clock.advance_ms(5_000)
        await until(arrived.done)
        assert arrived.result() is WakeReason.ARRIVED
        assert not waiting.done()
        assert not missing.done()
        assert service.count == 2
    finally:
        await service.stop()
    assert await waiting is WakeReason.EXPIRED
    assert await missing is WakeReason.EXPIRED


async def test_table_is_bounded() -> None:
    service = LongPollingService(ManualClock(), max_parked_requests=2)
    deadline_ms = service.deadline_after(15_000)
    assert service.park(TOPIC, 0, 0, deadline_ms, _future())
    assert service.park(TOPIC, 1, 0, deadline_ms, _future())
    refused = _future()
    assert not service.park(TOPIC, 2, 0, deadline_ms, refused)
    assert not refused.done()
    assert await service.hold(TOPIC, 3, 0, 15_000) is WakeReason.REFUSED
    assert service.count == 2
    service.notify_message_arriving(TOPIC, 0, 1)
    assert service.park(TOPIC, 2, 0, deadline_ms, _future())


async def test_cancel_wakes_only_the_closed_connections_pulls() -> None:
    service = LongPollingService(ManualClock())
    closed, alive = object(), object()
    deadline_ms = service.deadline_after(15_000)
    first, second, other = _future(), _future(), _future()
    service.park(TOPIC, 0, 0, deadline_ms, first, owner=closed)
    service.park(TOPIC, 1, 0, deadline_ms, second, owner=closed)
    service.park(TOPIC, 0, 0, deadline_ms, other, owner=alive)
    assert service.count_for_owner(closed) == 2
    assert service.cancel(closed) == 2
    assert first.result() is WakeReason.CANCELLED
    assert second.result() is WakeReason.CANCELLED
    assert not other.done()
    assert service.count == 1
    assert service.count_for_owner(closed) == 0
    assert service.cancel(closed) == 0
    assert service.notify_message_arriving(TOPIC, 0, 1) == 1
    assert other.result() is WakeReason.ARRIVED


async def test_cancelled_holder_leaves_the_table() -> None:
    service = LongPollingService(ManualClock())
    task = asyncio.create_task(service.hold(TOPIC, 0, 0, 15_000, owner="conn"))
    await until(lambda: service.count == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: service.count == 0)
    assert service.count_for_owner("conn") == 0
    assert service.notify_message_arriving(TOPIC, 0, 1) == 0


async def test_callback_target_is_woken_once_and_may_park_again() -> None:
    service = LongPollingService(ManualClock())
    reasons: list[WakeReason] = []
    deadline_ms = service.deadline_after(15_000)

    def on_wake(reason: WakeReason) -> None:
        reasons.append(reason)
        if len(reasons) == 1:
            assert service.park(TOPIC, 0, 1, deadline_ms, on_wake)

    service.park(TOPIC, 0, 0, deadline_ms, on_wake)
    assert service.notify_message_arriving(TOPIC, 0, 1) == 1
    assert reasons == [WakeReason.ARRIVED]
    assert service.count == 1
    assert service.notify_message_arriving(TOPIC, 0, 2) == 1
    assert reasons == [WakeReason.ARRIVED, WakeReason.ARRIVED]
    assert service.count == 0


async def test_a_failing_callback_does_not_keep_others_asleep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = LongPollingService(ManualClock())
    deadline_ms = service.deadline_after(15_000)

    def broken(_reason: WakeReason) -> None:
        raise BolideError("handler gone")

    survivor = _future()
    service.park(TOPIC, 0, 0, deadline_ms, broken)
    service.park(TOPIC, 0, 0, deadline_ms, survivor)
    with caplog.at_level(logging.ERROR, logger="bolide.broker.long_polling"):
        assert service.notify_message_arriving(TOPIC, 0, 1) == 2
    assert survivor.result() is WakeReason.ARRIVED
    assert "long-poll wake failed" in caplog.text


async def test_stop_expires_parked_pulls_and_refuses_new_ones() -> None:
    clock = ManualClock()
    service = LongPollingService(clock)
    service.start()
    task = asyncio.create_task(service.hold(TOPIC, 0, 0, 15_000))
    await until(lambda: service.count == 1)
    await service.stop()
    assert await task is WakeReason.EXPIRED
    assert clock.sleeper_count == 0
    assert not service.park(TOPIC, 0, 0, service.deadline_after(1_000), _future())
    assert await service.hold(TOPIC, 0, 0, 1_000) is WakeReason.REFUSED


async def test_deadline_heap_stays_proportional_to_live_pulls() -> None:
    service = LongPollingService(ManualClock())
    deadline_ms = service.deadline_after(15_000)
    for offset in range(10_000):
        service.park(TOPIC, 0, offset, deadline_ms, _future())
        service.notify_message_arriving(TOPIC, 0, offset + 1)
    assert service.count == 0
    assert len(service._deadlines) <= 2 * LONG_POLL_HEAP_COMPACT_MIN_ENTRIES


async def test_timer_crash_is_reported_to_the_owner() -> None:
    clock = ManualClock()
    crashes: list[BaseException] = []

    def on_crash(_service: Service, error: BaseException) -> None:
        crashes.append(error)

    service = LongPollingService(clock, on_crash=on_crash)

    def failing_expire() -> int:
        raise RuntimeError("bug")

    service.expire_due = failing_expire  # type: ignore[method-assign]
    service.start()
    try:
        service.park(TOPIC, 0, 0, service.deadline_after(10), _future())
        await until(lambda: clock.sleeper_count == 2)
        clock.advance_ms(10)
        await until(lambda: len(crashes) == 1)
        assert isinstance(crashes[0].__cause__, RuntimeError)
    finally:
        await service.stop()


@pytest.mark.timeout(30)
async def test_pull_handler_over_real_connections() -> None:
    """The intended wiring: a pull that finds nothing holds, answers with its own opaque when
    data arrives or at the deadline, and is dropped when its connection closes."""
    clock = ManualClock()
    max_offsets: dict[tuple[str, int], int] = {(TOPIC, 0): 0}
    service = LongPollingService(clock, max_offset_lookup=lambda t, q: max_offsets[(t, q)])
    reasons: list[WakeReason] = []

    def read(topic: str, queue_id: int, offset: int, request: RemotingCommand) -> RemotingCommand:
        if offset < max_offsets[(topic, queue_id)]:
            return request.make_response(ResponseCode.SUCCESS, body=b"message")
        return request.make_response(ResponseCode.PULL_NOT_FOUND)

    async def pull(connection: Connection, request: RemotingCommand) -> RemotingCommand | None:
        topic, queue_id = request.ext_fields["topic"], int(request.ext_fields["queueId"])
        offset = int(request.ext_fields["queueOffset"])
        response = read(topic, queue_id, offset, request)
        if response.code != ResponseCode.PULL_NOT_FOUND:
            return response
        reason = await service.hold(topic, queue_id, offset, 15_000, owner=connection)
        reasons.append(reason)
        if reason is WakeReason.CANCELLED:
            return None
        return read(topic, queue_id, offset, request)

    def on_close(connection: Connection) -> None:
        service.cancel(connection)

    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.PULL_MESSAGE, pull, family="pull")
    server = RemotingServer(dispatcher, on_connection_close=on_close)
    await server.start()
    service.start()
    pool = ClientPool()

    def pull_request() -> RemotingCommand:
        fields = {"topic": TOPIC, "queueId": "0", "queueOffset": "0"}
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)

    try:
        arrival = asyncio.create_task(pool.invoke(server.address, pull_request(), 30_000))
        await until(lambda: service.count == 1)
        max_offsets[(TOPIC, 0)] = 1
        assert service.notify_message_arriving(TOPIC, 0, 1) == 1
        response = await arrival
        assert (response.code, response.body) == (ResponseCode.SUCCESS, b"message")

        max_offsets[(TOPIC, 0)] = 0  # the queue is empty again for the next holds
        expiry = asyncio.create_task(pool.invoke(server.address, pull_request(), 30_000))
        await until(lambda: service.count == 1 and clock.sleeper_count == 2)
        clock.advance_ms(15_000)
        assert (await expiry).code == ResponseCode.PULL_NOT_FOUND

        orphan = asyncio.create_task(pool.invoke(server.address, pull_request(), 30_000))
        await until(lambda: service.count == 1)
        await pool.close()
        with pytest.raises(ConnectionClosedError):
            await orphan
        await until(lambda: service.count == 0)
        await until(lambda: len(reasons) == 3)
        assert reasons == [WakeReason.ARRIVED, WakeReason.EXPIRED, WakeReason.CANCELLED]
    finally:
        await pool.close()
        await service.stop()
        await server.stop()

"""The MessageStore contract, run against the file store and the memory twin alike."""

from __future__ import annotations

import itertools

from bolide.protocol.message import MessageSysFlag, java_string_hash
from bolide.protocol.msgid import offset_message_id
from bolide.protocol.record import BatchEntry, body_crc, decode_properties, decode_record
from bolide.protocol.system_topics import SCHEDULE_TOPIC
from bolide.store.api import BatchPutRequest, GetStatus, PutRequest, PutResult, PutStatus
from bolide.store.config import DEFAULT_DELAY_LEVELS_MS

from .conftest import ALL_HOURS, BORN_HOST, STORE_HOST, Harness, StoreFactory, request

HUGE = 1 << 40
FOREVER_MS = 1 << 62


async def test_put_then_get_returns_the_stored_record(harness: Harness) -> None:
    store, clock = harness.store, harness.clock
    result = await store.put_message(request(body=b"payload", TAGS="paid", KEYS="k1 k2"))
    assert result.status is PutStatus.PUT_OK
    assert (result.commit_log_offset, result.queue_offset) == (0, 0)
    assert result.store_timestamp_ms == clock.now_ms()
    assert result.message_ids == [offset_message_id(STORE_HOST, 0)]
    assert result.message_count == 1
    got = store.get_message("orders", 0, 0, 32, HUGE)
    assert got.status is GetStatus.FOUND
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (1, 0, 1)
    assert got.message_count == 1 and got.total_bytes == result.wrote_bytes
    message, end = decode_record(got.buffers[0], verify_crc=True)
    assert end == result.wrote_bytes
    assert message.topic == "orders" and message.body == b"payload" and message.flag == 7
    assert message.properties == {"TAGS": "paid", "KEYS": "k1 k2"}
    assert (message.queue_id, message.queue_offset, message.commit_log_offset) == (0, 0, 0)
    assert message.store_host == STORE_HOST and message.born_host == BORN_HOST
    assert message.born_timestamp_ms == 1_700_000_000_123
    assert message.store_timestamp_ms == clock.now_ms()
    assert message.body_crc == body_crc(b"payload")
    assert bytes(store.read_record(0) or b"") == bytes(got.buffers[0])


async def test_queue_offsets_count_per_queue_and_commit_log_offsets_are_contiguous(
    harness: Harness,
) -> None:
    store = harness.store
    results = [await store.put_message(request(queue_id=i % 3, body=bytes(50))) for i in range(9)]
    assert [r.queue_offset for r in results] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for before, after in itertools.pairwise(results):
        assert after.commit_log_offset == before.commit_log_offset + before.wrote_bytes
    assert [store.max_offset("orders", q) for q in range(4)] == [3, 3, 3, 0]
    assert [store.min_offset("orders", q) for q in range(4)] == [0, 0, 0, 0]
    assert store.topics_and_queues() == {"orders": [0, 1, 2]}


async def test_records_never_span_segments_and_roll_alike(harness: Harness) -> None:
    store, segment = harness.store, harness.config.commit_log_segment_bytes
    offsets = []
    for _ in range(40):
        result = await store.put_message(request(body=bytes(900)))
        offsets.append((result.commit_log_offset, result.wrote_bytes))
    size = offsets[0][1]
    expected, position = [], 0
    for _ in range(40):
        if position % segment + size + 8 > segment:
            position = (position // segment + 1) * segment
        expected.append((position, size))
        position += size
    assert offsets == expected
    for offset, _ in offsets:
        record = store.read_record(offset)
        assert record is not None and decode_record(record)[0].commit_log_offset == offset


async def test_get_statuses_and_next_offsets(harness: Harness) -> None:
    store = harness.store
    assert store.get_message("orders", 0, 0, 32, HUGE).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    for _ in range(3):
        await store.put_message(request())
    caught_up = store.get_message("orders", 0, 3, 32, HUGE)
    assert (caught_up.status, caught_up.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    beyond = store.get_message("orders", 0, 9, 32, HUGE)
    assert (beyond.status, beyond.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)
    assert store.get_message("orders", 1, 0, 32, HUGE).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    middle = store.get_message("orders", 0, 1, 32, HUGE)
    assert (middle.status, middle.message_count, middle.next_begin_offset) == (
        GetStatus.FOUND,
        2,
        3,
    )


async def test_max_count_and_max_bytes_bound_a_read(harness: Harness) -> None:
    store = harness.store
    sizes = [(await store.put_message(request(body=bytes(100)))).wrote_bytes for _ in range(10)]
    by_count = store.get_message("orders", 0, 0, 4, HUGE)
    assert (by_count.message_count, by_count.next_begin_offset) == (4, 4)
    by_bytes = store.get_message("orders", 0, 2, 32, sizes[0] * 3 + 1)
    assert (by_bytes.message_count, by_bytes.next_begin_offset) == (3, 5)
    first_always = store.get_message("orders", 0, 0, 32, 1)
    assert (first_always.message_count, first_always.next_begin_offset) == (1, 1)


async def test_tag_filter_compares_java_hash_codes(harness: Harness) -> None:
    store = harness.store
    for tags in ["TagA", "TagB", "TagA", "", "TagC"]:
        message = request(TAGS=tags) if tags else request()
        await store.put_message(message)
    entries = store.consume_queue_entries("orders", 0, 0, 10)
    assert [tags for _, _, tags in entries] == [
        2598919,
        2598920,
        2598919,
        0,
        java_string_hash("TagC"),
    ]
    only_a = store.get_message("orders", 0, 0, 32, HUGE, frozenset({2598919}))
    assert only_a.status is GetStatus.FOUND
    assert [decode_record(b)[0].queue_offset for b in only_a.buffers] == [0, 2]
    assert only_a.next_begin_offset == 5
    none = store.get_message("orders", 0, 3, 32, HUGE, frozenset({12345}))
    assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 5)
    full = store.get_message("orders", 0, 0, 1, HUGE, frozenset({2598919}))
    assert (full.message_count, full.next_begin_offset) == (1, 1)


async def test_batch_put_stores_consecutive_records(harness: Harness) -> None:
    store = harness.store
    await store.put_message(request(queue_id=2))
    entries = [
        BatchEntry(flag=i, body=f"b{i}".encode(), properties=f"KEYS\x01key{i}") for i in range(5)
    ]
    result = await store.put_messages(
        BatchPutRequest(
            topic="orders",
            queue_id=2,
            entries=entries,
            born_timestamp_ms=5,
            born_host=BORN_HOST,
            extra_properties="CLUSTER\x01DefaultCluster",
        )
    )
    assert result.status is PutStatus.PUT_OK
    assert (result.queue_offset, result.message_count) == (1, 5)
    got = store.get_message("orders", 2, 1, 32, HUGE)
    messages = [decode_record(b)[0] for b in got.buffers]
    assert [m.queue_offset for m in messages] == [1, 2, 3, 4, 5]
    assert [m.body for m in messages] == [b"b0", b"b1", b"b2", b"b3", b"b4"]
    assert [m.flag for m in messages] == [0, 1, 2, 3, 4]
    assert messages[3].properties == {"KEYS": "key3", "CLUSTER": "DefaultCluster"}
    assert result.message_ids == [
        offset_message_id(STORE_HOST, m.commit_log_offset) for m in messages
    ]
    assert sum(len(b) for b in got.buffers) == result.wrote_bytes
    offsets = [m.commit_log_offset for m in messages]
    assert offsets[0] == result.commit_log_offset
    assert all(b - a == len(got.buffers[0]) for a, b in itertools.pairwise(offsets))


async def test_transaction_halves_get_no_queue_entry(harness: Harness) -> None:
    store = harness.store
    await store.put_message(request())
    half = request(KEYS="tx-1")
    half.sys_flag = MessageSysFlag.TRANSACTION_PREPARED
    result = await store.put_message(half)
    assert result.status is PutStatus.PUT_OK and result.queue_offset == 0
    assert store.max_offset("orders", 0) == 1
    record = store.read_record(result.commit_log_offset)
    assert record is not None and decode_record(record)[0].queue_offset == 0
    found = store.query_by_key("orders", "tx-1", 10, 0, FOREVER_MS)
    assert [bytes(f) for f in found] == [bytes(record)]
    commit = request()
    commit.sys_flag = MessageSysFlag.TRANSACTION_COMMIT
    assert (await store.put_message(commit)).queue_offset == 1


async def test_schedule_topic_tags_code_is_the_delivery_time(harness: Harness) -> None:
    store, clock = harness.store, harness.clock
    for level in (1, 3, 99):
        await store.put_message(
            request(
                topic=SCHEDULE_TOPIC, queue_id=level - 1 if level < 99 else 17, DELAY=str(level)
            )
        )
    now = clock.now_ms()
    assert store.consume_queue_entries(SCHEDULE_TOPIC, 0, 0, 1)[0][2] == now + 1_000
    assert store.consume_queue_entries(SCHEDULE_TOPIC, 2, 0, 1)[0][2] == now + 10_000
    assert (
        store.consume_queue_entries(SCHEDULE_TOPIC, 17, 0, 1)[0][2]
        == now + DEFAULT_DELAY_LEVELS_MS[-1]
    )
    override = request(topic="plain")
    override.tags_code = 424242
    await store.put_message(override)
    assert store.consume_queue_entries("plain", 0, 0, 1)[0][2] == 424242


async def test_read_record_refuses_offsets_that_are_not_record_starts(harness: Harness) -> None:
    store = harness.store
    first = await store.put_message(request())
    second = await store.put_message(request())
    assert store.read_record(second.commit_log_offset) is not None
    assert store.read_record(first.commit_log_offset + 4) is None
    assert store.read_record(second.commit_log_offset + second.wrote_bytes) is None
    assert store.read_record(-1) is None
    assert store.read_record(HUGE) is None


async def test_query_by_key_and_unique_key(harness: Harness) -> None:
    store, clock = harness.store, harness.clock
    results = []
    for i in range(6):
        clock.advance_ms(1_000)
        keys = f"shared own-{i}"
        results.append(await store.put_message(request(KEYS=keys, UNIQ_KEY=f"U{i:02d}")))
    await store.put_message(request(topic="other", KEYS="shared"))
    newest_first = [r.commit_log_offset for r in reversed(results)]

    def offsets(views: list[memoryview]) -> list[int]:
        return [decode_record(v)[0].commit_log_offset for v in views]

    assert offsets(store.query_by_key("orders", "shared", 32, 0, FOREVER_MS)) == newest_first
    assert offsets(store.query_by_key("orders", "shared", 2, 0, FOREVER_MS)) == newest_first[:2]
    assert offsets(store.query_by_key("orders", "own-3", 32, 0, FOREVER_MS)) == [
        results[3].commit_log_offset
    ]
    assert offsets(store.query_by_key("orders", "U04", 32, 0, FOREVER_MS, unique=True)) == [
        results[4].commit_log_offset
    ]
    assert store.query_by_key("orders", "U04", 32, 0, FOREVER_MS) == []
    assert store.query_by_key("orders", "own-3", 32, 0, FOREVER_MS, unique=True) == []
    window_start = results[1].store_timestamp_ms
    window_end = results[3].store_timestamp_ms
    assert offsets(store.query_by_key("orders", "shared", 32, window_start, window_end)) == [
        r.commit_log_offset for r in reversed(results[1:4])
    ]
    assert store.query_by_key("orders", "missing", 32, 0, FOREVER_MS) == []
    assert store.query_by_key("orders", "", 32, 0, FOREVER_MS) == []


async def test_store_times_and_offset_search(harness: Harness) -> None:
    store, clock = harness.store, harness.clock
    assert store.earliest_store_time("orders", 0) == -1
    assert store.offset_for_timestamp("orders", 0, 0) == 0
    times = []
    for _ in range(7):
        clock.advance_ms(100)
        times.append((await store.put_message(request())).store_timestamp_ms)
    assert store.earliest_store_time("orders", 0) == times[0]
    assert [store.store_time_at("orders", 0, i) for i in range(7)] == times
    assert store.store_time_at("orders", 0, 7) == -1
    assert store.offset_for_timestamp("orders", 0, times[0] - 5_000) == 0
    assert store.offset_for_timestamp("orders", 0, times[4]) == 4
    assert store.offset_for_timestamp("orders", 0, times[4] - 50) == 4
    assert store.offset_for_timestamp("orders", 0, times[6] + 1) == 7


async def test_consume_queue_entries_point_at_records(harness: Harness) -> None:
    store = harness.store
    results = [await store.put_message(request(queue_id=1, TAGS="x")) for _ in range(5)]
    entries = store.consume_queue_entries("orders", 1, 2, 10)
    assert entries == [
        (r.commit_log_offset, r.wrote_bytes, java_string_hash("x")) for r in results[2:]
    ]
    assert store.consume_queue_entries("orders", 1, 0, 0) == []
    assert store.consume_queue_entries("nope", 1, 0, 5) == []


async def test_delete_topic_forgets_its_queues(harness: Harness) -> None:
    store = harness.store
    await store.put_message(request(topic="a"))
    await store.put_message(request(topic="b", queue_id=3))
    store.delete_topic("a")
    assert store.topics_and_queues() == {"b": [3]}
    assert store.max_offset("a", 0) == 0
    assert store.get_message("a", 0, 0, 1, HUGE).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    again = await store.put_message(request(topic="a"))
    assert again.queue_offset == 0


async def test_arrival_listener_sees_each_visible_message(harness: Harness) -> None:
    store = harness.store
    seen: list[tuple[str, int, int, int]] = []

    def listener(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        assert store.max_offset(topic, queue_id) == max_offset
        seen.append((topic, queue_id, max_offset, tags_code))

    def broken(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        raise RuntimeError("listener bug")

    store.add_arrival_listener(broken)
    store.add_arrival_listener(listener)
    await store.put_message(request(TAGS="TagA"))
    await store.put_message(request(queue_id=1))
    half = request()
    half.sys_flag = MessageSysFlag.TRANSACTION_PREPARED
    await store.put_message(half)
    assert seen == [("orders", 0, 1, 2598919), ("orders", 1, 1, 0)]


async def test_a_batch_is_announced_once_readable_once_per_tags_code(harness: Harness) -> None:
    store = harness.store
    seen: list[tuple[int, int]] = []

    def listener(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        assert store.max_offset(topic, queue_id) == max_offset
        seen.append((max_offset, tags_code))

    store.add_arrival_listener(listener)
    tags = ["A", "B", "A", "", "B"]
    entries = [BatchEntry(0, b"x", f"TAGS\x01{tag}" if tag else "") for tag in tags]
    assert (await store.put_messages(BatchPutRequest("orders", 0, entries))).ok
    assert seen == [(5, java_string_hash("A")), (5, java_string_hash("B")), (5, 0)]


async def test_text_that_is_not_utf8_is_refused(harness: Harness) -> None:
    store = harness.store
    lone = "\ud800"  # encodable only with surrogatepass: no reader could decode it back
    for refused in (
        request(note=f"bad{lone}"),
        PutRequest("orders", 0, b"x", properties=f"TAGS\x01a{lone}"),
        request(topic=f"t{lone}"),
    ):
        result = await store.put_message(refused)
        assert result.status is PutStatus.MESSAGE_ILLEGAL and "UTF-8" in result.remark
    assert store.max_offset("orders", 0) == 0


async def test_invalid_puts_are_refused_and_store_nothing(harness: Harness) -> None:
    store, config = harness.store, harness.config
    cases = [
        (request(topic="x" * 128), PutStatus.MESSAGE_ILLEGAL),
        (request(topic="../escape"), PutStatus.MESSAGE_ILLEGAL),
        (request(topic=""), PutStatus.MESSAGE_ILLEGAL),
        (request(queue_id=-1), PutStatus.MESSAGE_ILLEGAL),
        (request(body=bytes(config.commit_log_segment_bytes)), PutStatus.MESSAGE_ILLEGAL),
        (request(big="v" * 40_000), PutStatus.PROPERTIES_SIZE_EXCEEDED),
        (
            PutRequest("orders", 0, b"hello", properties={"bad\x01name": "v"}),
            PutStatus.MESSAGE_ILLEGAL,
        ),
        (PutRequest("orders", 0, b"x", born_host=("not-an-ip", 1)), PutStatus.MESSAGE_ILLEGAL),
        (PutRequest("orders", 0, b"x", flag=2**31), PutStatus.MESSAGE_ILLEGAL),
    ]
    small = 0
    for bad, status in cases:
        result = await store.put_message(bad)
        assert result.status is status, (bad.topic[:10], result)
        assert result.remark
    empty_batch = await store.put_messages(BatchPutRequest("orders", 0, []))
    assert empty_batch.status is PutStatus.MESSAGE_ILLEGAL
    assert store.max_offset("orders", 0) == small
    assert store.stats().put_failure_count == len(cases) + 1
    ok = await store.put_message(request())
    assert ok.queue_offset == small


async def test_body_size_limit(harness_factory: StoreFactory) -> None:
    harness = await harness_factory(max_message_size_bytes=100)
    assert (await harness.store.put_message(request(body=bytes(100)))).ok
    refused = await harness.store.put_message(request(body=bytes(101)))
    assert refused.status is PutStatus.MESSAGE_ILLEGAL


async def test_puts_after_shutdown_are_refused(harness: Harness) -> None:
    store = harness.store
    await store.put_message(request())
    await store.shutdown()
    result = await store.put_message(request())
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert store.get_message("orders", 0, 0, 1, HUGE).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.read_record(0) is None


async def test_properties_given_as_string_or_mapping_store_alike(harness: Harness) -> None:
    store = harness.store
    a = await store.put_message(PutRequest("t", 0, b"x", properties="TAGS\x01a\x02KEYS\x01k\x02"))
    b = await store.put_message(PutRequest("t", 0, b"x", properties={"TAGS": "a", "KEYS": "k"}))
    record_a = decode_record(store.read_record(a.commit_log_offset) or b"")[0]
    record_b = decode_record(store.read_record(b.commit_log_offset) or b"")[0]
    assert record_a.properties == record_b.properties == {"TAGS": "a", "KEYS": "k"}
    assert len(store.query_by_key("t", "k", 10, 0, FOREVER_MS)) == 2
    assert decode_properties("TAGS\x01a\x02KEYS\x01k\x02") == {"TAGS": "a", "KEYS": "k"}


async def test_retention_by_age_moves_min_offsets(harness_factory: StoreFactory) -> None:
    harness = await harness_factory(file_reserved_time_ms=3_600_000, delete_when_hours=ALL_HOURS)
    store, clock = harness.store, harness.clock
    segment = harness.config.commit_log_segment_bytes
    results = []
    for _ in range(30):
        clock.advance_ms(60_000)
        results.append(await store.put_message(request(body=bytes(900))))
    first_of_segment: dict[int, PutResult] = {}
    for result in results:
        first_of_segment.setdefault(result.commit_log_offset // segment, result)
    assert len(first_of_segment) == 4
    assert await store.run_retention_once() == 0
    # Segment 0 expires once the first record of segment 1 is older than the reserved time.
    clock.set_ms(first_of_segment[1].store_timestamp_ms + 3_600_001)
    assert await store.run_retention_once() == 1
    first_kept = results.index(first_of_segment[1])
    assert store.min_offset("orders", 0) == first_kept
    assert store.stats().commit_log_min_offset == segment
    too_small = store.get_message("orders", 0, 0, 32, HUGE)
    assert (too_small.status, too_small.next_begin_offset) == (
        GetStatus.OFFSET_TOO_SMALL,
        first_kept,
    )
    assert store.read_record(results[0].commit_log_offset) is None
    assert store.earliest_store_time("orders", 0) == results[first_kept].store_timestamp_ms
    assert store.get_message("orders", 0, first_kept, 32, HUGE).status is GetStatus.FOUND
    # Much later every segment but the one being written goes.
    clock.advance_ms(10 * 3_600_000)
    assert await store.run_retention_once() == 2
    assert store.min_offset("orders", 0) == results.index(first_of_segment[3])
    assert store.max_offset("orders", 0) == 30


async def test_retention_waits_for_delete_hour(harness_factory: StoreFactory) -> None:
    harness = await harness_factory(file_reserved_time_ms=1_000, delete_when_hours=frozenset())
    store, clock = harness.store, harness.clock
    for _ in range(30):
        await store.put_message(request(body=bytes(900)))
    clock.advance_ms(10_000_000)
    assert await store.run_retention_once() == 0


async def test_retention_under_disk_pressure_ignores_age(harness_factory: StoreFactory) -> None:
    harness = await harness_factory(delete_when_hours=frozenset())
    store = harness.store
    for _ in range(30):
        await store.put_message(request(body=bytes(900)))
    harness.set_disk_used_percent(74)
    assert await store.run_retention_once() == 0
    harness.set_disk_used_percent(84)  # over diskMaxUsedSpaceRatio: only expired ones would go
    assert await store.run_retention_once() == 0
    harness.set_disk_used_percent(86)  # over diskSpaceCleanForciblyRatio: whatever their age
    deleted = await store.run_retention_once()
    assert deleted >= 1
    assert store.min_offset("orders", 0) > 0
    assert store.max_offset("orders", 0) == 30


async def test_a_put_at_once_is_the_same_put_without_a_coroutine(harness: Harness) -> None:
    store = harness.store
    assert store.puts_at_once  # the contract stores run ASYNC flush
    first = store.put_message_at_once(request(body=b"now", TAGS="a"))
    second = await store.put_message(request(body=b"later", TAGS="a"))
    assert first is not None and first.status is PutStatus.PUT_OK
    assert (first.queue_offset, second.queue_offset) == (0, 1)
    assert second.commit_log_offset == first.commit_log_offset + first.wrote_bytes
    refused = store.put_message_at_once(request(queue_id=-1))
    assert refused is not None and refused.status is PutStatus.MESSAGE_ILLEGAL
    got = store.get_message("orders", 0, 0, 32, HUGE)
    assert [decode_record(b)[0].body for b in got.buffers] == [b"now", b"later"]


async def test_a_list_of_puts_is_announced_once_per_queue_and_tags_code_at_its_end(
    harness: Harness,
) -> None:
    store = harness.store
    seen: list[tuple[str, int, int, int, tuple[int, int]]] = []

    def listener(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
        readable = (store.max_offset("orders", 0), store.max_offset("orders", 1))
        seen.append((topic, queue_id, max_offset, tags_code, readable))

    store.add_arrival_listener(listener)
    puts = [
        request(TAGS="A"),
        request(queue_id=1, TAGS="B"),
        request(TAGS="B"),
        PutRequest("orders", 99_999, b"x"),  # refused: the list goes on
        request(TAGS="A"),
    ]
    results = await store.put_message_list(puts)
    assert [result is not None and result.ok for result in results] == [
        True, True, True, False, True,
    ]  # fmt: skip
    a, b = java_string_hash("A"), java_string_hash("B")
    # After the whole list (every put readable), once per queue and distinct tags code.
    assert seen == [
        ("orders", 0, 3, a, (3, 1)),
        ("orders", 0, 3, b, (3, 1)),
        ("orders", 1, 1, b, (3, 1)),
    ]
    seen.clear()
    await store.put_message(request(TAGS="A"))  # a single put announces at once again
    assert seen == [("orders", 0, 4, a, (4, 1))]


async def test_puts_inside_a_held_block_are_announced_together_when_it_ends(
    harness: Harness,
) -> None:
    store = harness.store
    seen: list[tuple[str, int, int, int]] = []
    store.add_arrival_listener(lambda *arrival: seen.append(arrival))
    with store.notifications_held():
        assert (await store.put_message(request(TAGS="A"))).ok
        with store.notifications_held():  # nested: the outer block announces
            entries = [BatchEntry(0, b"x", "TAGS\x01B"), BatchEntry(0, b"y", "TAGS\x01A")]
            assert (await store.put_messages(BatchPutRequest("orders", 1, entries))).ok
            assert (await store.put_message(request(TAGS="A"))).ok
        assert seen == []
    a, b = java_string_hash("A"), java_string_hash("B")
    assert seen == [("orders", 0, 2, a), ("orders", 1, 2, b), ("orders", 1, 2, a)]

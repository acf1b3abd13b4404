"""SIGKILL a process appending under SYNC_FLUSH at seeded random moments, 20 times.

After every kill the store must recover so that every put that returned PUT_OK reads back
with the right bytes (by commit-log offset, by queue offset and by key), and nothing partial
is visible: every queue entry and every record of the log is whole and CRC-correct. The kill
moment is chosen by counting acknowledgements the child printed, never by time.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.protocol.record import BLANK_MAGIC_CODE, decode_record
from bolide.store.api import GetStatus
from bolide.store.file_store import FileMessageStore

from .store_child import QUEUES, STORE_HOST, TOPIC, config_for, message_for

KILLS = 20
SEED = 1_700_000_000
CHILD = Path(__file__).with_name("store_child.py")
FOREVER_MS = 1 << 62


def _run_child_until_killed(root: Path, first_number: int, kill_after: int) -> dict[int, int]:
    """Start a child, read ``kill_after`` acknowledgements, SIGKILL it; returns number → offset
    of every acknowledged message (the test's timeout bounds a child that hangs)."""
    process = subprocess.Popen(
        [sys.executable, str(CHILD), str(root), str(first_number), str(first_number)],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    acknowledged: dict[int, int] = {}
    try:
        ready = process.stdout.readline()
        assert ready == b"READY\n", ready
        while len(acknowledged) < kill_after:
            line = process.stdout.readline()
            assert line.startswith(b"ACK "), line
            _, number, offset = line.split()
            acknowledged[int(number)] = int(offset)
        process.send_signal(signal.SIGKILL)
        rest = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stdout.close()
    # Lines already written when the kill landed are acknowledgements too.
    for line in rest.splitlines():
        if line.startswith(b"ACK "):
            _, number, offset = line.split()
            acknowledged[int(number)] = int(offset)
    assert process.returncode == -signal.SIGKILL
    return acknowledged


async def _verify(root: Path, acknowledged: dict[int, int]) -> None:
    store = FileMessageStore(config_for(root), clock=ManualClock(), store_host=STORE_HOST)
    report = await store.start()
    try:
        assert not report.clean_shutdown
        for number, offset in acknowledged.items():
            queue_id, body, properties = message_for(number)
            view = store.read_record(offset)
            assert view is not None, f"acknowledged message {number} at {offset} is gone"
            message, _ = decode_record(view, verify_crc=True)
            assert (message.topic, message.queue_id, message.body) == (TOPIC, queue_id, body)
            assert message.properties == properties
            got = store.get_message(TOPIC, queue_id, message.queue_offset, 1, 1 << 30)
            assert got.status is GetStatus.FOUND and bytes(got.buffers[0]) == bytes(view)
        for number in list(acknowledged)[-5:]:
            found = store.query_by_key(TOPIC, f"m{number}", 4, 0, FOREVER_MS)
            assert [decode_record(v)[0].commit_log_offset for v in found] == [acknowledged[number]]
        _check_queues_whole(store)
        _check_log_whole(store)
    finally:
        await store.shutdown()


def _check_queues_whole(store: FileMessageStore) -> None:
    for queue_id in range(QUEUES):
        offset = store.min_offset(TOPIC, queue_id)
        while offset < store.max_offset(TOPIC, queue_id):
            got = store.get_message(TOPIC, queue_id, offset, 32, 1 << 30)
            assert got.status is GetStatus.FOUND
            for position, view in enumerate(got.buffers):
                message, _ = decode_record(view, verify_crc=True)
                assert message.queue_offset == offset + position
                assert message_for(int(message.properties["KEYS"][1:]))[1] == message.body
            offset = got.next_begin_offset


def _check_log_whole(store: FileMessageStore) -> None:
    stats = store.stats()
    segment = config_for(Path()).commit_log_segment_bytes
    offset = stats.commit_log_min_offset
    while offset < stats.commit_log_max_offset:
        view = store.read_record(offset)
        if view is None:
            # The only other thing in the log is a blank marker closing a segment.
            offset = (offset // segment + 1) * segment
            continue
        message, _ = decode_record(view, verify_crc=True)
        assert message.commit_log_offset == offset
        offset += len(view)
    assert offset == stats.commit_log_max_offset
    assert BLANK_MAGIC_CODE < 0


def test_sigkill_during_sync_appends_loses_no_acknowledged_message(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(SEED)
    acknowledged: dict[int, int] = {}
    for kill in range(KILLS):
        kill_after = rng.randrange(1, 120)
        acknowledged.update(_run_child_until_killed(root, (kill + 1) * 1_000_000, kill_after))
        asyncio.run(_verify(root, acknowledged))
    assert len(acknowledged) >= KILLS

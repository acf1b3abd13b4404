"""Child process for the SIGKILL test: appends under SYNC_FLUSH and reports every success.

Usage: ``python store_child.py STORE_ROOT FIRST_NUMBER SEED``. Prints ``READY`` once the store
has started, then one line ``ACK <number> <commit-log offset>`` per message whose put returned
PUT_OK, flushed at once. It never stops by itself before MAX_MESSAGES; the parent kills it.
The content of message ``n`` follows from ``n`` alone (see :func:`message_for`), so the parent
can check what it reads back.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

from bolide.base.clock import SystemClock
from bolide.protocol.record import BatchEntry
from bolide.store.api import BatchPutRequest, PutRequest, PutResult
from bolide.store.config import FlushDiskType, StoreConfig
from bolide.store.file_store import FileMessageStore

WRITERS = 6
MAX_MESSAGES = 50_000
TOPIC = "chaos"
QUEUES = 3
STORE_HOST = ("127.0.0.1", 10911)


def config_for(root: Path) -> StoreConfig:
    return StoreConfig(
        root,
        commit_log_segment_bytes=64 * 1024,
        consume_queue_file_entries=64,
        index_hash_slots=128,
        index_file_max_entries=512,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
    )


def message_for(number: int) -> tuple[int, bytes, dict[str, str]]:
    """(queue id, body, properties) of message ``number``."""
    rng = random.Random(number)
    body = rng.randbytes(rng.randrange(0, 3_000))
    return number % QUEUES, body, {"KEYS": f"m{number}", "UNIQ_KEY": f"U{number:012d}"}


def _properties_text(properties: dict[str, str]) -> str:
    return "\x02".join(f"{name}\x01{value}" for name, value in properties.items())


async def _writer(store: FileMessageStore, numbers: list[int], rng: random.Random) -> None:
    out = sys.stdout
    while numbers:
        if rng.random() < 0.2:
            queue_id = numbers[0] % QUEUES
            batch = [numbers.pop(0)]
            while numbers and len(batch) < 5 and numbers[0] % QUEUES == queue_id:
                batch.append(numbers.pop(0))
            entries = []
            for number in batch:
                _, body, properties = message_for(number)
                entries.append(BatchEntry(0, body, _properties_text(properties)))
            result = await store.put_messages(BatchPutRequest(TOPIC, queue_id, entries))
            _report(out, batch, result)
        else:
            number = numbers.pop(0)
            queue_id, body, properties = message_for(number)
            result = await store.put_message(PutRequest(TOPIC, queue_id, body, 0, properties))
            _report(out, [number], result)


def _report(out: object, numbers: list[int], result: PutResult) -> None:
    if not result.ok:
        return
    offset = result.commit_log_offset
    lines = []
    for number, message_id in zip(numbers, result.message_ids, strict=True):
        lines.append(f"ACK {number} {int(message_id[-16:], 16)}\n")
    assert offset == int(result.message_ids[0][-16:], 16)
    sys.stdout.write("".join(lines))
    sys.stdout.flush()


async def main(root: Path, first_number: int, seed: int) -> None:
    store = FileMessageStore(config_for(root), clock=SystemClock(), store_host=STORE_HOST)
    await store.start()
    print("READY", flush=True)
    rng = random.Random(seed)
    shares: list[list[int]] = [[] for _ in range(WRITERS)]
    for number in range(first_number, first_number + MAX_MESSAGES):
        shares[rng.randrange(WRITERS)].append(number)
    await asyncio.gather(*(_writer(store, share, rng) for share in shares))
    await store.shutdown()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))

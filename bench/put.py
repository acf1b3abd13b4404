"""The store's put path alone: CPU per message of MessageStore's put calls, no sockets.

What the broker's send handlers call, timed directly on a FileMessageStore (ASYNC flush) with
five arrival listeners registered (the broker registers five: long polling, POP, HA,
schedule, timer; here they are no-op functions of the same shape):

* ``single``: ``put_message_at_once`` one message per call (the raw single-send fast path);
* ``held``: ``single`` in groups of ``--batch`` inside ``notifications_held`` (the frames of
  one read: the listeners are told once per group, queue and tags code);
* ``coroutine``: ``await put_message`` one message per call (the general send path);
* ``list``: ``put_message_list`` of ``--batch`` requests per call;
* ``batch``: ``put_messages`` of a ``--batch``-entry BatchPutRequest (SEND_BATCH_MESSAGE,
  what the Python producer's auto-batch sends).

Each figure is CPU µs per message: the loop thread's (``thread``: the put itself) and the
whole process's (``process``: with the flush thread's msync of the written pages). Messages
carry TAGS, a UNIQ_KEY (indexed) and CLUSTER, as a producer's send does after the broker's
properties edit. Run it compiled and with ``BOLIDE_PURE_PYTHON=1`` to see the gain::

    .venv/bin/python bench/put.py [--messages 200000] [--body-bytes 128] [--batch 32]
                                  [--repeat 1] [--workloads single,...] [--json]
    BOLIDE_PURE_PYTHON=1 .venv/bin/python bench/put.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bolide.base import compiled
from bolide.base.clock import SystemClock
from bolide.protocol.record import BatchEntry
from bolide.store.api import BatchPutRequest, PutRequest
from bolide.store.config import StoreConfig
from bolide.store.file_store import FileMessageStore

TOPIC = "BenchTopic"
QUEUES = 8
STORE_HOST = ("127.0.0.1", 10911)
BORN_HOST = ("127.0.0.1", 50123)
LISTENER_COUNT = 5
WORKLOADS = ("single", "held", "coroutine", "list", "batch")


def _properties(number: int) -> str:
    return f"TAGS\x01TagA\x02UNIQ_KEY\x01{number:032X}\x02CLUSTER\x01DefaultCluster"


def _listener(topic: str, queue_id: int, max_offset: int, tags_code: int) -> None:
    del topic, queue_id, max_offset, tags_code


def _requests(count: int, body: bytes) -> list[PutRequest]:
    return [
        PutRequest(
            TOPIC,
            number % QUEUES,
            body,
            properties=_properties(number),
            born_host=BORN_HOST,
            born_timestamp_ms=1_700_000_000_000,
        )
        for number in range(count)
    ]


def _batches(count: int, body: bytes, batch: int) -> list[BatchPutRequest]:
    return [
        BatchPutRequest(
            TOPIC,
            (first // batch) % QUEUES,
            [BatchEntry(0, body, _properties(n)) for n in range(first, first + batch)],
            born_host=BORN_HOST,
            born_timestamp_ms=1_700_000_000_000,
            extra_properties="CLUSTER\x01DefaultCluster",
        )
        for first in range(0, count, batch)
    ]


def _inputs(workload: str, count: int, body: bytes, batch: int) -> list[object]:
    """The calls' arguments, built before the clock starts."""
    if workload in ("single", "coroutine"):
        return list(_requests(count, body))
    if workload in ("list", "held"):
        requests = _requests(count, body)
        return [requests[first : first + batch] for first in range(0, count, batch)]
    return list(_batches(count, body, batch))


async def _run(store: FileMessageStore, workload: str, inputs: list[object]) -> int:
    """Put ``inputs`` the ``workload`` way; returns how many messages were stored."""
    stored = 0
    if workload == "single":
        put_at_once = store.put_message_at_once
        for request in inputs:
            assert isinstance(request, PutRequest)
            result = put_at_once(request)
            stored += result is not None and result.ok
    elif workload == "held":
        put_at_once = store.put_message_at_once
        for group in inputs:
            assert isinstance(group, list)
            with store.notifications_held():
                for request in group:
                    result = put_at_once(request)
                    stored += result is not None and result.ok
    elif workload == "coroutine":
        for request in inputs:
            assert isinstance(request, PutRequest)
            stored += (await store.put_message(request)).ok
    elif workload == "list":
        for requests in inputs:
            assert isinstance(requests, list)
            results = await store.put_message_list(requests)
            stored += sum(1 for result in results if result is not None and result.ok)
    else:
        for batch_request in inputs:
            assert isinstance(batch_request, BatchPutRequest)
            result = await store.put_messages(batch_request)
            stored += result.message_count if result.ok else 0
    return stored


async def measure(
    root: Path, workload: str, count: int, body_bytes: int, batch: int
) -> dict[str, float]:
    """CPU µs per message (thread and process) and msgs/s of one workload on a fresh store."""
    store = FileMessageStore(StoreConfig(root), clock=SystemClock(), store_host=STORE_HOST)
    await store.start()
    for _ in range(LISTENER_COUNT):
        store.add_arrival_listener(_listener)
    body = bytes(body_bytes)
    await _run(store, workload, _inputs(workload, 2_048, body, batch))  # warm: files, caches
    inputs = _inputs(workload, count, body, batch)
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    stored = await _run(store, workload, inputs)
    wall = time.perf_counter() - wall
    thread = time.thread_time() - thread
    process = time.process_time() - process
    await store.shutdown()
    if stored != count:
        raise RuntimeError(f"{workload}: stored {stored} of {count}")
    return {
        "thread_us_per_msg": thread * 1e6 / count,
        "process_us_per_msg": process * 1e6 / count,
        "msgs_per_s": count / wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body-bytes", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each workload; the lowest CPU is kept"
    )
    parser.add_argument("--dir", type=Path, default=None, help="parent of the store directory")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures: dict[str, object] = {
        "hot_path": compiled.describe(),
        "load": os.getloadavg()[0],
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    for workload in args.workloads.split(","):
        runs = []
        for _ in range(args.repeat):
            root = Path(tempfile.mkdtemp(prefix="bolide-put-", dir=args.dir))
            try:
                runs.append(
                    asyncio.run(measure(root, workload, args.messages, args.body_bytes, args.batch))
                )
            finally:
                shutil.rmtree(root, ignore_errors=True)
        figures[workload] = min(runs, key=lambda run: run["thread_us_per_msg"])
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"$ {figures['command']}")
    print(f"hot path: {figures['hot_path']}; load {figures['load']:.2f}")
    print(f"{'workload':<10} {'thread µs/msg':>14} {'process µs/msg':>15} {'msgs/s':>11}")
    for workload in args.workloads.split(","):
        row = figures[workload]
        assert isinstance(row, dict)
        print(
            f"{workload:<10} {row['thread_us_per_msg']:>14.2f} "
            f"{row['process_us_per_msg']:>15.2f} {row['msgs_per_s']:>11,.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

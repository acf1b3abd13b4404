"""Storage engine throughput beside the raw disk, measured in the same run.

Figures (1 KiB records, i.e. a 1 KiB stored record with typical producer properties):

* raw buffered write (1 MiB and 1 KiB write() calls) and raw fdatasync/s on the same disk;
* ASYNC_FLUSH append, one put per message and batches of 32, msgs/s and MiB/s;
* read (get_message, 32 per call) over the whole log, msgs/s and MiB/s, beside a raw
  sequential read of the same files;
* recovery of the whole log with no usable checkpoint (the worst case: every record is
  checked and re-dispatched), seconds;
* SYNC_FLUSH append with N concurrent writers (group commit) beside ASYNC_FLUSH with the same
  writers, with the commit-log fdatasyncs per message (load-independent: how many puts one
  fsync covers);
* warm start: the page faults the event-loop thread takes during the first
  ``--warm-messages`` puts of a fresh store (ASYNC), and the slowest of those puts.

    .venv/bin/python bench/store.py [--volume-mib 1024] [--concurrent-messages 50000]
                                    [--writers 16] [--dir DIR] [--json]
                                    [--workloads async,batch,read,recovery,sync,warm]
                                    [--warm-messages 20000]

Each store figure also gives the process CPU time per message (all threads): on a shared
machine wall-clock rates move with the load, CPU per message much less. To see where the time
goes, run one workload under a sampling profiler, e.g.

    .venv/bin/py-spy record -f raw -o async.txt -- .venv/bin/python bench/store.py \
        --volume-mib 256 --workloads async
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bolide.base.clock import SystemClock
from bolide.protocol.record import BatchEntry, record_size
from bolide.store.api import BatchPutRequest, PutRequest
from bolide.store.config import FlushDiskType, StoreConfig
from bolide.store.file_store import FileMessageStore
from bolide.testing.waiting import until

RECORD_BYTES = 1024
TOPIC = "BenchTopic"
QUEUES = 8
BATCH = 32
STORE_HOST = ("127.0.0.1", 10911)
BORN_HOST = ("127.0.0.1", 50123)
MIB = 1024 * 1024
SYNC_SHARE_GOAL = 0.5
"""Issue 27: SYNC puts with N writers reach at least this share of ASYNC with the same N."""


def _properties(number: int) -> str:
    return f"UNIQ_KEY\x01{number:032X}\x02WAIT\x01true\x02TAGS\x01TagA"


def _body() -> bytes:
    overhead = record_size(
        body_length=0,
        topic_length=len(TOPIC),
        properties_length=len(_properties(0).encode()),
    )
    return bytes(RECORD_BYTES - overhead)


def _request(number: int, body: bytes) -> PutRequest:
    return PutRequest(
        TOPIC, number % QUEUES, body, properties=_properties(number), born_host=BORN_HOST
    )


def thread_faults() -> tuple[int, int]:
    """(minor, major) page faults of the calling thread so far (/proc/self/task/<tid>/stat)."""
    text = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[7]), int(fields[9])


def _timed(run: Callable[[], Any]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


class _Clocks:
    """Wall-clock and process CPU seconds of one timed section."""

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self._wall_started = 0.0
        self._cpu_started = 0.0

    def start(self) -> None:
        self._wall_started = time.perf_counter()
        self._cpu_started = time.process_time()

    def stop(self) -> None:
        self.wall_s = time.perf_counter() - self._wall_started
        self.cpu_s = time.process_time() - self._cpu_started


# --- raw disk ---------------------------------------------------------------------------------


def raw_write(directory: Path, volume_bytes: int, block_bytes: int) -> float:
    """Seconds to write ``volume_bytes`` sequentially in ``block_bytes`` write() calls."""
    path = directory / f"raw-{block_bytes}"
    block = bytes(block_bytes)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:

        def write_all() -> None:
            for _ in range(volume_bytes // block_bytes):
                os.write(fd, block)

        seconds = _timed(write_all)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        path.unlink()
    return seconds


def raw_fdatasync_per_second(directory: Path, count: int) -> float:
    """1 KiB appended then fdatasync, ``count`` times: fsyncs per second."""
    path = directory / "raw-fdatasync"
    block = bytes(RECORD_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:

        def sync_all() -> None:
            for _ in range(count):
                os.write(fd, block)
                os.fdatasync(fd)

        seconds = _timed(sync_all)
    finally:
        os.close(fd)
        path.unlink()
    return count / seconds


def raw_read_seconds(directory: Path, volume_bytes: int) -> float:
    """Seconds to read ``volume_bytes`` of the files under ``directory``, in name order,
    sequentially in 1 MiB blocks (the written part of the log, not its sparse tail)."""
    files = sorted(p for p in directory.iterdir() if p.is_file())

    def read_all() -> None:
        remaining = volume_bytes
        for path in files:
            with path.open("rb", buffering=0) as file:
                while remaining > 0:
                    block = file.read(min(MIB, remaining))
                    if not block:
                        break
                    remaining -= len(block)

    return _timed(read_all)


# --- store --------------------------------------------------------------------------------------


def _config(root: Path, flush: FlushDiskType) -> StoreConfig:
    return StoreConfig(root, flush_disk_type=flush)


async def _open(root: Path, flush: FlushDiskType) -> FileMessageStore:
    store = FileMessageStore(_config(root, flush), clock=SystemClock(), store_host=STORE_HOST)
    await store.start()
    return store


async def append_single(root: Path, count: int) -> _Clocks:
    store = await _open(root, FlushDiskType.ASYNC_FLUSH)
    body = _body()
    requests = [_request(number, body) for number in range(count)]
    clocks = _Clocks()
    clocks.start()
    for put in requests:
        result = await store.put_message(put)
        if not result.ok:
            raise RuntimeError(result.remark)
    clocks.stop()
    await store.shutdown()
    return clocks


async def append_batches(root: Path, count: int) -> _Clocks:
    store = await _open(root, FlushDiskType.ASYNC_FLUSH)
    body = _body()
    batches = []
    for first in range(0, count, BATCH):
        entries = [BatchEntry(0, body, _properties(n)) for n in range(first, first + BATCH)]
        batches.append(
            BatchPutRequest(TOPIC, (first // BATCH) % QUEUES, entries, born_host=BORN_HOST)
        )
    clocks = _Clocks()
    clocks.start()
    for batch in batches:
        result = await store.put_messages(batch)
        if not result.ok:
            raise RuntimeError(result.remark)
    clocks.stop()
    await store.shutdown()
    return clocks


async def read_all(root: Path) -> tuple[float, int, int]:
    """(seconds, messages, bytes) of reading every queue from its start, 32 per call."""
    store = await _open(root, FlushDiskType.ASYNC_FLUSH)
    messages = total_bytes = 0
    started = time.perf_counter()
    for queue_id in range(QUEUES):
        offset = store.min_offset(TOPIC, queue_id)
        end = store.max_offset(TOPIC, queue_id)
        while offset < end:
            got = store.get_message(TOPIC, queue_id, offset, 32, 256 * 1024)
            messages += got.message_count
            total_bytes += got.total_bytes
            offset = got.next_begin_offset
    seconds = time.perf_counter() - started
    await store.shutdown()
    return seconds, messages, total_bytes


async def recover_without_checkpoint(root: Path) -> tuple[float, int, float]:
    """Make the last shutdown look like a crash before any checkpoint, then time start():
    (wall seconds, records scanned, process CPU seconds, all threads)."""
    config = _config(root, FlushDiskType.ASYNC_FLUSH)
    config.checkpoint_path.unlink()
    config.abort_path.touch()
    store = FileMessageStore(config, clock=SystemClock(), store_host=STORE_HOST)
    started = time.perf_counter()
    cpu_started = time.process_time()
    report = await store.start()
    seconds = time.perf_counter() - started
    cpu_s = time.process_time() - cpu_started
    await store.shutdown()
    return seconds, report.records_scanned, cpu_s


async def warm_start(root: Path, count: int, *, created_ahead: bool) -> dict[str, float]:
    """The first ``count`` puts of a fresh store, one at a time: the loop thread's page
    faults (minor, major) over them, the faults per 1,000 puts, and the slowest put (µs).
    ``created_ahead``: the topic's queue files are made first (what the broker does when an
    admin creates the topic, FileMessageStore.prepare_queues), else the first puts make them."""
    store = await _open(root, FlushDiskType.ASYNC_FLUSH)
    if created_ahead and hasattr(store, "prepare_queues"):  # older stores: no such step
        store.prepare_queues(TOPIC, QUEUES)
        await until(lambda: not store.queue_files_in_the_making())
        await asyncio.sleep(0)  # the files are put in place by callbacks on the loop
    body = _body()
    requests = [_request(number, body) for number in range(count)]
    slowest_ns = 0
    minor_before, major_before = thread_faults()
    for put in requests:
        started_ns = time.perf_counter_ns()
        result = await store.put_message(put)
        slowest_ns = max(slowest_ns, time.perf_counter_ns() - started_ns)
        if not result.ok:
            raise RuntimeError(result.remark)
    minor_after, major_after = thread_faults()
    await store.shutdown()
    minor = minor_after - minor_before
    name = "warm_ahead" if created_ahead else "warm"
    return {
        f"{name}_loop_minor_faults": minor,
        f"{name}_loop_major_faults": major_after - major_before,
        f"{name}_loop_minor_faults_per_1000": minor / count * 1000,
        f"{name}_slowest_put_us": slowest_ns / 1000,
        "warm_messages": count,
    }


async def append_concurrent(
    root: Path, flush: FlushDiskType, count: int, writers: int
) -> tuple[_Clocks, int]:
    """``writers`` tasks each awaiting its own put; returns the clocks and the commit-log
    SYNC fdatasyncs (flush rounds) the run took (0 under ASYNC)."""
    store = await _open(root, flush)
    rounds_before = store.flush_latency_us.count
    body = _body()

    async def writer(first: int) -> None:
        for number in range(first, count, writers):
            result = await store.put_message(_request(number, body))
            if not result.ok:
                raise RuntimeError(result.remark)

    clocks = _Clocks()
    clocks.start()
    await asyncio.gather(*(writer(first) for first in range(writers)))
    clocks.stop()
    rounds = store.flush_latency_us.count - rounds_before
    await store.shutdown()
    return clocks, rounds


# --- driver -------------------------------------------------------------------------------------


def _rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _add_put_figures(
    figures: dict[str, float], name: str, count: int, volume_mib: float, clocks: _Clocks
) -> None:
    figures[f"{name}_msgs_s"] = _rate(count, clocks.wall_s)
    figures[f"{name}_mib_s"] = _rate(volume_mib, clocks.wall_s)
    figures[f"{name}_cpu_us_per_msg"] = clocks.cpu_s / count * 1e6


def run(arguments: argparse.Namespace) -> dict[str, float]:
    base = Path(tempfile.mkdtemp(prefix="bolide-bench-store-", dir=arguments.dir))
    volume = arguments.volume_mib * MIB
    count = volume // RECORD_BYTES
    workloads = set(arguments.workloads.split(","))
    figures: dict[str, float] = {"load_average_start": os.getloadavg()[0]}
    try:
        figures["raw_write_1mib_mib_s"] = _rate(volume / MIB, raw_write(base, volume, MIB))
        figures["raw_write_1kib_mib_s"] = _rate(volume / MIB, raw_write(base, volume, RECORD_BYTES))
        figures["raw_fdatasync_per_s"] = raw_fdatasync_per_second(base, arguments.fsyncs)
        single = base / "single"
        if workloads & {"async", "read", "recovery"}:
            clocks = asyncio.run(append_single(single, count))
            _add_put_figures(figures, "async_put", count, volume / MIB, clocks)
        if "batch" in workloads:
            batched = base / "batched"
            clocks = asyncio.run(append_batches(batched, count))
            _add_put_figures(figures, "async_batch", count, volume / MIB, clocks)
            shutil.rmtree(batched)
        if "read" in workloads:
            seconds, messages, read_bytes = asyncio.run(read_all(single))
            figures["read_msgs_s"] = _rate(messages, seconds)
            figures["read_mib_s"] = _rate(read_bytes / MIB, seconds)
            figures["raw_read_mib_s"] = _rate(
                volume / MIB, raw_read_seconds(single / "commitlog", volume)
            )
        if "recovery" in workloads:
            seconds, scanned, cpu_s = asyncio.run(recover_without_checkpoint(single))
            figures["recovery_s"] = seconds
            figures["recovery_cpu_s"] = cpu_s
            figures["recovery_records"] = scanned
        shutil.rmtree(single, ignore_errors=True)
        if "sync" in workloads:
            concurrent = arguments.concurrent_messages
            for name, flush in (
                ("sync_put", FlushDiskType.SYNC_FLUSH),
                ("async_concurrent_put", FlushDiskType.ASYNC_FLUSH),
            ):
                clocks, rounds = asyncio.run(
                    append_concurrent(base / name, flush, concurrent, arguments.writers)
                )
                _add_put_figures(figures, name, concurrent, concurrent / 1024, clocks)
                figures[f"{name}_fdatasyncs_per_msg"] = rounds / concurrent
        if "warm" in workloads:
            for created_ahead in (False, True):
                directory = base / f"warm-{created_ahead}"
                figures.update(
                    asyncio.run(
                        warm_start(directory, arguments.warm_messages, created_ahead=created_ahead)
                    )
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    figures["load_average_end"] = os.getloadavg()[0]
    return figures


def _put_row(figures: dict[str, float], label: str, name: str, note: str) -> tuple[str, ...]:
    return (
        label,
        f"{figures[f'{name}_msgs_s']:,.0f} msgs/s {figures[f'{name}_mib_s']:,.0f} MiB/s",
        f"{figures[f'{name}_cpu_us_per_msg']:.1f} us cpu/msg",
        note,
    )


def report(figures: dict[str, float], arguments: argparse.Namespace) -> str:
    raw_mib = figures["raw_write_1mib_mib_s"]
    raw_small_mib = figures["raw_write_1kib_mib_s"]
    rows: list[tuple[str, ...]] = [
        ("raw write() 1 MiB blocks", f"{raw_mib:,.0f} MiB/s", "", ""),
        ("raw write() 1 KiB blocks", f"{raw_small_mib:,.0f} MiB/s", "", ""),
        ("raw 1 KiB write + fdatasync", f"{figures['raw_fdatasync_per_s']:,.0f} /s", "", ""),
    ]
    for label, name in (
        ("ASYNC put, 1 per call", "async_put"),
        (f"ASYNC put, batches of {BATCH}", "async_batch"),
    ):
        if f"{name}_msgs_s" in figures:
            mib = figures[f"{name}_mib_s"]
            note = f"{mib / raw_mib:.0%} of raw 1 MiB write, {mib / raw_small_mib:.0%} of 1 KiB"
            rows.append(_put_row(figures, label, name, note))
    if "read_msgs_s" in figures:
        rows.append(
            (
                "read (get_message, 32/call)",
                f"{figures['read_msgs_s']:,.0f} msgs/s {figures['read_mib_s']:,.0f} MiB/s",
                "",
                f"raw sequential read {figures['raw_read_mib_s']:,.0f} MiB/s",
            )
        )
    if "recovery_s" in figures:
        rows.append(
            (
                f"recovery of {arguments.volume_mib} MiB, no checkpoint",
                f"{figures['recovery_s']:.1f} s ({figures['recovery_records']:,.0f} records)",
                f"{figures['recovery_cpu_s']:.1f} s cpu",
                "",
            )
        )
    if "sync_put_msgs_s" in figures:
        writers = arguments.writers
        asynchronous = figures["async_concurrent_put_msgs_s"]
        rows.append(
            _put_row(
                figures,
                f"SYNC put, {writers} writers",
                "sync_put",
                f"{figures['sync_put_msgs_s'] / asynchronous:.0%} of ASYNC with {writers} writers",
            )
        )
        rows.append(
            (
                f"SYNC put, {writers} writers, fsyncs",
                f"{figures['sync_put_fdatasyncs_per_msg']:.4f} fdatasync/msg",
                f"{1 / max(figures['sync_put_fdatasyncs_per_msg'], 1e-9):.1f} msgs/fsync",
                "",
            )
        )
        rows.append(_put_row(figures, f"ASYNC put, {writers} writers", "async_concurrent_put", ""))
    for name, how in (("warm", "new topic"), ("warm_ahead", "topic created ahead")):
        if f"{name}_loop_minor_faults" not in figures:
            continue
        rows.append(
            (
                f"warm start, first {figures['warm_messages']:,.0f} puts, {how}",
                f"{figures[f'{name}_loop_minor_faults']:,.0f} minor faults on the loop thread",
                f"{figures[f'{name}_loop_minor_faults_per_1000']:.1f} /1000 puts",
                f"{figures[f'{name}_loop_major_faults']:,.0f} major; slowest put "
                f"{figures[f'{name}_slowest_put_us']:,.0f} us",
            )
        )
    widths = [max(len(row[column]) for row in rows) + 2 for column in range(3)]
    lines = [
        "".join(f"{cell:<{width}}" for cell, width in zip(row[:3], widths, strict=True)) + row[3]
        for row in rows
    ]
    if "sync_put_msgs_s" in figures:
        lines.append(f"goal {goal_line(figures, arguments.writers)}")
    return "\n".join(line.rstrip() for line in lines)


def goal_line(figures: dict[str, float], writers: int) -> str:
    """Issue 27's store goal: SYNC with ``writers`` writers over ASYNC with as many."""
    synchronous = figures["sync_put_msgs_s"]
    share = synchronous / figures["async_concurrent_put_msgs_s"]
    verdict = "met" if share >= SYNC_SHARE_GOAL else "NOT met"
    return (
        f"store {writers} SYNC writers = {share:.0%} of {writers} ASYNC writers"
        f" ({synchronous:,.0f} vs {figures['async_concurrent_put_msgs_s']:,.0f} msgs/s,"
        f" {figures['sync_put_fdatasyncs_per_msg']:.4f} fdatasync/msg);"
        f" goal >= {SYNC_SHARE_GOAL:.0%}: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volume-mib", type=int, default=1024, help="log size for the runs")
    parser.add_argument("--concurrent-messages", type=int, default=50_000)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--warm-messages", type=int, default=20_000, help="warm-start puts")
    parser.add_argument("--fsyncs", type=int, default=2_000, help="raw fdatasync samples")
    parser.add_argument("--dir", default=None, help="where to write (default: temp dir)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--goal", action="store_true", help="print only the SYNC/ASYNC goal line (compare.sh)"
    )
    parser.add_argument(
        "--workloads",
        default="async,batch,read,recovery,sync,warm",
        help="comma-separated subset of async,batch,read,recovery,sync,warm",
    )
    arguments = parser.parse_args()
    try:
        import uvloop  # the broker's loop

        uvloop.install()
    except ImportError:
        pass
    figures = run(arguments)
    if arguments.goal and "sync_put_msgs_s" in figures:
        print(f"goal {goal_line(figures, arguments.writers)}")
        return
    if arguments.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, load average "
        f"{figures['load_average_start']:.1f} at start, {figures['load_average_end']:.1f} at end"
    )
    print(report(figures, arguments))


if __name__ == "__main__":
    main()

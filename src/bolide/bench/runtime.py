"""What every ``bolide bench`` workload shares: its settings, the stamped bodies, the latency
recorder, the broker it starts (``bolide standalone`` in a child process), CPU clocks, and the
result line.

The result line is the contract with ``bench/compare.sh`` (``bench/peers/README.md``, schema
``bolide-bench/1``): one JSON object, printed last on stdout. Bolide cannot import bench/, so
the format is written out again here, field for field.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from bolide.base import limits
from bolide.base.children import child_environment
from bolide.base.errors import ConfigError

__all__ = [
    "CLOCK_TICKS_PER_S",
    "RESULT_SCHEMA",
    "STAMP_BYTES",
    "BenchMode",
    "BenchResult",
    "BenchSettings",
    "BrokerProcess",
    "LatencyRecorder",
    "LatencySummary",
    "StampedBodies",
    "Stopwatch",
    "Workload",
    "durability_text",
    "proc_stat_fields",
    "process_cpu_s",
    "process_tree_cpu_s",
    "read_stamp_ns",
]

RESULT_SCHEMA = "bolide-bench/1"
STAMP_BYTES = 8
MIB = 1024 * 1024
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
"""Unit of utime and stime in /proc/<pid>/stat (ticks per second)."""

# The stamp at the head of every body: CLOCK_MONOTONIC in ns, one clock for every process of
# the machine, so a consumer in another process can subtract it.
#
#   +------------------------------+----------------------------------+
#   | monotonic_ns, int64 LE (8 B) | random filler (message_bytes - 8) |
#   +------------------------------+----------------------------------+
_STAMP = struct.Struct("<q")


class Workload(enum.StrEnum):
    PRODUCE = "produce"
    CONSUME = "consume"
    E2E = "e2e"


class BenchMode(enum.StrEnum):
    """Which client drives the broker."""

    CLIENT = "client"
    """``bolide.aio.Producer`` and ``bolide.aio.PushConsumer``: what an application gets."""
    RAW = "raw"
    """Pre-built SEND_MESSAGE_V2 / PULL_MESSAGE requests over the remoting layer: less client
    CPU per message, so the figure is closer to what the broker alone can do."""


@dataclass(frozen=True)
class BenchSettings:
    """One run's parameters (the options of ``bolide bench``).

    ``messages`` 0 means "as many as ``max_seconds`` allows" (a run by duration).
    ``batch_size`` messages go in one send request (SEND_BATCH_MESSAGE when above 1).
    ``queues`` is the topic's queue count. Times in seconds, sizes in bytes.

    Raises:
        ConfigError: a value out of range (see :meth:`check`).
    """

    workload: Workload
    flush: str
    mode: BenchMode
    message_bytes: int
    messages: int
    producers: int
    in_flight: int
    consumers: int
    pull_batch: int
    batch_size: int
    rate_per_s: int
    e2e_seconds: float
    max_seconds: float
    queues: int
    warm_up: bool = True

    def __post_init__(self) -> None:
        if not STAMP_BYTES <= self.message_bytes <= limits.MESSAGE_BODY_MAX_BYTES:
            raise ConfigError(
                f"--message-bytes must be within {STAMP_BYTES}..{limits.MESSAGE_BODY_MAX_BYTES}"
            )
        if self.flush not in ("async", "sync"):
            raise ConfigError(f"--flush must be async or sync, not {self.flush!r}")
        if self.messages < 0:
            raise ConfigError("--messages must be 0 (run by duration) or more")
        counts = {
            "--producers": self.producers,
            "--in-flight": self.in_flight,
            "--consumers": self.consumers,
            "--pull-batch": self.pull_batch,
            "--batch-size": self.batch_size,
            "--rate-per-s": self.rate_per_s,
            "--queues": self.queues,
        }
        for name, value in counts.items():
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, not {value}")
        if self.pull_batch > limits.CONSUME_BATCH_LIMIT_MESSAGES:
            raise ConfigError(f"--pull-batch must be at most {limits.CONSUME_BATCH_LIMIT_MESSAGES}")
        if self.batch_size > limits.CONSUME_BATCH_LIMIT_MESSAGES:
            raise ConfigError(f"--batch-size must be at most {limits.CONSUME_BATCH_LIMIT_MESSAGES}")
        if self.e2e_seconds <= 0 or self.max_seconds <= 0:
            raise ConfigError("--e2e-seconds and --max-seconds must be positive")


def durability_text(flush: str, external: bool) -> str:
    """What the flush mode means for Bolide, in the words of the peers' README."""
    if external:
        return "as configured on the broker under test (not started by the bench)"
    if flush == "sync":
        return "SYNC_FLUSH: group commit, SEND_OK after the fsync that covers the message"
    return "ASYNC_FLUSH: commit log in the page cache before SEND_OK, flushed every 500 ms"


class StampedBodies:
    """Bodies of ``message_bytes``: a fresh stamp followed by random (incompressible) bytes."""

    def __init__(self, message_bytes: int) -> None:
        self._filler = os.urandom(message_bytes - STAMP_BYTES)

    def stamped(self) -> bytes:
        """A body stamped now (``time.monotonic_ns``)."""
        return _STAMP.pack(time.monotonic_ns()) + self._filler


def read_stamp_ns(body: bytes | memoryview) -> int:
    """The publisher's CLOCK_MONOTONIC reading at the head of ``body``, ns.

    Raises:
        ValueError: the body is shorter than the stamp.
    """
    if len(body) < STAMP_BYTES:
        raise ValueError(f"body of {len(body)} bytes has no stamp")
    return int(_STAMP.unpack_from(body)[0])


@dataclass(frozen=True)
class LatencySummary:
    """Percentiles (nearest rank over every sample) in microseconds."""

    p50: float
    p99: float
    p999: float
    max: float
    samples: int


class LatencyRecorder:
    """Every latency sample (ns) of a run, up to ``BENCH_LATENCY_SAMPLES_MAX_COUNT``."""

    def __init__(self) -> None:
        self._samples_ns = array("q")
        self.dropped = 0

    def record(self, latency_ns: int) -> None:
        if len(self._samples_ns) < limits.BENCH_LATENCY_SAMPLES_MAX_COUNT:
            self._samples_ns.append(latency_ns)
        else:
            self.dropped += 1

    def record_many(self, latency_ns: int, count: int) -> None:
        """``count`` samples of the same latency (a batch send: every message waited as long)."""
        if count == 1 and len(self._samples_ns) < limits.BENCH_LATENCY_SAMPLES_MAX_COUNT:
            self._samples_ns.append(latency_ns)  # the usual single send, without a list
            return
        room = limits.BENCH_LATENCY_SAMPLES_MAX_COUNT - len(self._samples_ns)
        kept = max(0, min(count, room))
        self._samples_ns.extend([latency_ns] * kept)
        self.dropped += count - kept

    def __len__(self) -> int:
        return len(self._samples_ns)

    def summary(self) -> LatencySummary | None:
        """The percentiles, or None without samples."""
        if not self._samples_ns:
            return None
        ordered = sorted(self._samples_ns)

        def rank_us(quantile: float) -> float:
            index = min(len(ordered) - 1, max(0, round(quantile * len(ordered)) - 1))
            return ordered[index] / 1_000

        return LatencySummary(
            p50=rank_us(0.50),
            p99=rank_us(0.99),
            p999=rank_us(0.999),
            max=ordered[-1] / 1_000,
            samples=len(ordered),
        )


# --- CPU clocks ---------------------------------------------------------------------------------
#
# /proc/<pid>/stat after the command name in parentheses (which may hold spaces):
#
#   +-------+------+-----+-------+-------+-----
#   | state | ppid | ... | utime | stime | ...
#   +-------+------+-----+-------+-------+-----
#     [0]     [1]          [11]    [12]         (fields 3, 4, 14, 15 of proc(5)), clock ticks


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc.

    Raises:
        ProcessLookupError: ``pid`` is not running (or this is not Linux).
    """
    try:
        fields = proc_stat_fields(Path(f"/proc/{pid}/stat"))
    except OSError as error:
        raise ProcessLookupError(pid) from error
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def proc_stat_fields(stat_path: Path) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` file after the command name, indexed as drawn
    above ([1] ppid, [11] utime, [12] stime).

    Raises:
        OSError: the file cannot be read (the process ended, or this is not Linux).
    """
    text = stat_path.read_text()
    return text[text.rindex(")") + 2 :].split()


def _stat_fields_or_none(stat_path: Path) -> list[str] | None:
    try:
        return proc_stat_fields(stat_path)
    except OSError:  # the process ended between listing /proc and reading it
        return None


def process_tree_cpu_s(root_pid: int) -> float:
    """User + system CPU seconds of ``root_pid`` and its live descendants.

    A tree, because some servers are a wrapper around the real process (rabbitmq-server is a
    shell script that runs the Erlang VM as its child).

    Raises:
        ProcessLookupError: ``root_pid`` is not running.
    """
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields_or_none(entry / "stat")
        if fields is None:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    if root_pid not in ticks:
        raise ProcessLookupError(root_pid)
    total = 0
    for pid, pid_ticks in ticks.items():
        ancestor = pid
        while ancestor not in (root_pid, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root_pid:
            total += pid_ticks
    return total / CLOCK_TICKS_PER_S


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class PhaseMeasure:
    """Wall time and CPU of one timed phase."""

    elapsed_s: float
    server_cpu_s: float | None
    client_cpu_s: float


class Stopwatch:
    """Wall time, this process's CPU and the broker's CPU (when its pid is known) over a phase."""

    def __init__(self, broker_pid: int | None) -> None:
        self._broker_pid = broker_pid
        self._server_cpu_s = self._read_server()
        self._client_cpu_s = _own_cpu_s()
        self._started = time.perf_counter()

    def _read_server(self) -> float | None:
        if self._broker_pid is None:
            return None
        try:
            return process_cpu_s(self._broker_pid)
        except ProcessLookupError:
            return None

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    def stop(self) -> PhaseMeasure:
        elapsed_s = self.elapsed_s()
        server_now = self._read_server()
        server_cpu_s = (
            None
            if server_now is None or self._server_cpu_s is None
            else server_now - self._server_cpu_s
        )
        return PhaseMeasure(elapsed_s, server_cpu_s, _own_cpu_s() - self._client_cpu_s)


# --- the result line ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One run of one workload on one system: the JSON object of the contract
    (bench/peers/README.md), the one type ``bolide bench`` and the peers' runner both write."""

    system: str
    system_version: str
    workload: str
    flush: str
    durability: str
    message_bytes: int
    messages: int
    expected_messages: int
    errors: int
    producers: int
    in_flight: int
    consumers: int
    pull_batch: int
    rate_per_s: int | None
    elapsed_s: float
    msgs_per_s: float
    mib_per_s: float
    latency_us: LatencySummary | None
    server_cpu_s: float | None
    client_cpu_s: float
    complete: bool
    schema: str = RESULT_SCHEMA

    def to_json(self) -> str:
        """One line of JSON, keys sorted."""
        return orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS).decode()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class BenchResult(RunResult):
    """A run of ``bolide bench``: the contract's fields plus Bolide's extras (``mode``,
    ``batch_size``, ``queues``, ``latency_dropped``, ``load_average``)."""

    system: str = "bolide"
    mode: str
    batch_size: int
    queues: int
    latency_dropped: int
    load_average: tuple[float, float, float]


def build_result(
    settings: BenchSettings,
    *,
    external: bool,
    messages: int,
    expected_messages: int,
    errors: int,
    measure: PhaseMeasure,
    latency: LatencyRecorder | None,
) -> BenchResult:
    """The result of one run from what its phase counted and measured."""
    from bolide import __version__

    elapsed_s = measure.elapsed_s
    rate = messages / elapsed_s if elapsed_s > 0 else 0.0
    is_e2e = settings.workload is Workload.E2E
    return BenchResult(
        system_version=__version__,
        workload=str(settings.workload),
        flush=settings.flush,
        durability=durability_text(settings.flush, external),
        message_bytes=settings.message_bytes,
        messages=messages,
        expected_messages=expected_messages,
        errors=errors,
        producers=settings.producers,
        in_flight=settings.in_flight,
        consumers=settings.consumers,
        pull_batch=settings.pull_batch,
        rate_per_s=settings.rate_per_s if is_e2e else None,
        elapsed_s=elapsed_s,
        msgs_per_s=rate,
        mib_per_s=rate * settings.message_bytes / MIB,
        latency_us=None if latency is None else latency.summary(),
        server_cpu_s=measure.server_cpu_s,
        client_cpu_s=measure.client_cpu_s,
        complete=messages >= expected_messages,
        mode=str(settings.mode),
        batch_size=settings.batch_size,
        queues=settings.queues,
        latency_dropped=0 if latency is None else latency.dropped,
        load_average=os.getloadavg(),
    )


# --- the broker ---------------------------------------------------------------------------------


class BrokerProcess:
    """``bolide standalone`` in a child process: 127.0.0.1, ports chosen by the system, a fresh
    temporary data directory (removed at :meth:`stop`), the given flush mode. Its log goes to
    ``<data dir>/logs`` and its stderr to ``<data dir>/stderr.log`` (shown if it fails to start).
    """

    def __init__(self, flush: str) -> None:
        self._flush = flush
        self._directory: Path | None = None
        self._process: asyncio.subprocess.Process | None = None
        self.namesrv = ""
        self.broker = ""

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def start(self) -> None:
        """Start it and wait for its ready line (``BENCH_BROKER_START_TIMEOUT_MS`` at most).

        Raises:
            ConfigError: it exited or printed no ready line in time (its stderr is quoted).
        """
        self._directory = Path(tempfile.mkdtemp(prefix="bolide-bench-"))
        bolide = str(Path(sys.executable).parent / "bolide")
        with (self._directory / "stderr.log").open("wb") as stderr:
            self._process = await asyncio.create_subprocess_exec(
                bolide, "standalone", "--host", "127.0.0.1",
                "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
                "--no-metrics", "--no-dashboard",
                "--data-dir", str(self._directory / "data"), "--flush", self._flush,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=stderr, env=child_environment(),
            )  # fmt: skip
        stdout = self._process.stdout
        if stdout is None:  # cannot happen with stdout=PIPE; keeps mypy honest
            raise ConfigError("no pipe from the broker")
        try:
            async with asyncio.timeout(limits.BENCH_BROKER_START_TIMEOUT_MS / 1000):
                line = (await stdout.readline()).decode()
        except TimeoutError:
            line = ""
        fields = dict(part.split("=", 1) for part in line.split()[2:] if "=" in part)
        if "namesrv" not in fields or "broker" not in fields:
            await self.stop(keep_directory=True)
            raise ConfigError(f"bolide standalone did not start: {self._stderr_tail()}")
        self.namesrv, self.broker = fields["namesrv"], fields["broker"]

    def _stderr_tail(self) -> str:
        if self._directory is None:
            return ""
        with contextlib.suppress(OSError):
            text = (self._directory / "stderr.log").read_text(errors="replace")
            return text[-2000:].strip() or "(no output)"
        return "(no output)"

    async def stop(self, *, keep_directory: bool = False) -> None:
        """SIGTERM, wait ``BENCH_BROKER_STOP_TIMEOUT_MS``, then SIGKILL; remove the data
        directory. Idempotent. Safe to call while the bench is being cancelled: cancelled
        while it waits, it SIGKILLs the broker before passing the cancellation on."""
        process = self._process
        try:
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                try:
                    async with asyncio.timeout(limits.BENCH_BROKER_STOP_TIMEOUT_MS / 1000):
                        await process.wait()
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
        except BaseException:
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            raise
        finally:
            if self._directory is not None and not keep_directory:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None

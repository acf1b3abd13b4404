"""What every listener's fuzzer shares (bench/fuzz_<listener>.py, issue 30).

A fuzzer starts ``bolide standalone`` in a child process with every listener on (name server,
broker and its VIP channel, HA, the 5.x proxy, metrics, dashboard; ports chosen by the
system, a temporary data directory), measures it, sends mutated traffic at one listener for a
time or request budget, checks between rounds that the server still answers a valid request,
then measures again and prints::

    fuzz <listener>: seed S, N requests in T s (M connections)
    server errors logged (unhandled): E (first: ...); refusals logged at ERROR: R
    crashes: 0   still serving: yes   connections left open: 0
    RSS KiB: before -> after   open fds: before -> after
    verdict: ok | FAILED (why)

The exit status is 1 on a crash, a server that stopped serving, an unhandled exception in
the server's log or connections the server left open; 0 otherwise. Each fuzzer declares itself as a
:class:`Fuzzer` (``FUZZER``), which tests/fuzz/ run with a small budget.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson

from bolide.base.children import child_environment
from bolide.base.errors import ProtocolError
from bolide.protocol.command import RemotingCommand, encode_command
from bolide.remoting import loop as remoting_loop

__all__ = [
    "INTERESTING_INTS",
    "INTERESTING_TEXTS",
    "Attack",
    "FuzzReport",
    "Fuzzer",
    "Mutator",
    "ServerUnderTest",
    "exchange",
    "main",
]

START_TIMEOUT_S = 120.0
"""A loaded 2-core machine takes seconds to import and open a store."""
STOP_TIMEOUT_S = 60.0
"""SIGTERM, then this long for the server to stop cleanly, then SIGKILL."""
READ_TIMEOUT_S = 0.5
"""How long one fuzz exchange waits for an answer: a garbled request is often never answered."""
ROUND_EXCHANGES = 200
"""Exchanges between two liveness checks (a fuzzer may ask for more: ``round_exchanges``). A
round lasts as long as its slowest exchange, so a fuzzer with many exchanges in flight wants
long rounds."""
SETTLE_TIMEOUT_S = 30.0
"""After the run, how long the server gets to close what the fuzzer left (closed sockets)."""
SLOW_WRITE_PAUSE_S = 0.002
"""Pause between the pieces of a slow write: long enough for the server to read each alone."""
SLOW_WRITE_MAX_PIECES = 64
"""Pieces of a slow write sent one by one; the rest of the payload follows at once. The
partial reads under test happen in the first pieces (a frame's length, its header's start); a
70 KB payload in 16-byte pieces would hold its round for ~10 s and add nothing."""
STREAM_MIN_FRAMES, STREAM_MAX_FRAMES = 64, 256
"""A long pipelined stream of mutated requests on one connection (``remoting_round``'s
``streams``): the server's read loop and answer queue under a backlog."""

INTERESTING_INTS = (
    0, -1, 1, 2**7 - 1, 2**7, 2**15 - 1, 2**15, 2**16, 2**31 - 1, 2**31, -(2**31), 2**32,
    2**63 - 1, -(2**63), 2**64,
)  # fmt: skip
INTERESTING_TEXTS = (
    "", " ", "null", "true", "NaN", "-0", "1e309", "0x10", "%DLQ%", "%RETRY%x", "TBW102",
    "\u0000", "\u2028", "\ud800", "é" * 3, "a" * 300, "x" * 70_000, "*", "||", "a\nb", "{}", "[]",
    "127.0.0.1:0", "999.999.999.999:99999", ";;;", "\\", "\"", "'", "${jndi:x}",
)  # fmt: skip


class Mutator:
    """Seeded mutations of bytes and text (all randomness of a run comes from ``rng``)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def garbage(self, max_bytes: int = 4096) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, max_bytes))

    def text(self, original: str) -> str:
        """A value for a header field: interesting, numeric edge, mangled, or the original."""
        choice = self.rng.randrange(6)
        if choice == 0:
            return self.rng.choice(INTERESTING_TEXTS)
        if choice == 1:
            return str(self.rng.choice(INTERESTING_INTS))
        if choice == 2:
            return original + self.rng.choice(INTERESTING_TEXTS)
        if choice == 3 and original:
            cut = self.rng.randrange(len(original))
            return original[:cut]
        if choice == 4:
            return self.bytes(original.encode()).decode("utf-8", "replace")
        return original

    def bytes(self, data: bytes) -> bytes:
        """One to four edits: bit flips, cuts, inserts, duplicated slices, interesting ints."""
        buffer = bytearray(data)
        for _ in range(self.rng.randint(1, 4)):
            self._edit(buffer)
        return bytes(buffer)

    def _edit(self, buffer: bytearray) -> None:
        rng = self.rng
        choice = rng.randrange(6)
        position = rng.randrange(len(buffer) + 1)
        if choice == 0 and buffer:
            index = rng.randrange(len(buffer))
            buffer[index] ^= 1 << rng.randrange(8)
        elif choice == 1 and buffer:
            del buffer[position : position + rng.randint(1, 64)]
        elif choice == 2:
            buffer[position:position] = rng.randbytes(rng.randint(1, 64))
        elif choice == 3 and buffer:
            start = rng.randrange(len(buffer))
            buffer[position:position] = buffer[start : start + rng.randint(1, 256)]
        elif choice == 4 and len(buffer) >= 4:
            index = rng.randrange(len(buffer) - 3)
            value = rng.choice(INTERESTING_INTS) & 0xFFFFFFFF
            buffer[index : index + 4] = value.to_bytes(4, "big")
        elif buffer:
            del buffer[position:]


_UNHANDLED = re.compile(
    r"Traceback|exception was never retrieved|Exception in callback|Unhandled|CRITICAL"
    r"|Task was destroyed but it is pending"
    r"| ERROR bolide\.store"
)
"""Log lines that are defects whatever the input was. An ERROR of the store is one: no peer's
request should make a flush or a write fail (a fuzzed DELETE_TOPIC once did)."""
_ERROR_LINE = re.compile(r" ERROR ")

# --- the server -------------------------------------------------------------------------------


@dataclass
class ServerUnderTest:
    """``bolide standalone`` with every listener on, in a child process."""

    root: Path
    process: subprocess.Popen[bytes] | None = None
    listeners: dict[str, str] = field(default_factory=dict)
    client_side_errors: list[str] = field(default_factory=list)
    """Server faults the fuzzer saw in answers (a gRPC UNKNOWN, an HTTP 500): counted with
    the unhandled exceptions of the log."""

    @property
    def log_path(self) -> Path:
        return self.root / "stderr.log"

    def start(self, extra_conf: str = "") -> None:
        """Start it and read its ready line (``START_TIMEOUT_S`` at most).

        Raises:
            RuntimeError: it exited or printed no ready line in time (its log tail quoted).
        """
        conf = self.root / "broker.conf"
        conf.write_text("brokerRole=ASYNC_MASTER\nhaListenPort=0\n" + extra_conf)
        bolide = str(Path(sys.executable).parent / "bolide")
        command = [
            bolide, "standalone", "--json", "--host", "127.0.0.1", "-c", str(conf),
            "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
            "--metrics-port", "0", "--dashboard-port", "0", "--data-dir", str(self.root / "data"),
        ]  # fmt: skip
        if os.environ.get("BOLIDE_SOAK_TRACEMALLOC"):  # debug: bench/soak_trace.py
            command[0:1] = [sys.executable, str(Path(__file__).with_name("soak_trace.py"))]
        self.launch(command)

    def launch(self, command: list[str]) -> None:
        """Run ``command`` (a ``bolide`` server printing a JSON ready line) as the child,
        its stderr to :attr:`log_path`, and read its listeners from the ready line.

        Raises:
            RuntimeError: it exited or printed no ready line in time (its log tail quoted).
        """
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                env=child_environment(), cwd=self.root,
            )  # fmt: skip
        line = _read_line(self.process, START_TIMEOUT_S)
        try:
            self.listeners = {key: str(value) for key, value in orjson.loads(line).items()}
        except orjson.JSONDecodeError:
            self.stop()
            raise RuntimeError(f"bolide {command[1]} did not start: {self.log_tail()}") from None

    async def start_async(self) -> None:
        """What the fuzz run calls: :meth:`start` here; a server that needs more (an etcd
        for the controller) overrides it."""
        self.start()

    async def stop_async(self) -> None:
        """What the fuzz run calls when done: :meth:`stop` here (see :meth:`start_async`)."""
        self.stop()

    def address(self, listener: str) -> tuple[str, int]:
        host, port = self.listeners[listener].rsplit(":", 1)
        return host, int(port)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-2000:]
        return "(no log)"

    def errors_logged(self) -> list[str]:
        """Lines of the server's log that report an unhandled exception (a traceback, a task
        whose exception nobody retrieved, a callback that raised): defects, whatever the
        input was."""
        return self._lines(_UNHANDLED)

    def refusals_logged(self) -> list[str]:
        """ERROR lines without a traceback: the server telling its operator about a peer
        (a slave ahead of its master...): reported, not a defect by themselves."""
        return [line for line in self._lines(_ERROR_LINE) if not _UNHANDLED.search(line)]

    def _lines(self, pattern: re.Pattern[str]) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line for line in text.splitlines() if pattern.search(line)]

    def rss_kib(self, kind: str = "VmRSS") -> int:
        """Resident memory (KiB) from /proc/<pid>/status: ``VmRSS`` (all), ``RssAnon`` (the
        heap: what a leak grows) or ``RssFile`` (mapped store files the server touched)."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{kind}:"):
                return int(line.split()[1])
        return 0

    def store_files(self) -> int:
        """Files under the server's data directory (0 for a server without one)."""
        data = self.root / "data"
        return sum(1 for path in data.rglob("*") if path.is_file()) if data.exists() else 0

    def open_fds(self) -> int:
        assert self.process is not None
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def established_connections(self) -> int:
        """TCP connections of the server process that are open (ESTABLISHED or closing)."""
        assert self.process is not None
        inodes = set()
        fd_dir = Path(f"/proc/{self.process.pid}/fd")
        for entry in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(entry)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        count = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                for row in Path(table).read_text().splitlines()[1:]:
                    fields = row.split()
                    if fields[9] in inodes and fields[3] != "0A":  # 0A: LISTEN
                        count += 1
        return count

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _read_line(process: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    import selectors

    assert process.stdout is not None
    pending = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while b"\n" not in pending:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return b""
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                return b""
            pending += chunk
    return pending.split(b"\n", 1)[0]


# --- one exchange ---------------------------------------------------------------------------


async def exchange(
    address: tuple[str, int],
    payload: bytes,
    *,
    slow: bool = False,
    rng: random.Random | None = None,
    until: Callable[[bytes], bool] | None = None,
) -> bytes:
    """Connect, write ``payload`` (``slow``: in random small pieces with pauses), read what
    comes back within ``READ_TIMEOUT_S`` (or until ``until(received)`` holds), close.
    Connection errors are results, not failures (a server may close on garbage): they return
    what was read."""
    received = b""
    writer = None
    try:
        reader, writer = await asyncio.open_connection(*address)
        position = 0
        if slow and rng is not None:
            for _ in range(SLOW_WRITE_MAX_PIECES):
                if position >= len(payload):
                    break
                step = rng.randint(1, 16)
                writer.write(payload[position : position + step])
                await writer.drain()
                position += step
                await asyncio.sleep(SLOW_WRITE_PAUSE_S)
        if position < len(payload):
            writer.write(payload[position:])
            await writer.drain()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(READ_TIMEOUT_S):
                while chunk := await reader.read(65536):
                    received += chunk
                    if until is not None and until(received):
                        break
    except (OSError, asyncio.IncompleteReadError, RuntimeError):
        pass  # the server closed (RuntimeError: uvloop's write on a transport it closed)
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return received


# --- remoting frames: the mutation rounds of the 4.x-protocol fuzzers ---------------------------


def encode_frame(command: RemotingCommand) -> bytes:
    """The frame of ``command``; a header our encoder refuses (a lone surrogate) goes out as
    JSON with ``\\u`` escapes, which is what a hostile peer would send."""
    try:
        return encode_command(command)
    except (ProtocolError, ValueError):
        header = json.dumps(
            {
                "code": command.code, "language": "JAVA", "version": 401,
                "opaque": command.opaque, "flag": command.flag, "remark": command.remark,
                "extFields": command.ext_fields, "serializeTypeCurrentRPC": "JSON",
            },
            ensure_ascii=True,
        ).encode()  # fmt: skip
        length = 4 + len(header) + len(command.body)
        return struct.pack(">II", length, len(header)) + header + command.body


def frames_in(data: bytes) -> int:
    """Whole frames at the start of ``data``."""
    count = position = 0
    while position + 4 <= len(data):
        (length,) = struct.unpack_from(">I", data, position)
        if position + 4 + length > len(data):
            break
        position += 4 + length
        count += 1
    return count


Target = TypeVar("Target")
"""Where a fuzzer's request goes (a listener name, or None with one listener)."""


async def remoting_round(
    rng: random.Random,
    mutator: Mutator,
    mutated: Callable[[], tuple[Target, RemotingCommand]],
    address: Callable[[Target], tuple[str, int]],
    garbage_target: Callable[[], Target],
    *,
    streams: bool = False,
) -> int:
    """One exchange of a 4.x-protocol fuzzer: ``mutated()`` gives a mutated request and where
    it goes, ``address(target)`` the listener's address. Kinds, by chance: one request with its
    answer awaited (45 %), a pipelined burst of 2..20 on one connection (15 %; with ``streams``
    a fifth of them a stream of ``STREAM_MIN_FRAMES..STREAM_MAX_FRAMES``), a whole frame
    mutated as bytes (20 %), raw garbage (10 %), a slow write, often cut mid-frame (10 %).
    Returns the requests sent (a burst's frames each count; garbage counts one)."""
    roll = rng.random()
    if roll < 0.45:  # structured: one mutated request, its answer awaited
        target, command = mutated()
        payload = encode_frame(command)
        await exchange(address(target), payload, until=lambda d: frames_in(d) > 0)
        return 1
    if roll < 0.6:  # a pipelined burst (or a long stream) on one connection
        count = rng.randint(2, 20)
        if streams and rng.random() < 0.2:
            count = rng.randint(STREAM_MIN_FRAMES, STREAM_MAX_FRAMES)
        commands = [mutated() for _ in range(count)]
        payload = b"".join(encode_frame(command) for _, command in commands)
        await exchange(address(commands[0][0]), payload, until=lambda d: frames_in(d) >= count)
        return count
    if roll < 0.8:  # a whole frame, mutated as bytes
        target, command = mutated()
        await exchange(address(target), mutator.bytes(encode_frame(command)))
    elif roll < 0.9:  # raw garbage
        await exchange(address(garbage_target()), mutator.garbage())
    else:  # a slow write, often cut before the frame ends
        target, command = mutated()
        payload = encode_frame(command)
        if rng.random() < 0.7:
            payload = payload[: rng.randrange(len(payload))]
        await exchange(address(target), payload, slow=True, rng=rng)
    return 1


async def run_bounded(exchanges: int, concurrency: int, one: Callable[[], Awaitable[int]]) -> int:
    """Run ``one()`` ``exchanges`` times, at most ``concurrency`` at once; returns the
    requests they sent (the sum of what each returned)."""
    gate = asyncio.Semaphore(concurrency)

    async def bounded() -> int:
        async with gate:
            return await one()

    return sum(await asyncio.gather(*(bounded() for _ in range(exchanges))))


# --- the run --------------------------------------------------------------------------------------

Attack = Callable[[ServerUnderTest, random.Random, int], Awaitable[int]]
"""``attack(server, rng, budget)`` makes ``budget`` exchanges (a pipelined one sends several
requests); returns how many requests it sent."""
Liveness = Callable[[ServerUnderTest], Awaitable[bool]]
"""True when the listener answers a valid request correctly."""
Prepare = Callable[[ServerUnderTest], Awaitable[None]]
ServerFactory = Callable[[Path], ServerUnderTest]
"""Makes the server under test in a run's directory (default: :class:`ServerUnderTest`)."""


@dataclass
class FuzzReport:
    listener: str
    seed: int
    requests: int = 0
    elapsed_s: float = 0.0
    server_errors: list[str] = field(default_factory=list)
    refusals_logged: int = 0
    crashes: int = 0
    serving: bool = True
    connections_left_open: int = 0
    rss_kib: tuple[int, int] = (0, 0)
    rss_anon_kib: tuple[int, int] = (0, 0)
    """The heap alone (RssAnon): VmRSS also counts the mapped store files written."""
    open_fds: tuple[int, int] = (0, 0)
    store_files: tuple[int, int] = (0, 0)
    """Files under the server's store: each mapped one holds descriptors (a topic created on
    demand by a fuzzed send brings its consume-queue files)."""
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        first = f" (first: {self.server_errors[0][:200]})" if self.server_errors else ""
        verdict = "ok" if self.ok else "FAILED (" + "; ".join(self.failures) + ")"
        return [
            f"fuzz {self.listener}: seed {self.seed}, {self.requests} requests in "
            f"{self.elapsed_s:.1f} s",
            f"server errors logged (unhandled): {len(self.server_errors)}{first}; "
            f"refusals logged at ERROR: {self.refusals_logged}",
            f"crashes: {self.crashes}   still serving: {'yes' if self.serving else 'NO'}   "
            f"connections left open: {self.connections_left_open}",
            f"RSS KiB: {self.rss_kib[0]} -> {self.rss_kib[1]} (heap {self.rss_anon_kib[0]} -> "
            f"{self.rss_anon_kib[1]})   open fds: {self.open_fds[0]} -> {self.open_fds[1]}   "
            f"store files: {self.store_files[0]} -> {self.store_files[1]}",
            f"verdict: {verdict}",
        ]


async def _settle(server: ServerUnderTest, baseline_connections: int) -> int:
    """Wait (bounded) until the server holds no more connections than before the run."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        left = server.established_connections() - baseline_connections
        if left <= 0 or time.monotonic() > deadline:
            return max(0, left)
        await asyncio.sleep(0.1)  # another process closes them: poll, bounded


async def _run(
    fuzzer: Fuzzer, seed: int, seconds: float, max_requests: int, root: Path
) -> FuzzReport:
    report = FuzzReport(fuzzer.listener, seed)
    attack, liveness = fuzzer.attack, fuzzer.liveness
    server = fuzzer.server_factory(root)
    await server.start_async()
    try:
        if fuzzer.prepare is not None:
            await fuzzer.prepare(server)
        if not await liveness(server):
            report.failures.append("not serving before the run")
            report.serving = False
            return report
        errors_before = len(server.errors_logged())
        refusals_before = len(server.refusals_logged())
        connections_before = server.established_connections()
        rss_before, fds_before = server.rss_kib(), server.open_fds()
        anon_before, files_before = server.rss_kib("RssAnon"), server.store_files()
        rng = random.Random(seed)
        started = time.monotonic()
        while report.requests < max_requests and time.monotonic() - started < seconds:
            budget = min(fuzzer.round_exchanges, max_requests - report.requests)
            report.requests += await attack(server, rng, budget)
            if not server.alive:
                report.crashes += 1
                report.failures.append(f"the server died: {server.log_tail()[-500:]}")
                break
            if not await liveness(server):
                report.serving = False
                report.failures.append("the server stopped serving")
                break
        report.elapsed_s = time.monotonic() - started
        if server.alive:
            report.connections_left_open = await _settle(server, connections_before)
            report.rss_kib = (rss_before, server.rss_kib())
            report.open_fds = (fds_before, server.open_fds())
            report.rss_anon_kib = (anon_before, server.rss_kib("RssAnon"))
            report.store_files = (files_before, server.store_files())
        report.server_errors = server.errors_logged()[errors_before:] + server.client_side_errors
        report.refusals_logged = len(server.refusals_logged()) - refusals_before
        if report.server_errors:
            report.failures.append(f"{len(report.server_errors)} server errors logged")
        if report.connections_left_open:
            report.failures.append(f"{report.connections_left_open} connections left open")
    finally:
        await server.stop_async()
    return report


@dataclass(frozen=True)
class Fuzzer:
    """One listener's fuzzer, as bench/fuzz_<listener>.py declares it (``FUZZER``): what its
    command line and its CI-sized test in tests/fuzz/ both run."""

    listener: str
    attack: Attack
    liveness: Liveness
    prepare: Prepare | None = None
    server_factory: ServerFactory = ServerUnderTest
    round_exchanges: int = ROUND_EXCHANGES

    def run(self, *, seed: int, seconds: float, max_requests: int) -> FuzzReport:
        """One run against a fresh server in a temporary directory (removed after)."""
        root = Path(tempfile.mkdtemp(prefix=f"bolide-fuzz-{self.listener}-"))
        try:
            return remoting_loop.run(_run(self, seed, seconds, max_requests, root))
        finally:
            if os.environ.get("BOLIDE_FUZZ_KEEP_LOG"):
                shutil.copy(root / "stderr.log", os.environ["BOLIDE_FUZZ_KEEP_LOG"])
            shutil.rmtree(root, ignore_errors=True)


def main(fuzzer: Fuzzer) -> int:
    """The command line of every fuzzer: ``--seed``, ``--seconds``, ``--requests``."""
    parser = argparse.ArgumentParser(description=f"Fuzz Bolide's {fuzzer.listener} listener.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--requests", type=int, default=10**9)
    options = parser.parse_args()
    report = fuzzer.run(seed=options.seed, seconds=options.seconds, max_requests=options.requests)
    for line in report.lines():
        print(line, flush=True)
    return 0 if report.ok else 1

"""Run the workloads against one peer: start its server, measure, stop it, print JSON lines.

    .venv/bin/python -m bench.peers.run --peer redis|nats|rabbitmq [--flush async|sync]
        [--workloads produce,consume,e2e] [--quick] [--message-bytes 1024] [--messages N]
        [--producers 4] [--in-flight 32] [--consumers 1] [--pull-batch 32]
        [--rate-per-s 2000] [--e2e-seconds S] [--max-seconds S] [--nats-server PATH]
        [--pid-file FILE]
    .venv/bin/python -m bench.peers.run --bolide-args [--quick] [--flush ...] [spec options]

Run from the repository root. stdout gets one result object per workload (the format of
README.md); stderr gets progress. ``--pid-file`` gets "started PID" and "stopped PID" lines for
every server (PID is also its process-group id), so a supervisor (compare.sh) can stop the
servers even if this process is killed.
``--bolide-args`` prints the options compare.sh gives ``bolide bench`` for the same spec.
SIGINT and SIGTERM stop the run and its server cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType

import uvloop

from bench.peers import drivers, servers
from bench.peers.drivers import Peer, PhaseMeasure
from bench.peers.result import LatencyRecorder, RunResult, throughput
from bench.peers.spec import FULL, QUICK, FlushMode, Workload, WorkloadSpec, bolide_arguments

PEERS = ("redis", "nats", "rabbitmq")


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def started_peer(
    system: str,
    flush: FlushMode,
    spec: WorkloadSpec,
    nats_binary: str | None,
    pid_file: Path | None,
) -> Iterator[Peer]:
    """Starts ``system``'s server in a temporary directory, yields a client-side Peer, and
    stops the server and removes the directory on exit.

    Raises:
        PeerUnavailableError: the server is not installed or cannot give this flush mode.
    """
    with tempfile.TemporaryDirectory(prefix=f"bolide-peer-{system}-") as directory:
        data_dir = Path(directory)
        server_pid: int | None = None
        try:
            with _server(system, flush, data_dir, nats_binary) as handle:
                server_pid = handle.pid
                _note_pid(pid_file, "started", server_pid)
                _progress(f"{system} ({flush}) pid {handle.pid} on 127.0.0.1:{handle.port}")
                yield _peer(system, handle, spec)
        finally:
            if server_pid is not None:
                _note_pid(pid_file, "stopped", server_pid)


def _note_pid(pid_file: Path | None, event: str, pid: int) -> None:
    """Appends "started PID" or "stopped PID": a supervisor kills the groups of started ones
    that were never stopped (the server leads its own process group, so PID is its id)."""
    if pid_file is not None:
        with pid_file.open("a") as pids:
            pids.write(f"{event} {pid}\n")


def _server(
    system: str, flush: FlushMode, data_dir: Path, nats_binary: str | None
) -> contextlib.AbstractContextManager[servers.ServerHandle]:
    if system == "redis":
        return servers.redis_server(data_dir, flush)
    if system == "nats":
        return servers.nats_server(data_dir, flush, servers.find_nats_server(nats_binary))
    return servers.rabbitmq_server(data_dir, flush)


def _peer(system: str, handle: servers.ServerHandle, spec: WorkloadSpec) -> Peer:
    # imported here: a peer's client library is needed only when that peer runs
    if system == "redis":
        from bench.peers.redis_streams import RedisPeer

        return RedisPeer(handle.port, handle.pid, handle.durability)
    if system == "nats":
        from bench.peers.nats_jetstream import NatsPeer

        return NatsPeer(handle.port, handle.pid, handle.durability)
    from bench.peers.rabbitmq import RabbitPeer

    return RabbitPeer(handle.port, handle.pid, handle.durability, handle.flush, spec.pull_batch)


def _result(
    peer: Peer,
    version: str,
    workload: Workload,
    flush: FlushMode,
    spec: WorkloadSpec,
    measure: PhaseMeasure,
    recorder: LatencyRecorder | None,
) -> RunResult:
    msgs_per_s, mib_per_s = throughput(measure.messages, spec.message_bytes, measure.elapsed_s)
    return RunResult(
        system=peer.name,
        system_version=version,
        workload=str(workload),
        flush=str(flush),
        durability=peer.durability,
        message_bytes=spec.message_bytes,
        messages=measure.messages,
        expected_messages=measure.expected_messages,
        errors=0,
        producers=spec.producers,
        in_flight=spec.in_flight,
        consumers=spec.consumers,
        pull_batch=spec.pull_batch,
        rate_per_s=spec.rate_per_s if workload is Workload.E2E else None,
        elapsed_s=round(measure.elapsed_s, 4),
        msgs_per_s=round(msgs_per_s, 1),
        mib_per_s=round(mib_per_s, 2),
        latency_us=None if recorder is None else recorder.summary(),
        server_cpu_s=round(measure.server_cpu_s, 3),
        client_cpu_s=round(measure.client_cpu_s, 3),
        complete=measure.complete,
    )


async def _run_workloads(
    peer: Peer, flush: FlushMode, spec: WorkloadSpec, workloads: list[Workload]
) -> list[RunResult]:
    """Each workload on a fresh destination, except that ``consume`` right after ``produce``
    reads the messages ``produce`` stored (all of them, or what its time bound allowed) instead
    of loading a backlog of its own."""
    version = await peer.server_version()
    await drivers.warm_up(peer, spec)
    results: list[RunResult] = []
    backlog: tuple[str, int] | None = None  # (destination, messages) left by produce
    for workload in workloads:
        destination = f"bench-{workload}-{flush}"
        recorder: LatencyRecorder | None = None
        if workload is Workload.PRODUCE:
            await peer.create_destination(destination)
            recorder = LatencyRecorder()
            measure = await drivers.run_produce(peer, destination, spec, recorder)
            backlog = (destination, measure.messages)
        elif workload is Workload.CONSUME:
            if backlog is None:
                await peer.create_destination(destination)
                _progress(f"{peer.name}: loading a backlog of {spec.message_count} (not timed)")
                loaded = await drivers.run_produce(peer, destination, spec, None)
                backlog = (destination, loaded.messages)
            destination, count = backlog
            measure = await drivers.run_consume(peer, destination, spec, count)
        else:
            await peer.create_destination(destination)
            recorder = LatencyRecorder()
            measure = await drivers.run_e2e(peer, destination, spec, recorder)
        if workload is not Workload.PRODUCE:
            await peer.delete_destination(destination)
            backlog = None
        result = _result(peer, version, workload, flush, spec, measure, recorder)
        _progress(f"{peer.name} {workload} ({flush}): {result.msgs_per_s:,.0f} msgs/s")
        print(result.to_json(), flush=True)
        results.append(result)
    return results


def _parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--peer", choices=PEERS)
    parser.add_argument(
        "--bolide-args",
        action="store_true",
        help="print the options to give `bolide bench <workload>` for this spec and exit",
    )
    parser.add_argument("--flush", choices=[str(mode) for mode in FlushMode], default="async")
    parser.add_argument("--workloads", default="produce,consume,e2e")
    parser.add_argument("--quick", action="store_true", help="the QUICK spec (compare.sh --quick)")
    for option, field in (
        ("--message-bytes", "message_bytes"),
        ("--messages", "message_count"),
        ("--producers", "producers"),
        ("--in-flight", "in_flight"),
        ("--consumers", "consumers"),
        ("--pull-batch", "pull_batch"),
        ("--rate-per-s", "rate_per_s"),
    ):
        parser.add_argument(option, dest=field, type=int)
    parser.add_argument("--e2e-seconds", dest="e2e_seconds", type=float)
    parser.add_argument("--max-seconds", dest="max_seconds", type=float)
    parser.add_argument("--nats-server", help="nats-server binary (default: see servers.py)")
    parser.add_argument("--pid-file", type=Path)
    return parser.parse_args()


def _spec(arguments: argparse.Namespace) -> WorkloadSpec:
    base = QUICK if arguments.quick else FULL
    overrides = {
        field: getattr(arguments, field)
        for field in base.__dataclass_fields__
        if getattr(arguments, field, None) is not None
    }
    return replace(base, **overrides)


def _terminate(signal_number: int, frame: FrameType | None) -> None:
    """SIGTERM outside the event loop (server start and stop): unwind through every finally."""
    del frame
    raise KeyboardInterrupt(f"signal {signal_number}")


async def _run_cancellable(
    peer: Peer, flush: FlushMode, spec: WorkloadSpec, workloads: list[Workload]
) -> None:
    """_run_workloads, with SIGTERM cancelling it (as asyncio.Runner does for SIGINT) rather
    than raising in whatever callback the loop happens to run."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is not None:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        await _run_workloads(peer, flush, spec, workloads)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)  # which resets it to the default action
        signal.signal(signal.SIGTERM, _terminate)


def main() -> int:
    """Exit status: 0 measured, 3 the peer is unavailable here, 130 interrupted."""
    arguments = _parse_arguments()
    # a background job of a script starts with SIGINT ignored: take both signals back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    spec = _spec(arguments)
    flush = FlushMode(arguments.flush)
    if arguments.bolide_args:
        print(shlex.join(bolide_arguments(spec, flush)))
        return 0
    if arguments.peer is None:
        _progress("--peer is required")
        return 2
    workloads = [Workload(name.strip()) for name in arguments.workloads.split(",") if name]
    try:
        with (
            started_peer(
                arguments.peer, flush, spec, arguments.nats_server, arguments.pid_file
            ) as peer,
            asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
        ):
            runner.run(_run_cancellable(peer, flush, spec, workloads))
    except servers.PeerUnavailableError as error:
        _progress(f"{arguments.peer} ({flush}) unavailable: {error}")
        return 3
    except (KeyboardInterrupt, asyncio.CancelledError):
        _progress(f"{arguments.peer} ({flush}) interrupted; servers stopped")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

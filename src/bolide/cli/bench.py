"""``bolide bench produce|consume|e2e``: how fast is a Bolide broker, measured the way
``bench/compare.sh`` measures Redis Streams, NATS JetStream and RabbitMQ.

Unless ``--namesrv`` is given, each run starts its own broker — ``bolide standalone`` in a
child process on 127.0.0.1, ports chosen by the system, a fresh temporary data directory, the
``--flush`` mode — reads its CPU time from /proc, and stops it before exiting (also on SIGINT
or SIGTERM). The run creates a fresh topic of ``--queues`` queues, warms up (untimed), then
runs the workload:

* ``produce``: ``--producers`` clients with ``--in-flight`` unacknowledged sends each (a
  sliding window), ``--messages`` in all (0: for ``--max-seconds``); send-to-SEND_OK latency;
* ``consume``: a backlog of ``--messages`` stored first (untimed), then read by
  ``--consumers`` consumers of a new group, ``--pull-batch`` per pull, offsets committed;
* ``e2e``: consumers first, then ``--rate-per-s`` messages a second for ``--e2e-seconds``;
  latency from the stamp in the body (taken just before the send) to the consumer.

``--mode client`` (default) drives the broker through ``bolide.aio.Producer`` and
``PushConsumer``; ``--mode raw`` through pre-built requests on the remoting layer (less client
CPU, closer to the broker's own limit; see :mod:`bolide.bench.raw`). ``$BOLIDE_BENCH_MODE``
sets the mode when the option is absent, so that compare.sh can run the raw mode
(``--bolide-cmd "env BOLIDE_BENCH_MODE=raw .venv/bin/bolide bench"``).

Output: progress on stderr (when it is a terminal), then a summary table; with ``--json`` the
summary goes to stderr and stdout gets one JSON line (schema ``bolide-bench/1``, the contract
of bench/peers/README.md). Exit codes as docs/cli.md: 0 a result was printed (even when the
run was cut short by ``--max-seconds``: ``complete`` says so), 1 the run failed, 2 bad usage,
4 the cluster is unreachable, 130/143 interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from bolide.base import limits
from bolide.base.children import kill_children
from bolide.base.errors import BolideError, ConfigError
from bolide.bench.raw import QueueTarget, RawClients
from bolide.bench.runtime import (
    BenchMode,
    BenchResult,
    BenchSettings,
    BrokerProcess,
    Workload,
    build_result,
)
from bolide.bench.workloads import (
    BenchClients,
    ClientModeClients,
    Counters,
    Outcome,
    run_consume,
    run_e2e,
    run_produce,
    warm_up,
)
from bolide.cli.common import ExitCode, Output, describe, exit_code_of, fail
from bolide.client.admin import AdminClient
from bolide.remoting.loop import run

__all__ = ["BenchRun", "app", "run_bench"]

app = typer.Typer(
    help="Measure a broker: produce, consume and end-to-end latency.", no_args_is_help=True
)

_SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass(frozen=True)
class BenchRun:
    """Where a run goes: its own broker (``namesrv`` None) or an existing cluster, whose
    broker's CPU is read when ``broker_pid`` is given."""

    settings: BenchSettings
    namesrv: str | None = None
    broker_pid: int | None = None


# --- the run ------------------------------------------------------------------------------------


async def _queue_targets(admin: AdminClient, topic: str, queues: int) -> list[QueueTarget]:
    masters = await admin.topic_masters(topic)
    return [
        (address, queue_id) for _, address in sorted(masters.items()) for queue_id in range(queues)
    ]


async def _workload(
    run_spec: BenchRun,
    namesrv: str,
    broker_pid: int | None,
    counters: Counters,
    note: Callable[[str], None] | None,
) -> Outcome:
    settings = run_spec.settings
    suffix = secrets.token_hex(4)
    topic, warm_topic = f"bench-{settings.workload}-{suffix}", f"bench-warm-up-{suffix}"
    async with AdminClient(namesrv) as admin:
        for name in (topic, warm_topic):
            await admin.create_topic(name, queue_count=settings.queues)
        clients: BenchClients
        if settings.mode is BenchMode.RAW:
            clients = RawClients(await _queue_targets(admin, topic, settings.queues), settings)
        else:
            clients = ClientModeClients(namesrv, settings)
    if note is not None:
        note(f"bolide bench: {settings.workload} on topic {topic} ({settings.mode} mode)")
    if settings.warm_up:
        await warm_up(clients, warm_topic, f"bench-warm-up-{suffix}", settings, counters)
        if note is not None:
            note("bolide bench: warm-up done, timed phase next")
    group = f"bench-consumers-{suffix}"
    if settings.workload is Workload.PRODUCE:
        return await run_produce(clients, topic, settings, counters, broker_pid)
    if settings.workload is Workload.CONSUME:
        return await run_consume(clients, topic, group, settings, counters, broker_pid)
    return await run_e2e(clients, topic, group, settings, counters, broker_pid)


async def run_bench(
    run_spec: BenchRun,
    counters: Counters | None = None,
    note: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run one workload (module docstring) and return its result. ``counters`` follow the
    progress; ``note`` gets a line for people at each step (the broker's pid first, for
    ``py-spy --pid``).

    Raises:
        ConfigError: the bench's broker did not start.
        BolideError: the cluster refused the topic or cannot be reached.
    """
    counters = counters or Counters()
    settings = run_spec.settings
    broker: BrokerProcess | None = None
    namesrv, broker_pid = run_spec.namesrv, run_spec.broker_pid
    try:
        if namesrv is None:
            counters.phase = "starting broker"
            broker = BrokerProcess(settings.flush)
            await broker.start()
            namesrv, broker_pid = broker.namesrv, broker.pid
            if note is not None:
                note(f"bolide bench: broker pid {broker_pid}, namesrv {namesrv}")
        outcome = await _workload(run_spec, namesrv, broker_pid, counters, note)
    finally:
        if broker is not None:
            counters.phase = "stopping broker"
            if note is not None:
                note(f"bolide bench: stopping broker pid {broker.pid}")
            await broker.stop()
    return build_result(
        settings,
        external=run_spec.namesrv is not None,
        messages=outcome.messages,
        expected_messages=outcome.expected_messages,
        errors=outcome.errors,
        measure=outcome.measure,
        latency=outcome.latency,
    )


# --- display --------------------------------------------------------------------------------------


async def _show_progress(counters: Counters, console: Console) -> None:
    """Redraw a progress bar from ``counters`` until cancelled."""
    columns = (
        TextColumn("{task.description:<16}"),
        BarColumn(),
        TextColumn("{task.completed:>10,.0f} / {task.fields[expected]}"),
        TextColumn("errors {task.fields[errors]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(counters.phase, total=None, expected="?", errors=0)
        while True:
            progress.update(
                task,
                description=counters.phase,
                completed=counters.done,
                total=counters.expected or None,
                expected=f"{counters.expected:,}" if counters.expected else "-",
                errors=counters.errors,
            )
            await asyncio.sleep(limits.BENCH_PROGRESS_INTERVAL_MS / 1000)


def _summary_rows(result: BenchResult) -> list[tuple[str, str]]:
    latency = result.latency_us
    per_message = (
        "-"
        if result.server_cpu_s is None or not result.messages
        else f"{result.server_cpu_s / result.messages * 1e6:.1f} µs/msg"
    )
    return [
        ("workload", f"{result.workload} ({result.mode} mode, flush {result.flush})"),
        ("messages", f"{result.messages:,} of {result.expected_messages:,}"
         f"{'' if result.complete else ' (cut short)'}, {result.errors:,} errors"),
        ("elapsed", f"{result.elapsed_s:.3f} s"),
        ("throughput", f"{result.msgs_per_s:,.0f} msgs/s, {result.mib_per_s:,.1f} MiB/s"),
        ("latency p50/p99/p999", "-" if latency is None else
         f"{latency.p50 / 1000:.3f} / {latency.p99 / 1000:.3f} / {latency.p999 / 1000:.3f} ms"
         f" (max {latency.max / 1000:.3f} ms, {latency.samples:,} samples)"),
        ("broker CPU", "-" if result.server_cpu_s is None else
         f"{result.server_cpu_s:.2f} s ({per_message})"),
        ("bench CPU", f"{result.client_cpu_s:.2f} s"),
        ("load average", " ".join(f"{value:.2f}" for value in result.load_average)),
    ]  # fmt: skip


def _print_summary(result: BenchResult, output: Output) -> None:
    rows = _summary_rows(result)
    if output.json_output:
        for name, value in rows:
            output.note(f"{name:<22}{value}")
        output.json(result.as_dict())
    else:
        output.table(None, ("", "value"), rows)


# --- the commands ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _stop_on_signals(
    task: asyncio.Task[BenchResult], received: list[int], note: Callable[[str], None]
) -> Iterator[None]:
    """SIGINT/SIGTERM cancel the run; its ``finally`` blocks stop the clients and the broker.

    The orderly stop is bounded: ``BENCH_SIGNAL_STOP_TIMEOUT_MS`` after the first signal, or at
    a second one, every child still alive is SIGKILLed by pid and the process exits at once
    (130/143) — a stop stuck in a library never leaves the broker behind.
    """
    loop = asyncio.get_running_loop()
    deadline: list[asyncio.TimerHandle] = []

    def hard_stop() -> None:
        number = received[0]
        killed = kill_children()
        note(f"bolide bench: stop by {signal.Signals(number).name} overran; killed {killed}")
        sys.stderr.flush()
        os._exit(_SIGNAL_EXIT_CODES.get(signal.Signals(number), 130))

    def on_signal(number: int) -> None:
        received.append(number)
        if len(received) > 1:
            hard_stop()
            return
        task.cancel()
        deadline.append(loop.call_later(limits.BENCH_SIGNAL_STOP_TIMEOUT_MS / 1000, hard_stop))

    for number in _SIGNAL_EXIT_CODES:
        loop.add_signal_handler(number, on_signal, number)
    try:
        yield
    finally:
        for number in _SIGNAL_EXIT_CODES:
            loop.remove_signal_handler(number)
        for handle in deadline:
            handle.cancel()


def _execute(run_spec: BenchRun, output: Output) -> None:
    received: list[int] = []

    async def main() -> BenchResult:
        counters = Counters()
        task = asyncio.get_running_loop().create_task(run_bench(run_spec, counters, output.note))
        display = None
        if output.errors.is_terminal:
            display = asyncio.get_running_loop().create_task(
                _show_progress(counters, output.errors)
            )
        try:
            with _stop_on_signals(task, received, output.note):
                return await task
        finally:
            if display is not None:
                display.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await display

    try:
        result = run(main())
    except asyncio.CancelledError:
        number = received[0] if received else signal.SIGINT
        output.note(f"bolide bench: stopped by {signal.Signals(number).name}")
        raise typer.Exit(code=_SIGNAL_EXIT_CODES.get(signal.Signals(number), 130)) from None
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    except BolideError as error:
        fail(output, describe(error), exit_code_of(error))
    _print_summary(result, output)


JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON result line on stdout.")]
FlushOpt = Annotated[str, typer.Option("--flush", help="Broker flush mode: async or sync.")]
ModeOpt = Annotated[
    BenchMode,
    typer.Option(
        "--mode",
        envvar="BOLIDE_BENCH_MODE",
        help="client: bolide.aio; raw: pre-built requests. Default: $BOLIDE_BENCH_MODE or client.",
    ),
]
BytesOpt = Annotated[int, typer.Option("--message-bytes", help="Body size, bytes (8 .. 4 MiB).")]
MessagesOpt = Annotated[
    int, typer.Option("--messages", help="Messages (produce) or backlog (consume); 0: by time.")
]
ProducersOpt = Annotated[int, typer.Option("--producers", help="Producer clients.")]
InFlightOpt = Annotated[int, typer.Option("--in-flight", help="Unacked sends per producer.")]
ConsumersOpt = Annotated[int, typer.Option("--consumers", help="Consumers of the group.")]
PullBatchOpt = Annotated[int, typer.Option("--pull-batch", help="Messages per pull (≤ 1024).")]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Messages per send request.")]
RateOpt = Annotated[int, typer.Option("--rate-per-s", help="e2e: messages per second.")]
E2eSecondsOpt = Annotated[float, typer.Option("--e2e-seconds", help="e2e: how long to send.")]
MaxSecondsOpt = Annotated[
    float, typer.Option("--max-seconds", help="Bound of the timed phase (and of the backlog).")
]
QueuesOpt = Annotated[int, typer.Option("--queues", help="Queues of the bench topic.")]
WarmUpOpt = Annotated[bool, typer.Option("--warm-up/--no-warm-up", help="Untimed warm-up.")]
NamesrvOpt = Annotated[
    str | None,
    typer.Option("--namesrv", help="Bench this cluster instead of starting a broker."),
]
BrokerPidOpt = Annotated[
    int | None, typer.Option("--broker-pid", help="With --namesrv: the broker's pid, for CPU.")
]


def _command(workload: Workload) -> Callable[..., None]:
    def command(
        json_output: JsonOpt = False,
        flush: FlushOpt = "async",
        mode: ModeOpt = BenchMode.CLIENT,
        message_bytes: BytesOpt = 1024,
        messages: MessagesOpt = 100_000,
        producers: ProducersOpt = 4,
        in_flight: InFlightOpt = 32,
        consumers: ConsumersOpt = 1,
        pull_batch: PullBatchOpt = limits.PULL_BATCH_SIZE_MESSAGES,
        batch_size: BatchOpt = 1,
        rate_per_s: RateOpt = 2_000,
        e2e_seconds: E2eSecondsOpt = 10.0,
        max_seconds: MaxSecondsOpt = 60.0,
        queues: QueuesOpt = 8,
        warm: WarmUpOpt = True,
        namesrv: NamesrvOpt = None,
        broker_pid: BrokerPidOpt = None,
    ) -> None:
        output = Output(json_output)
        try:
            settings = BenchSettings(
                workload=workload, flush=flush.lower(), mode=mode,
                message_bytes=message_bytes, messages=messages, producers=producers,
                in_flight=in_flight, consumers=consumers, pull_batch=pull_batch,
                batch_size=batch_size, rate_per_s=rate_per_s, e2e_seconds=e2e_seconds,
                max_seconds=max_seconds, queues=queues, warm_up=warm,
            )  # fmt: skip
        except ConfigError as error:
            fail(output, str(error), ExitCode.USAGE)
        _execute(BenchRun(settings, namesrv, broker_pid), output)

    command.__doc__ = _HELP[workload]
    return command


_HELP = {
    Workload.PRODUCE: "Acknowledged sends: msgs/s, MiB/s and send latency.",
    Workload.CONSUME: "Read a stored backlog with a consumer group: msgs/s.",
    Workload.E2E: "Fixed-rate publish while consuming: publish-to-receive latency.",
}

for _workload_kind in Workload:
    app.command(str(_workload_kind))(_command(_workload_kind))

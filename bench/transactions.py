"""Transactional sends through a real broker: what a transaction costs next to a plain send,
and how fast the check-back settles transactions left undecided.

A name server and broker run in a child process (uvloop, a temporary data directory,
ASYNC_FLUSH, ``transactionCheckInterval`` = ``--check-interval-ms``, ``transactionTimeOut``
0); this process runs Bolide's async clients.

* plain: ``--messages`` sends of 128-byte bodies with a Producer, ``--concurrency`` at once;
* commit: the same with ``send_in_transaction`` (half message, local transaction returning
  COMMIT_MESSAGE at once, END_TRANSACTION oneway), then until the broker committed them all;
* check-back: the same with UNKNOW, the checker answering COMMIT_MESSAGE; until the broker's
  checks settled them all.

    .venv/bin/python bench/transactions.py [--messages 5000] [--concurrency 32]
        [--check-interval-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection as Pipe
from pathlib import Path

from bolide.client.message import Message, MessageExt
from bolide.client.producer.producer import Producer
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer
from bolide.protocol.bodies.transaction import HalfMessageList
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop

TOPIC = "bench-tx"
BODY = b"x" * 128


async def _serve(pipe: Pipe, data_dir: str, check_interval_ms: int) -> None:
    from bolide.testing.cluster import Cluster

    settings = {"transaction_check_interval_ms": check_interval_ms, "transaction_timeout_ms": 0}
    async with Cluster(Path(data_dir), settings=settings) as cluster:
        pipe.send((cluster.namesrv_address, cluster.brokers[0].address))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, pipe.recv)


def _broker_process(pipe: Pipe, data_dir: str, check_interval_ms: int) -> None:
    with asyncio.Runner(loop_factory=remoting_loop.new_event_loop) as runner:
        runner.run(_serve(pipe, data_dir, check_interval_ms))


async def _pending(pool: ClientPool, broker: str) -> HalfMessageList:
    request = RemotingCommand.request(RequestCode.BOLIDE_QUERY_HALF_MESSAGES, {"maxCount": "1"})
    response = await pool.invoke(broker, request, 10_000)
    return HalfMessageList.from_json(response.body)


async def _timed(count: int, concurrency: int, one: Callable[[int], Awaitable[object]]) -> float:
    """Seconds to run ``one(i)`` for every i, ``concurrency`` at once."""
    indexes = iter(range(count))

    async def worker() -> None:
        for index in indexes:
            await one(index)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def _settled(pool: ClientPool, broker: str, expected_commits: int) -> None:
    while True:
        listing = await _pending(pool, broker)
        if listing.pending_count == 0 and listing.commit_count >= expected_commits:
            return
        await asyncio.sleep(0.01)  # a benchmark polls the broker; tests never do


async def _run(namesrv: str, broker: str, options: argparse.Namespace) -> list[str]:
    count, concurrency = options.messages, options.concurrency
    rows: list[str] = []
    pool = ClientPool()

    async def check(message: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    try:
        async with Producer("PG_BENCH_PLAIN", namesrv) as plain:
            seconds = await _timed(count, concurrency, lambda i: plain.send(Message(TOPIC, BODY)))
        rows.append(f"{'plain send':<34} {count / seconds:>10,.0f} msg/s")
        async with TransactionProducer("PG_BENCH_TX", namesrv, checker=check) as tx:

            def commit(i: int) -> Awaitable[object]:
                return tx.send_in_transaction(
                    Message(TOPIC, BODY), lambda m, a: LocalTransactionState.COMMIT_MESSAGE
                )

            started = time.perf_counter()
            sent = await _timed(count, concurrency, commit)
            await _settled(pool, broker, count)
            settled = time.perf_counter() - started
            rows.append(f"{'send_in_transaction (commit)':<34} {count / sent:>10,.0f} tx/s")
            rows.append(f"{'  ... all committed on the broker':<34} {count / settled:>10,.0f} tx/s")

            def unknown(i: int) -> Awaitable[object]:
                return tx.send_in_transaction(
                    Message(TOPIC, BODY), lambda m, a: LocalTransactionState.UNKNOW
                )

            started = time.perf_counter()
            await _timed(count, concurrency, unknown)
            await _settled(pool, broker, 2 * count)
            settled = time.perf_counter() - started
            rows.append(f"{'UNKNOW, settled by check-back':<34} {count / settled:>10,.0f} tx/s")
    finally:
        await pool.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--check-interval-ms", type=int, default=200)
    options = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    with tempfile.TemporaryDirectory(prefix="bolide-bench-tx-") as data_dir:
        process = context.Process(
            target=_broker_process, args=(child, data_dir, options.check_interval_ms)
        )
        process.start()
        try:
            namesrv, broker = parent.recv()
            with asyncio.Runner(loop_factory=remoting_loop.new_event_loop) as runner:
                rows = runner.run(_run(namesrv, broker, options))
        finally:
            parent.send("stop")
            process.join(60)
    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"{options.messages} messages, {options.concurrency} at once, check interval "
          f"{options.check_interval_ms} ms, {os.cpu_count()} CPUs")  # fmt: skip
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()

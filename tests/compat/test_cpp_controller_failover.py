"""The real C++ clients (rocketmq==0.4.4) across a failover in controller mode, every part a
real process: etcd, `bolide controller`, `bolide namesrv` and two `bolide broker -c
broker.conf` with ``enableControllerMode=true`` and ``allAckInSyncStateSet=true``.

The C++ producer sends without pause; the master is SIGKILLed mid-stream; the controller elects
the in-sync replica, which the name server then lists as brokerId 0. The C++ producer takes
sends again once its route poll (every 30 s) sees the new master: that gap, kill → first
SEND_OK on the new master, is printed (docs/replication.md quotes it). Then a C++ push
consumer reads every acknowledged message — before and after the kill — from the new master.

Both C++ clients shut down once the name server process has stopped: a route the client
factory cannot fetch is one it cannot apply while it shuts down (tests/compat/native_shutdown.py;
the failover changed this topic's route).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bolide.client.producer.producer import Producer
from bolide.remoting import ClientPool
from bolide.testing.etcd import EtcdCluster
from tests.compat.cpp_clients import Inbox, destroy_push_consumer, new_quiet_push_consumer
from tests.compat.cpp_harness import destroy_producer, make_message, new_quiet_producer
from tests.controller.test_failover_processes import (
    TOPIC,
    broker_conf,
    cluster_masters,
    controller_and_name_server,
    in_sync_ids,
    running,
    send_until_acked,
    until_true,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ACKS_BEFORE_KILL = 100
ACKS_AFTER_FAILOVER = 20
FAILOVER_WAIT_S = 120.0
"""Guard on the C++ producer's return (its route poll is 30 s; a failing test pays it once)."""
RETRY_PAUSE_S = 0.05
"""The C++ producer's pause after a failed send, so a dead route does not spin a core."""


class CppSender:
    """The C++ producer's loop on a worker thread: every SEND_OK body with the monotonic time
    its send started (a send started after the kill can only be stored by the new master) and
    the time its SEND_OK came."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self.acked: list[tuple[str, float, float]] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        sequence = 0
        while not self.stop.is_set():
            body = f"cpp-{sequence}"
            sequence += 1
            started = time.monotonic()
            try:
                result = self.producer.send_sync(make_message(TOPIC, body))
            except Exception:
                time.sleep(RETRY_PAUSE_S)  # the master is gone: not acknowledged
                continue
            if result.status.name == "OK":
                with self._lock:
                    self.acked.append((body, started, time.monotonic()))

    def acked_after(self, moment: float) -> list[tuple[str, float, float]]:
        """The SEND_OKs of sends started after ``moment``, in order."""
        with self._lock:
            return [entry for entry in self.acked if entry[1] > moment]

    def bodies(self) -> set[str]:
        with self._lock:
            return {entry[0] for entry in self.acked}


async def test_cpp_clients_across_a_controller_failover(
    cpp_home: Path, etcd: EtcdCluster, tmp_path: Path
) -> None:
    del cpp_home  # a private HOME must be in place before the native library logs
    pool = ClientPool()
    async with (
        contextlib.AsyncExitStack() as after_the_name_server,
        controller_and_name_server(etcd.endpoints, tmp_path) as (ctl, ns),
    ):
        conf_a = broker_conf(tmp_path / "a", ns, ctl)
        conf_b = broker_conf(tmp_path / "b", ns, ctl)
        async with (
            running("broker", "-c", str(conf_a), "--data-dir", str(tmp_path / "a"),
                    cwd=tmp_path) as first,
        ):  # fmt: skip

            async def first_is_master() -> bool:
                return (await cluster_masters(pool, ns)).get(0) == first.address("broker")

            await until_true(first_is_master, "the first broker registered as brokerId 0")
            async with running("broker", "-c", str(conf_b), "--data-dir", str(tmp_path / "b"),
                               cwd=tmp_path) as second:  # fmt: skip
                second_address = second.address("broker")
                async with Producer("cpp-failover-setup", namesrv=ns) as setup:
                    await send_until_acked(setup, "topic-created")

                async def both_in_sync() -> bool:
                    return await in_sync_ids(pool, ctl) == [1, 2]

                await until_true(both_in_sync, "the replica joined the SyncStateSet")
                await _failover_with_cpp_clients(
                    pool, ns, first.process, second_address, after_the_name_server
                )
    await pool.close()


async def _failover_with_cpp_clients(
    pool: ClientPool,
    ns: str,
    master: asyncio.subprocess.Process,
    successor: str,
    after_the_name_server: contextlib.AsyncExitStack,
) -> None:
    producer = new_quiet_producer("PG_CPP_CONTROLLER_FAILOVER", ns, send_timeout_ms=3_000)
    after_the_name_server.push_async_callback(asyncio.to_thread, destroy_producer, producer)
    producer.start()
    sender = CppSender(producer)
    sending = asyncio.create_task(asyncio.to_thread(sender.run))
    try:
        await until_true(_count_reached(sender, 0.0, ACKS_BEFORE_KILL), "C++ sends acknowledged")
        master.send_signal(signal.SIGKILL)  # mid-stream: sends are in flight
        killed_at = time.monotonic()
        await master.wait()

        async def successor_listed() -> bool:
            return (await cluster_masters(pool, ns)).get(0) == successor

        await until_true(successor_listed, "the new master is brokerId 0")
        routed_s = time.monotonic() - killed_at
        deadline = killed_at + FAILOVER_WAIT_S
        while len(sender.acked_after(killed_at)) < ACKS_AFTER_FAILOVER:
            assert time.monotonic() < deadline, "the C++ producer never sent to the new master"
            await asyncio.sleep(0.1)
        unavailable_s = sender.acked_after(killed_at)[0][2] - killed_at
        print(f"\nC++ producer, kill -> first SEND_OK on the new master: {unavailable_s:.2f} s")
        print(f"kill -> name server lists the new master: {routed_s:.2f} s")
    finally:
        sender.stop.set()
        await sending
    expected = sender.bodies()
    inbox = Inbox(asyncio.get_running_loop())
    consumer = new_quiet_push_consumer(
        "CG_CPP_CONTROLLER_FAILOVER", ns, instance_name="cpp-controller-reader"
    )
    consumer.subscribe(TOPIC, inbox.listener("cpp"), "*")
    after_the_name_server.push_async_callback(asyncio.to_thread, destroy_push_consumer, consumer)
    await asyncio.to_thread(consumer.start)
    await inbox.wait_for(lambda _: expected <= set(inbox.bodies()), timeout_s=90)


def _count_reached(sender: CppSender, since: float, count: int) -> Any:
    async def check() -> bool:
        return len(sender.acked_after(since)) >= count

    return check

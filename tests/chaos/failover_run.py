"""The failover chaos runner against today's static master/slave (no controller needed).

A name server, a SYNC_MASTER and its SLAVE run as ``bolide`` processes (:class:`HaGroup`);
producers reach the master through a :class:`FaultProxy`. Each seeded :class:`Fault` runs a
few send rounds, then the fault (link reset, partition, stalled link, SIGSTOP, SIGKILL) for
a few rounds, then heals it (SIGCONT, restart on its data, proxy forwarding again) and sends
until one is acknowledged. After the last schedule every queue is read back from the master
and from the slave and both are judged by :class:`Checker`.

In controller mode the same loop applies with the producer's route following the new master
(the checker already takes epochs and counts elections); without a controller a dead master
is restarted instead of replaced, so unavailability here is the restart time.

``bench/failover_chaos.py`` runs it with hundreds of schedules; ``test_failover_chaos.py``
with a CI-sized count.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

from bolide.base.errors import BolideError
from bolide.client.message import Message, SendStatus
from bolide.client.producer.producer import Producer
from bolide.protocol.codes import ResponseCode
from tests.chaos.failover_checker import Ack, Checker, Fault, Report, Stored, body_for
from tests.chaos.failover_proxy import FaultProxy
from tests.chaos.replication_support import HaGroup, _broker_port, spawn
from tests.integration.wire import pull_request, records, send_request

TOPIC = "FailoverChaos"
QUEUES = 2
PRODUCERS = ("p0", "p1")
SEND_TIMEOUT_MS = 1_000
"""A send through a silent link gives up after this long (not acknowledged)."""
RECOVERY_SEND_ATTEMPTS = 200
"""Sends tried after a fault heals before the run counts the master as gone for good."""


class ProxiedHaGroup(HaGroup):
    """:class:`HaGroup` whose slave reaches the master's HA port through a
    :class:`FaultProxy` (its ``haMasterAddress``), so the master-slave pair can be cut."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.ha_proxy: FaultProxy | None = None

    async def start_slave(self) -> None:
        if self.ha_proxy is None:
            self.ha_proxy = FaultProxy(f"127.0.0.1:{self.master_ha_port}")
            await self.ha_proxy.start()
        conf = self._conf(
            "slave",
            {
                "brokerId": 1,
                "brokerRole": "SLAVE",
                "listenPort": self.slave_port,
                "slaveReadEnable": "true",
                "haMasterAddress": self.ha_proxy.address,
            },
        )
        self.slave = await spawn(
            "broker", "-c", str(conf), "--data-dir", str(self.root / "slave"), cwd=self.root
        )
        self.slave_port = _broker_port(self.slave)

    async def stop(self) -> None:
        await super().stop()
        if self.ha_proxy is not None:
            await self.ha_proxy.stop()


class Runner:
    """Drives the producers, the faults and the read-back for one seeded run."""

    def __init__(
        self,
        root: Path,
        log: Callable[[str], None] = lambda _: None,
        *,
        through_producer: bool = False,
    ) -> None:
        self.group = ProxiedHaGroup(root)
        self.proxy: FaultProxy | None = None
        self._through_producer = through_producer
        """Send with Bolide's Producer (routes from the name server, no retries, so a timed
        out attempt cannot be stored twice) instead of raw requests through the proxy: the
        form controller mode needs, where the route names the new master."""
        self._producers: dict[str, Producer] = {}
        self.checker = Checker()
        self._sequences = dict.fromkeys(PRODUCERS, 0)
        self._log = log

    async def start(self) -> None:
        await self.group.start()
        await self.group.wait_until(self.group.slave_in_sync)
        await self.group.create_topic(TOPIC, QUEUES)
        self.proxy = FaultProxy(self.group.master_address)
        await self.proxy.start()
        if self._through_producer:
            for name in PRODUCERS:
                producer = Producer(
                    f"PG_{name}",
                    namesrv=self.group.namesrv_address,
                    instance_name=name,
                    send_timeout_ms=SEND_TIMEOUT_MS,
                    retry_count=0,
                )
                await producer.start()
                self._producers[name] = producer

    async def stop(self) -> None:
        for producer in self._producers.values():
            await producer.shutdown()
        master = self.group.master
        if master is not None and master.process.returncode is None:
            master.process.send_signal(signal.SIGCONT)
        if self.proxy is not None:
            await self.proxy.stop()
        await self.group.stop()

    # --- sends ------------------------------------------------------------------------------

    async def _send(self, producer: str) -> bool:
        proxy = self.proxy
        if proxy is None:
            raise RuntimeError("runner not started")
        sequence = self._sequences[producer]
        self._sequences[producer] = sequence + 1
        if self._through_producer:
            return await self._send_with_producer(producer, sequence)
        queue_id = sequence % QUEUES
        request = send_request(TOPIC, body_for(producer, sequence), queue_id=queue_id)
        try:
            response = await self.group.pool.invoke(proxy.address, request, SEND_TIMEOUT_MS)
        except BolideError:
            return False
        if response.code != ResponseCode.SUCCESS:
            return False
        self.checker.ack(
            Ack(
                producer,
                sequence,
                queue_id,
                int(response.ext_fields["queueOffset"]),
                "broker-a",
                self.group.master_address,
                0,
                time.monotonic(),
            )
        )
        return True

    async def _send_with_producer(self, name: str, sequence: int) -> bool:
        producer = self._producers[name]
        try:
            result = await producer.send(Message(TOPIC, body_for(name, sequence)))
        except BolideError:
            return False
        if result.status is not SendStatus.SEND_OK:
            return False
        broker = result.queue.broker_name
        self.checker.ack(
            Ack(
                name,
                sequence,
                result.queue.queue_id,
                result.queue_offset,
                broker,
                producer.instance.routes.master_address(broker) or "",
                0,
                time.monotonic(),
            )
        )
        return True

    async def _round(self) -> int:
        """One send per producer, concurrently; returns how many were acknowledged."""
        results = await asyncio.gather(*(self._send(p) for p in PRODUCERS))
        return sum(results)

    # --- faults -----------------------------------------------------------------------------

    async def run(self, faults: list[Fault]) -> None:
        for number, fault in enumerate(faults):
            for _ in range(fault.before_sends):
                await self._round()
            await self._inject(fault)
            for _ in range(fault.hold_sends):
                await self._round()
            await self._heal(fault)
            await self._until_acknowledged(fault, number)

    async def _inject(self, fault: Fault) -> None:
        proxy, master = self.proxy, self.group.master
        if proxy is None or master is None:
            raise RuntimeError("runner not started")
        if fault.kind != "none":
            self.checker.fault_started()
        if fault.kind == "drop":
            proxy.drop()
        elif fault.kind == "blackhole":
            proxy.blackhole()
        elif fault.kind == "pause_link":
            proxy.pause()
        elif fault.kind == "partition_ha" and self.group.ha_proxy is not None:
            self.group.ha_proxy.pause()  # master and slave cut apart; SYNC sends cannot ack
        elif fault.kind == "sigstop":
            master.process.send_signal(signal.SIGSTOP)
        elif fault.kind == "sigkill":
            await self.group.kill_master()

    async def _heal(self, fault: Fault) -> None:
        proxy = self.proxy
        if proxy is None:
            raise RuntimeError("runner not started")
        if fault.kind == "sigstop" and self.group.master is not None:
            self.group.master.process.send_signal(signal.SIGCONT)
        elif fault.kind == "sigkill":
            await self.group.start_master()
            # a SYNC_MASTER acknowledges nothing until its slave is back (SLAVE_NOT_AVAILABLE)
            await self.group.wait_until(self.group.slave_in_sync)
        proxy.heal()
        if self.group.ha_proxy is not None:
            self.group.ha_proxy.heal()

    async def _until_acknowledged(self, fault: Fault, number: int) -> None:
        for _ in range(RECOVERY_SEND_ATTEMPTS):
            if await self._round():
                return
        raise AssertionError(f"schedule {number} ({fault}): no send acknowledged after healing")

    # --- read back --------------------------------------------------------------------------

    async def read_back(self, address: str) -> list[Stored]:
        stored: list[Stored] = []
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                request = pull_request(
                    TOPIC, queue_id, offset, group="CG_CHAOS_READBACK", max_messages=32
                )
                response = await self.group.pool.invoke(address, request, 10_000)
                if response.code != ResponseCode.SUCCESS:
                    break
                for message in records(response):
                    stored.append(Stored(queue_id, message.queue_offset, message.body))
                offset = int(response.ext_fields["nextBeginOffset"])
        return stored

    async def verify(self) -> tuple[Report, Report]:
        """The checker's verdict on the master's queues and on the slave's (once caught up)."""
        master_records = await self.read_back(self.group.master_address)
        expected = len(master_records)

        async def slave_caught_up() -> bool:
            try:
                return len(await self.read_back(self.group.slave_address)) >= expected
            except BolideError:
                return False

        await self.group.wait_until(slave_caught_up)
        slave_records = await self.read_back(self.group.slave_address)
        return self.checker.verify(master_records), self.checker.verify(slave_records)


async def run_chaos(
    root: Path,
    faults: list[Fault],
    log: Callable[[str], None],
    *,
    through_producer: bool = False,
) -> Report:
    """Run ``faults`` against a fresh group under ``root``; returns the master's report
    (the slave's must agree on every acknowledged message, or this raises)."""
    runner = Runner(root, log, through_producer=through_producer)
    try:
        await runner.start()
        await runner.run(faults)
        on_master, on_slave = await runner.verify()
    finally:
        await runner.stop()
    log(f"master: {on_master.summary()}")
    log(f"slave:  {on_slave.summary()}")
    if on_slave.lost or on_slave.duplicated:
        raise AssertionError(f"the slave disagrees: {on_slave.summary()}")
    return on_master

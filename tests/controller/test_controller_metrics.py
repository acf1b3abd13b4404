"""A controller's /metrics (issue 25's operations): elections counted, each live replica's
epoch from its heartbeats, each broker set's master epoch and SyncStateSet, and the last
election per set — in process over a real etcd and HTTP, and as `bolide controller
--metrics-port 0`."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bolide.base.clock import SystemClock
from bolide.cli.controller import start_controller_metrics
from bolide.controller.settings import ControllerSettings
from bolide.protocol.codes import ResponseCode
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import CLUSTER, FakeBroker, running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
SOURCE = str(Path(__file__).resolve().parents[2] / "src")
NAME = "broker-m"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(address: str) -> Samples:
    """GET /metrics at ``address``: every sample by (name, sorted labels)."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {address}\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _set(name: str) -> tuple[tuple[str, str], ...]:
    return (("brokerName", name), ("cluster", CLUSTER))


async def test_elections_epochs_and_sets_are_exposed(etcd: EtcdCluster) -> None:
    settings = ControllerSettings(scan_not_active_broker_interval_ms=100)
    before_ms = SystemClock().now_ms()
    async with running_controller(etcd.endpoints, settings) as controller:
        await wait_leader(controller)
        metrics = await start_controller_metrics(controller, "127.0.0.1", 0)
        first = FakeBroker(controller.address, NAME, "127.0.0.1:20101")
        second = FakeBroker(controller.address, NAME, "127.0.0.1:20102")
        try:
            samples = await scrape(metrics.address)
            assert samples[("bolide_controller_is_leader", ())] == 1
            assert samples[("bolide_controller_elections_total", ())] == 0
            assert await first.join() == 1 and await second.join() == 2
            assert (await first.elect()).code == ResponseCode.SUCCESS
            await first.beat(epoch=1)
            await second.beat(epoch=1)
            widened = await first.alter(master_epoch=1, members={1, 2}, set_epoch=1)
            assert widened.code == ResponseCode.SUCCESS, widened.remark
            await until(lambda: controller.broker_sets.get(NAME, None) is not None
                        and controller.broker_sets[NAME].sync_state_set_epoch == 2)  # fmt: skip
            samples = await scrape(metrics.address)
            assert samples[("bolide_controller_elections_total", ())] == 1
            assert samples[("bolide_controller_master_epoch", _set(NAME))] == 1
            assert samples[("bolide_controller_master_broker_id", _set(NAME))] == 1
            assert samples[("bolide_controller_sync_state_set_epoch", _set(NAME))] == 2
            assert samples[("bolide_controller_sync_state_set_size", _set(NAME))] == 2
            replica = (("brokerAddr", second.address), ("brokerId", "2"), *_set(NAME))
            assert samples[("bolide_controller_broker_epoch", tuple(sorted(replica)))] == 1
            assert samples[("bolide_controller_heartbeat_table_entries", ())] == 2

            await first.die()  # the master's connection closes: re-elected at once
            await until(lambda: controller.elections == 2)
            await until(lambda: controller.broker_sets[NAME].master_epoch == 2)
            samples = await scrape(metrics.address)
            name = (("brokerName", NAME),)
            assert samples[("bolide_controller_elections_total", ())] == 2
            assert samples[("bolide_controller_last_election_broker_id", name)] == 2
            assert samples[("bolide_controller_last_election_epoch", name)] == 2
            assert samples[("bolide_controller_last_election_timestamp_ms", name)] >= before_ms
            assert samples[("bolide_controller_master_broker_id", _set(NAME))] == 2
            assert ("bolide_controller_broker_epoch",
                    tuple(sorted((("brokerAddr", first.address), ("brokerId", "1"),
                                  *_set(NAME))))) not in samples  # fmt: skip
        finally:
            await first.die()
            await second.die()
            await metrics.stop()


async def test_metrics_port_of_the_process(etcd: EtcdCluster, tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        BOLIDE, "controller", "--etcd", etcd.endpoints, "--port", "0", "--metrics-port", "0",
        "--data-dir", str(tmp_path), cwd=tmp_path, env={**os.environ, "PYTHONPATH": SOURCE},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), READY_TIMEOUT_S)).decode()
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        assert set(fields) == {"controller", "metrics"}, line
        samples = await scrape(fields["metrics"])
        assert samples[("bolide_controller_elections_total", ())] == 0
        assert ("bolide_controller_is_leader", ()) in samples
    finally:
        process.terminate()
        await process.wait()

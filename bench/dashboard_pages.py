"""How fast the dashboard's pages render with many consumer groups (1,000 by default).

An in-process name server and broker get ``--groups`` subscription groups, each with
committed offsets on its own topic (``--queues`` queues, one message each, so every group
lags), and the dashboard is served on a free port. Each page is fetched ``--rounds`` times
over HTTP; the figure is the server's whole answer time. For comparison the admin client's
``list_groups`` (one GET_CONSUMER_CONNECTION_LIST per group, the N+1 pattern users complain
about in rocketmq-dashboard) is timed over the same groups.

    .venv/bin/python bench/dashboard_pages.py [--groups 1000] [--queues 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bolide.client.admin import AdminClient
from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.server import DashboardServer
from bolide.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from bolide.store.api import PutRequest
from bolide.testing.cluster import Cluster


async def _get(address: str, path: str) -> tuple[int, int]:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    return int(raw.split(b" ", 2)[1]), len(raw)


async def _populate(cluster: Cluster, groups: int, queues: int) -> None:
    context = cluster.broker("broker-a").context
    for index in range(groups):
        topic, group = f"BenchTopic{index}", f"BenchGroup{index}"
        await context.topics.update_topic_config(TopicConfig(topic, queues, queues))
        await context.groups.update(SubscriptionGroupConfig(group))
        for queue_id in range(queues):
            await context.store.put_message(PutRequest(topic, queue_id, b"x" * 32))
        context.offsets.set_queue_offsets(group, topic, dict.fromkeys(range(queues), 0))
    await cluster.broker("broker-a").registration.register_once()


async def _time(call: object, rounds: int) -> list[float]:
    timings: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()  # type: ignore[operator]
        timings.append((time.perf_counter() - started) * 1000)
    return timings


async def main(groups: int, queues: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bolide-dashboard-bench-") as root:
        async with Cluster(Path(root)) as cluster:
            await _populate(cluster, groups, queues)
            server = DashboardServer(DashboardSettings(cluster.namesrv_address), "127.0.0.1", 0)
            await server.start()
            try:
                pages = [
                    "/",
                    "/topics",
                    "/groups",
                    "/groups/BenchGroup7",
                    "/api/groups/BenchGroup7",
                ]
                command = " ".join(["bench/dashboard_pages.py", *sys.argv[1:]])
                print(f"command: .venv/bin/python {command}")
                print(f"groups: {groups}, each lagging on its own topic of {queues} queues")
                for path in pages:
                    status, size = await _get(server.address, path)
                    assert status == 200, (path, status)
                    timings = await _time(lambda p=path: _get(server.address, p), rounds)
                    print(
                        f"GET {path:<26} {size / 1024:7.0f} KiB  median "
                        f"{statistics.median(timings):6.0f} ms  max {max(timings):6.0f} ms"
                    )
                async with AdminClient(cluster.namesrv_address) as admin:
                    timings = await _time(admin.list_groups, max(1, rounds // 2))
                print(
                    "admin list_groups (one request per group, for comparison): median "
                    f"{statistics.median(timings):.0f} ms"
                )
            finally:
                await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(arguments.groups, arguments.queues, arguments.rounds))

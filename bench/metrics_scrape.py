"""What one /metrics scrape costs the broker: 10,000 queues with lag on every one.

An in-process broker gets ``--topics`` topics of ``--queues`` queues, one stored message
per queue and a consumer group with a committed offset of 0 on every queue (so every queue
lags and its oldest unconsumed message is looked up). The scrape — figures read on the
broker's loop, families built and rendered by prometheus_client on a worker thread, unchanged
families served from the render cache — is timed once cold and then ``--rounds`` times.

    .venv/bin/python bench/metrics_scrape.py [--topics 1250] [--queues 8] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from bolide.protocol.bodies import TopicConfig
from bolide.store.api import PutRequest
from bolide.testing.cluster import Cluster


async def main(topics: int, queues: int, filled: int, rounds: int, profile: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="bolide-metrics-bench-") as root:
        settings = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}
        async with Cluster(Path(root), settings=settings) as cluster:
            broker = cluster.broker("broker-a")
            context = broker.context
            for index in range(topics):
                name = f"BenchTopic{index}"
                config = TopicConfig(name, read_queue_count=queues, write_queue_count=queues)
                await context.topics.update_topic_config(config)
                for queue_id in range(min(queues, filled)):
                    await context.store.put_message(PutRequest(name, queue_id, b"x" * 64))
                context.offsets.set_queue_offsets(
                    "BenchGroup", name, dict.fromkeys(range(queues), 0)
                )
                context.stats.record_put(queues, 64 * queues, topic=name, elapsed_us=100)
                context.stats.record_get(1, 64, topic=name, group="BenchGroup")
            metrics = broker.metrics
            assert metrics is not None and metrics.server is not None
            server = metrics.server
            if profile:
                profiler = cProfile.Profile()
                profiler.enable()
                list(metrics.collector.collect())
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(14)
            timings_ms: list[float] = []
            collect_ms: list[float] = []
            size = series = 0
            rendered_before = server.rendered_count
            await server.exposition_off_loop()  # cold: every family rendered
            cold_ms = (server.last_collect_ms, server.last_scrape_ms)
            cold_rendered = server.rendered_count - rendered_before
            rendered_before = server.rendered_count
            for _ in range(rounds):
                size = len(await server.exposition_off_loop())
                collect_ms.append(server.last_collect_ms)
                timings_ms.append(server.last_scrape_ms)
            warm_rendered = (server.rendered_count - rendered_before) / rounds
            families = list(metrics.collector.collect())
            series = sum(len(family.samples) for family in families)
    command = " ".join(["bench/metrics_scrape.py", *sys.argv[1:]])
    print(f"command: .venv/bin/python {command}")
    print(
        f"queues: {topics * queues} ({topics} topics x {queues}, {filled} holding a message), "
        "one lagging group on each topic"
    )
    print(f"exposition: {size / 1024:.0f} KiB, {series} series from the broker's collector")
    print(
        f"first (cold) scrape: loop held {cold_ms[0]:.1f} ms, whole {cold_ms[1]:.1f} ms, "
        f"{cold_rendered} families rendered; later scrapes render {warm_rendered:.0f} "
        "(the rest unchanged, from the render cache)"
    )
    print(
        "event loop held (reading the broker's figures) ms: "
        f"median {statistics.median(collect_ms):.1f}, max {max(collect_ms):.1f}"
    )
    print(
        "whole scrape (read on the loop + build and render on a worker thread) ms: "
        f"median {statistics.median(timings_ms):.1f}, "
        f"min {min(timings_ms):.1f}, max {max(timings_ms):.1f} ({rounds} rounds)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1250)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--filled", type=int, default=2, help="queues per topic holding a message (open files)"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile one collection first")
    arguments = parser.parse_args()
    # One consume-queue file (and descriptor) per queue: 10,000 queues need the hard limit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(
        main(
            arguments.topics,
            arguments.queues,
            arguments.filled,
            arguments.rounds,
            arguments.profile,
        )
    )

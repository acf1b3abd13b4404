"""An in-process Bolide cluster for tests: name servers and brokers on 127.0.0.1, port 0.

::

    async with Cluster(tmp_path, broker_names=("broker-a", "broker-b")) as cluster:
        cluster.namesrv_address        # "127.0.0.1:<port>" of the first name server
        cluster.broker("broker-a")     # a started bolide.broker.Broker
        ...

Every broker keeps its data under ``<root>/<broker name>/store`` and registers with every
name server of the cluster. Stores use small segments so a test directory stays small. Leaving
the ``async with`` block stops the brokers (offsets, tables and store checkpoint written), then
the name servers. Everything runs on the caller's event loop; nothing listens beyond loopback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bolide.base.clock import Clock
from bolide.base.errors import invariant
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig
from bolide.client.lifecycle import AsyncLifecycle
from bolide.namesrv.namesrv import NameServer
from bolide.standalone.assembly import Assembly

__all__ = ["TEST_BROKER_SETTINGS", "Cluster"]

LOOPBACK = "127.0.0.1"

TEST_BROKER_SETTINGS: Mapping[str, object] = {
    "commit_log_segment_bytes": 16 * 1024 * 1024,
    "consume_queue_file_bytes": 20 * 20_000,
}
"""Store sizes for tests: 16 MiB commit-log segments and 20,000-entry consume-queue files."""


class Cluster(AsyncLifecycle):
    """``namesrv_count`` name servers and one broker per name in ``broker_names``.

    ``settings`` (BrokerConfig field names or broker.conf keys) apply to every broker, on top
    of :data:`TEST_BROKER_SETTINGS`; ``clock`` (default: the system clock) drives every
    server's timers; ``namesrv_options`` are keyword arguments of every NameServer (TLS, ACL).
    Use as an async context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        root: Path,
        *,
        namesrv_count: int = 1,
        broker_names: Sequence[str] = ("broker-a",),
        cluster_name: str = "DefaultCluster",
        settings: Mapping[str, object] | None = None,
        clock: Clock | None = None,
        seed: int | None = 0,
        namesrv_options: Mapping[str, Any] | None = None,
    ) -> None:
        invariant(namesrv_count >= 1, "a cluster has a name server")
        self._namesrv_options = dict(namesrv_options or {})
        self.root = root
        self._namesrv_count = namesrv_count
        self._broker_names = tuple(broker_names)
        self._cluster_name = cluster_name
        self._settings = {**TEST_BROKER_SETTINGS, **(settings or {})}
        self._clock = clock
        self._seed = seed
        self._assembly = Assembly()

    @property
    def namesrvs(self) -> list[NameServer]:
        """The started name servers, in start order."""
        return self._assembly.namesrvs

    @property
    def brokers(self) -> list[Broker]:
        """The started brokers, in start order (a test may remove one it stopped itself)."""
        return self._assembly.brokers

    @property
    def namesrv_address(self) -> str:
        """``host:port`` of the first name server."""
        invariant(bool(self.namesrvs), "cluster not started")
        return self.namesrvs[0].address

    @property
    def namesrv_addresses(self) -> str:
        """Every name server, ``;``-separated (RocketMQ's namesrvAddr form)."""
        return ";".join(namesrv.address for namesrv in self.namesrvs)

    def broker(self, name: str) -> Broker:
        """The started broker named ``name``."""
        for broker in self.brokers:
            if broker.config.broker_name == name:
                return broker
        raise KeyError(name)

    async def start(self) -> None:
        """Start the name servers, then the brokers (each registered when this returns)."""
        try:
            for _ in range(self._namesrv_count):
                await self._assembly.start_name_server(
                    NameServer(LOOPBACK, 0, self._clock, **self._namesrv_options)
                )
            for name in self._broker_names:
                await self.add_broker(name)
        except BaseException:
            await self.stop()
            raise

    async def add_broker(self, name: str, **settings: object) -> Broker:
        """Start one more broker named ``name`` (extra ``settings`` on top of the cluster's)."""
        overrides: dict[str, object] = {
            **self._settings,
            "broker_name": name,
            "broker_cluster_name": self._cluster_name,
            "broker_ip1": LOOPBACK,
            "listen_port": 0,
            "namesrv_addresses": tuple(namesrv.address for namesrv in self.namesrvs),
            "store_path_root_dir": self.root / name / "store",
            **settings,
        }
        broker = Broker(
            BrokerConfig.from_mapping({}, overrides),
            host=LOOPBACK,
            clock=self._clock,
            seed=self._seed,
        )
        return await self._assembly.start_broker(broker)

    async def stop(self) -> None:
        """Stop every broker, then every name server. Idempotent."""
        await self._assembly.stop()

    async def _close(self) -> None:
        """``async with`` ends with :meth:`stop`."""
        await self.stop()

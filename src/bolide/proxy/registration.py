"""5.x consumers registered with the brokers, as Apache's proxy registers them with its
broker's ConsumerManager (``ClientActivity``): without it a 5.x group has no members on the
brokers, so ``bolide group connections``, online counts, the dashboard and rebalance views
miss it.

* Each Settings (over Telemetry) and each Heartbeat of a push or simple consumer (every 10 s
  from the SDKs) becomes a HEART_BEAT
  (34) to every broker holding one of its subscribed topics: the group, the client's id,
  CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (simple), CLUSTERING, CONSUME_FROM_LAST_OFFSET
  and the subscriptions of its Settings. The broker drops it 120 s after the last one.
* NotifyClientTermination becomes UNREGISTER_CLIENT (35) of that group on the same brokers.
* Each 5.x consumer heartbeats the brokers over a connection of its own (a pool the proxy
  opens for it, signed and encrypted as the proxy's own): a broker knows a group's members by
  their connection, so two SimpleConsumers of one group through one proxy are two members with
  their own client ids, in group connections, online counts and rebalance views, as two 4.x
  consumers are. The pool closes when the consumer terminates or is forgotten (silent for
  PROXY_CLIENT_EXPIRY_MS): the brokers drop the member at once. Past
  PROXY_CONSUMER_CONNECTIONS_MAX_COUNT consumers a new one shares the proxy's connection
  (warned), where the brokers list only the latest client of each group.
* A broker that cannot be reached is logged and skipped: the heartbeat itself still succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.rpc.client import heartbeat, unregister_client
from bolide.protocol.bodies import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    BodyError,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    SubscriptionData,
)
from bolide.proxy.brokers import BrokerDirectory
from bolide.proxy.proto import definition_pb2 as pb
from bolide.remoting import ClientPool

__all__ = ["ConsumerRegistration", "PoolFactory", "consumer_data"]

PoolFactory = Callable[[], ClientPool]
"""Opens a connection pool to the brokers, set up as the proxy's own (signing, TLS)."""

_log = logging.getLogger("bolide.proxy.registration")

_CONSUME_TYPES = {
    pb.PUSH_CONSUMER: ConsumeType.CONSUME_PASSIVELY,
    pb.SIMPLE_CONSUMER: ConsumeType.CONSUME_ACTIVELY,
}


def consumer_data(settings: pb.Settings) -> ConsumerData | None:
    """The 4.x ConsumerData of a consumer's Settings; None for other clients."""
    consume_type = _CONSUME_TYPES.get(settings.client_type)
    if consume_type is None or not settings.HasField("subscription"):
        return None
    subscriptions: list[SubscriptionData] = []
    for entry in settings.subscription.subscriptions:
        kind = EXPRESSION_TYPE_SQL92 if entry.expression.type == pb.SQL else EXPRESSION_TYPE_TAG
        try:
            subscriptions.append(
                SubscriptionData.from_expression(
                    entry.topic.name, entry.expression.expression or "*", 0, kind
                )
            )
        except BodyError as error:
            _log.warning("subscription of %s to %s not registered: %s",
                         settings.subscription.group.name, entry.topic.name, error)  # fmt: skip
    return ConsumerData(
        settings.subscription.group.name,
        consume_type,
        subscription_data_set=tuple(subscriptions),
    )


class ConsumerRegistration:
    """Registers 5.x consumers with the brokers of their topics (see the module docstring).
    Without ``pool_factory`` every consumer shares the directory's pool."""

    def __init__(self, directory: BrokerDirectory, pool_factory: PoolFactory | None = None) -> None:
        self._directory = directory
        self._pool_factory = pool_factory
        self._pools: dict[str, ClientPool] = {}
        """Client id -> the pool its registrations go over."""

    @property
    def own_connections(self) -> int:
        """Consumers registered over a connection of their own."""
        return len(self._pools)

    def _pool_of(self, client_id: str) -> ClientPool:
        if self._pool_factory is None:
            return self._directory.pool
        pool = self._pools.get(client_id)
        if pool is None:
            if len(self._pools) >= limits.PROXY_CONSUMER_CONNECTIONS_MAX_COUNT:
                _log.warning(
                    "%d 5.x consumers have their own broker connections: %s shares the "
                    "proxy's, the brokers list one member of its group for this proxy",
                    len(self._pools),
                    client_id,
                )
                return self._directory.pool
            pool = self._pools[client_id] = self._pool_factory()
        return pool

    async def forget(self, client_id: str) -> None:
        """Close the consumer's own connections (the brokers drop it from its group)."""
        pool = self._pools.pop(client_id, None)
        if pool is not None:
            await pool.close()

    async def close(self) -> None:
        """Close every consumer's own connections (the proxy stops)."""
        for client_id in list(self._pools):
            await self.forget(client_id)

    async def heartbeat(self, client_id: str, settings: pb.Settings) -> int:
        """Register the consumer of ``settings`` with its brokers; returns how many took it."""
        data = consumer_data(settings)
        if data is None or not data.group_name:
            return 0
        body = HeartbeatData(client_id, (), (data,))
        registered = 0
        pool = self._pool_of(client_id)
        for address in await self._addresses(data):
            try:
                await heartbeat(pool, address, body, limits.PROXY_RPC_TIMEOUT_MS)
                registered += 1
            except (BolideError, OSError) as error:
                _log.warning("consumer %s of %s not registered with %s: %s",
                             client_id, data.group_name, address, error)  # fmt: skip
        return registered

    async def unregister(self, client_id: str, settings: pb.Settings) -> None:
        """The consumer left: UNREGISTER_CLIENT of its group on its brokers, then its own
        connections close."""
        data = consumer_data(settings)
        if data is None or not data.group_name:
            await self.forget(client_id)
            return
        pool = self._pools.get(client_id, self._directory.pool)
        for address in await self._addresses(data):
            try:
                await unregister_client(
                    pool,
                    address,
                    client_id,
                    limits.PROXY_RPC_TIMEOUT_MS,
                    consumer_group=data.group_name,
                )
            except (BolideError, OSError) as error:
                _log.warning("consumer %s of %s not unregistered from %s: %s",
                             client_id, data.group_name, address, error)  # fmt: skip
        await self.forget(client_id)

    async def _addresses(self, data: ConsumerData) -> list[str]:
        addresses: set[str] = set()
        for subscription in data.subscription_data_set:
            try:
                brokers = await self._directory.brokers(subscription.topic)
            except (BolideError, OSError) as error:
                _log.debug("no route for %s: %s", subscription.topic, error)
                continue
            addresses.update(broker.address for broker in brokers)
        return sorted(addresses)

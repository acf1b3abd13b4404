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
* The brokers see the proxy's connection as the channel: 5.x clients of one group through one
  proxy share it, so the brokers list the latest of them (one member per proxy and group).
* A broker that cannot be reached is logged and skipped: the heartbeat itself still succeeds.
"""

from __future__ import annotations

import logging

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

__all__ = ["ConsumerRegistration", "consumer_data"]

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
    """Registers 5.x consumers with the brokers of their topics (see the module docstring)."""

    def __init__(self, directory: BrokerDirectory) -> None:
        self._directory = directory

    async def heartbeat(self, client_id: str, settings: pb.Settings) -> int:
        """Register the consumer of ``settings`` with its brokers; returns how many took it."""
        data = consumer_data(settings)
        if data is None or not data.group_name:
            return 0
        body = HeartbeatData(client_id, (), (data,))
        registered = 0
        for address in await self._addresses(data):
            try:
                await heartbeat(self._directory.pool, address, body, limits.PROXY_RPC_TIMEOUT_MS)
                registered += 1
            except (BolideError, OSError) as error:
                _log.warning("consumer %s of %s not registered with %s: %s",
                             client_id, data.group_name, address, error)  # fmt: skip
        return registered

    async def unregister(self, client_id: str, settings: pb.Settings) -> None:
        """The consumer left: UNREGISTER_CLIENT of its group on its brokers."""
        data = consumer_data(settings)
        if data is None or not data.group_name:
            return
        for address in await self._addresses(data):
            try:
                await unregister_client(
                    self._directory.pool,
                    address,
                    client_id,
                    limits.PROXY_RPC_TIMEOUT_MS,
                    consumer_group=data.group_name,
                )
            except (BolideError, OSError) as error:
                _log.warning("consumer %s of %s not unregistered from %s: %s",
                             client_id, data.group_name, address, error)  # fmt: skip

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

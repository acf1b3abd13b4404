"""5.x clients the proxy serves, keyed by ``x-mq-client-id``: their settings (sent over
Telemetry), the stream to push commands to them, and the settings the proxy answers.

The answer follows the Apache proxy (GrpcClientSettingsManager):

* producers: retry 3 attempts, exponential back-off 10 ms to 1 s (x2), max body 4 MiB,
  validate_message_type on;
* consumers: receive batch 32, long polling 20 s (a simple consumer keeps its own), fifo =
  the group's ``consumeMessageOrderly``, max attempts = ``retryMaxTimes + 1``, back-off = the
  group's ``groupRetryPolicy`` (customized waits or exponential), else customized 1 s, 5 s,
  10 s, 30 s, 1 m, ... 30 m (RocketMQ's delay levels), metrics off.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from bolide.base import limits
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.bodies.retry_policy import GroupRetryPolicy, RetryPolicyType
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb

__all__ = ["ClientRegistry", "ClientSession", "settings_reply"]

RETRY_DELAYS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)
"""Back-off of a failed consumption, per attempt (RocketMQ's delay levels, in seconds)."""
DEFAULT_RETRY_MAX_TIMES = 16


@dataclass(slots=True)
class ClientSession:
    client_id: str
    settings: pb.Settings | None = None
    outbox: asyncio.Queue[spb.TelemetryCommand] = field(
        default_factory=lambda: asyncio.Queue(limits.PROXY_TRANSACTION_CHECK_QUEUE_MAX_ENTRIES)
    )
    telemetry_open: bool = False
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def client_type(self) -> int:
        return int(self.settings.client_type) if self.settings is not None else 0

    @property
    def group(self) -> str:
        if self.settings is None or not self.settings.HasField("subscription"):
            return ""
        return self.settings.subscription.group.name

    @property
    def topics(self) -> list[str]:
        if self.settings is None or not self.settings.HasField("publishing"):
            return []
        return [topic.name for topic in self.settings.publishing.topics]


class ClientRegistry:
    """Every client seen recently."""

    def __init__(self) -> None:
        self._clients: dict[str, ClientSession] = {}

    def get(self, client_id: str) -> ClientSession:
        session = self._clients.get(client_id)
        if session is None:
            session = self._clients[client_id] = ClientSession(client_id)
        session.last_seen = time.monotonic()
        return session

    def find(self, client_id: str) -> ClientSession | None:
        return self._clients.get(client_id)

    def remove(self, client_id: str) -> None:
        self._clients.pop(client_id, None)

    def producers_of(self, topic: str) -> list[ClientSession]:
        """Clients publishing ``topic`` with an open Telemetry stream (transaction checks)."""
        return [
            session
            for session in self._clients.values()
            if session.telemetry_open and topic in session.topics
        ]

    def producing(self) -> list[ClientSession]:
        """Clients with an open Telemetry stream that publish topics."""
        return [s for s in self._clients.values() if s.telemetry_open and s.topics]

    def expire(self) -> list[str]:
        """Forget clients silent for PROXY_CLIENT_EXPIRY_MS; returns their ids."""
        limit = time.monotonic() - limits.PROXY_CLIENT_EXPIRY_MS / 1000
        stale = [
            key
            for key, session in self._clients.items()
            if session.last_seen < limit and not session.telemetry_open
        ]
        for key in stale:
            del self._clients[key]
        return stale

    def __len__(self) -> int:
        return len(self._clients)


def settings_reply(
    client: pb.Settings, group: SubscriptionGroupConfig | None, *, max_body_bytes: int
) -> pb.Settings:
    """The merged Settings the proxy answers a client's Settings with."""
    reply = pb.Settings()
    reply.CopyFrom(client)
    reply.metric.on = False
    if client.HasField("publishing"):
        reply.backoff_policy.max_attempts = 3
        backoff = reply.backoff_policy.exponential_backoff
        backoff.initial.FromMilliseconds(10)
        backoff.max.FromMilliseconds(1_000)
        backoff.multiplier = 2.0
        reply.publishing.max_body_size = max_body_bytes
        reply.publishing.validate_message_type = True
        return reply
    subscription = reply.subscription
    subscription.receive_batch_size = limits.POP_BATCH_MAX_MESSAGES
    if not client.subscription.HasField("long_polling_timeout"):
        subscription.long_polling_timeout.FromMilliseconds(limits.PROXY_LONG_POLLING_MAX_MS)
    subscription.fifo = bool(group is not None and group.consume_orderly_enable)
    retry_max_times = group.retry_max_times if group is not None else DEFAULT_RETRY_MAX_TIMES
    reply.backoff_policy.max_attempts = retry_max_times + 1
    _set_backoff(reply.backoff_policy, group.group_retry_policy if group is not None else None)
    return reply


def _set_backoff(backoff: pb.RetryPolicy, policy: GroupRetryPolicy | None) -> None:
    """The group's ``groupRetryPolicy`` as a consumer's back-off; RETRY_DELAYS_S without one
    (or with Java's default object, CUSTOMIZED without waits)."""
    if policy is None or (policy.type is RetryPolicyType.CUSTOMIZED and not policy.next_ms):
        for seconds in RETRY_DELAYS_S:
            backoff.customized_backoff.next.add(seconds=seconds)
    elif policy.type is RetryPolicyType.EXPONENTIAL:
        exponential = backoff.exponential_backoff
        exponential.initial.FromMilliseconds(policy.initial_ms)
        exponential.max.FromMilliseconds(policy.max_ms)
        exponential.multiplier = float(policy.multiplier)
    else:
        for wait_ms in policy.next_ms:
            backoff.customized_backoff.next.add().FromMilliseconds(wait_ms)

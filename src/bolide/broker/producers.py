"""Which connections registered which producer groups (HEART_BEAT producerDataSet).

The broker needs producers for two things only: GET_PRODUCER_CONNECTION_LIST (admin) and,
for transactional messages, a live connection of the producer group to send
CHECK_TRANSACTION_STATE to. A channel silent for ``CLIENT_CHANNEL_EXPIRY_MS`` (120 s) is
dropped by :meth:`ProducerManager.scan_not_active_channel`; a closed connection is dropped at
once by :meth:`ProducerManager.do_channel_close`. Pure: no sockets, time from the injected
clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import invariant
from bolide.broker.channels import ChannelKey, ClientChannelInfo
from bolide.protocol.bodies import ProducerConnection

_log = logging.getLogger("bolide.broker.producers")


class ProducerManager(Generic[ChannelKey]):
    """Producer group → {channel → :class:`ClientChannelInfo`}.

    ``channel_expiry_ms`` (default ``CLIENT_CHANNEL_EXPIRY_MS``, 120 s) is how long a channel
    may stay without a heartbeat before :meth:`scan_not_active_channel` drops it.
    """

    def __init__(
        self, clock: Clock, *, channel_expiry_ms: int = limits.CLIENT_CHANNEL_EXPIRY_MS
    ) -> None:
        invariant(channel_expiry_ms > 0, "channel expiry is positive")
        self._clock = clock
        self._channel_expiry_ms = channel_expiry_ms
        self._groups: dict[str, dict[ChannelKey, ClientChannelInfo[ChannelKey]]] = {}
        self._round_robin: dict[str, int] = {}

    def register_producer(self, group: str, info: ClientChannelInfo[ChannelKey]) -> bool:
        """Record (or refresh) ``info.channel`` as a producer of ``group``.

        The stored record's ``last_update_ms`` becomes now. Returns True when the channel is
        new to the group.
        """
        info.last_update_ms = self._clock.monotonic_ms()
        channels = self._groups.setdefault(group, {})
        is_new = info.channel not in channels
        channels[info.channel] = info
        if is_new:
            _log.info(
                "new producer %s of group %s from %s", info.client_id, group, info.remote_address
            )
        return is_new

    def unregister_producer(self, group: str, channel: ChannelKey) -> bool:
        """Forget ``channel`` as a producer of ``group``; True when it was registered."""
        channels = self._groups.get(group)
        if channels is None or channels.pop(channel, None) is None:
            return False
        if not channels:
            self._drop_group(group)
        return True

    def do_channel_close(self, channel: ChannelKey) -> list[str]:
        """Forget a closed connection in every group; returns the groups it left (sorted)."""
        left = [group for group in list(self._groups) if self.unregister_producer(group, channel)]
        return sorted(left)

    def scan_not_active_channel(self) -> list[ChannelKey]:
        """Drop every channel without a heartbeat for ``channel_expiry_ms`` or longer.

        Returns the dropped channels (each once); the caller closes those connections.
        """
        now_ms = self._clock.monotonic_ms()
        expired: dict[ChannelKey, None] = {}
        for group, channels in list(self._groups.items()):
            for channel, info in list(channels.items()):
                if info.is_expired(now_ms, self._channel_expiry_ms):
                    _log.warning(
                        "producer %s of group %s expired after %d ms without heartbeat",
                        info.client_id,
                        group,
                        now_ms - info.last_update_ms,
                    )
                    del channels[channel]
                    expired[channel] = None
            if not channels:
                self._drop_group(group)
        return list(expired)

    def producer_connections(self, group: str) -> list[ClientChannelInfo[ChannelKey]]:
        """The channels of ``group``, sorted by client id (empty for an unknown group)."""
        channels = self._groups.get(group, {})
        return sorted(channels.values(), key=lambda info: (info.client_id, info.remote_address))

    def producer_connection(self, group: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST body (empty connection set for an unknown group)."""
        infos = self.producer_connections(group)
        return ProducerConnection(tuple(info.to_connection() for info in infos))

    def find_channel(
        self, group: str, usable: Callable[[ChannelKey], bool] | None = None
    ) -> ClientChannelInfo[ChannelKey] | None:
        """A channel of ``group`` to call back (transaction state checks), or None.

        Successive calls go round the group's channels; ``usable`` (e.g. "connection open and
        writable") skips channels that cannot take a request now.
        """
        channels = self._groups.get(group)
        if not channels:
            return None
        infos = list(channels.values())
        start = self._round_robin.get(group, 0)
        for step in range(len(infos)):
            info = infos[(start + step) % len(infos)]
            if usable is None or usable(info.channel):
                self._round_robin[group] = (start + step + 1) % len(infos)
                return info
        return None

    def find_channel_by_client_id(self, client_id: str) -> ClientChannelInfo[ChannelKey] | None:
        """The most recently refreshed channel registered with ``client_id``, or None."""
        found: ClientChannelInfo[ChannelKey] | None = None
        for channels in self._groups.values():
            for info in channels.values():
                if info.client_id == client_id and (
                    found is None or info.last_update_ms > found.last_update_ms
                ):
                    found = info
        return found

    def groups(self) -> list[str]:
        """Producer groups with at least one channel, sorted."""
        return sorted(self._groups)

    def _drop_group(self, group: str) -> None:
        del self._groups[group]
        self._round_robin.pop(group, None)

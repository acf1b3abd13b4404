"""What the broker remembers about a client connection that registered a producer or consumer.

The consumer and producer managers never touch sockets: a channel is an opaque hashable key
(in the running broker, the :class:`bolide.remoting.connection.Connection` itself; in tests,
any hashable) plus this small record, refreshed by every heartbeat.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from bolide.protocol.bodies import Connection
from bolide.protocol.codes import LanguageCode

ChannelKey = TypeVar("ChannelKey", bound=Hashable)
"""The opaque, hashable identity of one client connection."""


@dataclass(slots=True)
class ClientChannelInfo(Generic[ChannelKey]):
    """One client connection as seen in a heartbeat or an unregister request.

    ``remote_address`` is the peer's ``ip:port``; ``version`` the client's wire version (the
    command's ``version`` field); ``last_update_ms`` the clock's monotonic reading at the last
    heartbeat, set by the manager that stores the record.
    """

    channel: ChannelKey
    client_id: str
    language: LanguageCode
    version: int
    remote_address: str
    last_update_ms: int = 0

    def is_expired(self, now_ms: int, expiry_ms: int) -> bool:
        """True when no heartbeat came for ``expiry_ms`` or longer (both on the monotonic
        clock): a channel silent for exactly ``expiry_ms`` is expired."""
        return now_ms - self.last_update_ms >= expiry_ms

    def to_connection(self) -> Connection:
        """The entry of a consumer or producer connection list (admin bodies)."""
        return Connection(self.client_id, self.remote_address, self.language, self.version)

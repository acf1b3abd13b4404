"""Keeping every name server informed of this broker and its topics (docs/protocol.md §2.3).

A broker sends REGISTER_BROKER to every configured name server when it starts, every
``registerNameServerPeriod`` (30 s) afterwards, and at once when its topic table changed (an
auto-created topic must become routable quickly). A name server forgets a broker that stayed
silent for 120 s or whose connection closed, so the registrations go over the long-lived
connections of a :class:`~bolide.remoting.client_pool.ClientPool`. At shutdown the broker
sends UNREGISTER_BROKER, so clients stop routing to it before it goes away.

The REGISTER_BROKER body is the topics.json wrapper inside a RegisterBrokerBody (JSON,
uncompressed); ``bodyCrc32`` is the CRC32 of those bytes masked to 31 bits, which the name
server checks.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError
from bolide.base.service import CrashHandler, Service
from bolide.broker.outbound import register_broker_request, unregister_broker_request
from bolide.protocol.bodies import RegisterBrokerBody, TopicConfigSerializeWrapper
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    HeaderError,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from bolide.remoting import ClientPool

__all__ = ["BrokerIdentity", "NameServerRegistration"]

_log = logging.getLogger("bolide.broker.registration")

_CRC_MASK = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who this broker is to the name servers. ``broker_addr`` is ``brokerIP1:listenPort``,
    the address clients connect to and the STOREHOST of every stored record."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str


class NameServerRegistration:
    """Registers the broker with every name server, periodically and on demand.

    ``topics`` returns the current topic table with its data version (the
    TopicConfigManager's wrapper). ``interval_ms`` is registerNameServerPeriod;
    ``timeout_ms`` bounds each request. Failures are logged and retried at the next period:
    one unreachable name server never blocks the others.
    """

    def __init__(
        self,
        identity: BrokerIdentity,
        namesrv_addresses: Sequence[str],
        topics: Callable[[], TopicConfigSerializeWrapper],
        pool: ClientPool,
        *,
        clock: Clock,
        interval_ms: int = limits.BROKER_REGISTER_INTERVAL_MS,
        timeout_ms: int = limits.BROKER_REGISTER_TIMEOUT_MS,
        on_crash: CrashHandler | None = None,
        on_registered: Callable[[str | None, str | None], None] | None = None,
    ) -> None:
        self.identity = identity
        self._on_registered = on_registered
        """Hears (masterAddr, haServerAddr) of each REGISTER_BROKER answer (a slave learns
        its master from them)."""
        self.namesrv_addresses = tuple(namesrv_addresses)
        self._topics = topics
        self._pool = pool
        self._timeout_ms = timeout_ms
        self.registration_count = 0
        """Successful REGISTER_BROKER answers so far (all name servers together)."""
        self._service = Service(
            "broker-registration",
            self._step,
            interval_ms=interval_ms,
            clock=clock,
            on_crash=on_crash,
        )

    async def start(self) -> int:
        """Register with every name server once, then start the periodic registration.

        Returns how many name servers accepted the first registration (the broker starts
        even when none did: they are retried every period).
        """
        accepted = await self.register_once()
        self._service.start()
        return accepted

    def register_soon(self) -> None:
        """Re-register at once, off the caller's path (after a topic was created or changed).

        Several calls before the registration runs collapse into one.
        """
        self._service.wakeup()

    async def register_once(self) -> int:
        """Send REGISTER_BROKER to every name server now; returns how many accepted it."""
        if not self.namesrv_addresses:
            return 0
        body = RegisterBrokerBody(self._topics()).to_json()
        header = RegisterBrokerRequestHeader(
            broker_name=self.identity.broker_name,
            broker_addr=self.identity.broker_addr,
            cluster_name=self.identity.cluster_name,
            ha_server_addr=self.identity.ha_server_addr,
            broker_id=self.identity.broker_id,
            compressed=False,
            body_crc32=zlib.crc32(body) & _CRC_MASK,
        )
        results = await asyncio.gather(
            *(
                self._send(address, register_broker_request(header, body))
                for address in self.namesrv_addresses
            )
        )
        accepted = sum(results)
        self.registration_count += accepted
        return accepted

    async def stop(self) -> int:
        """Stop the periodic registration and send UNREGISTER_BROKER to every name server.

        Returns how many name servers acknowledged the unregistration.
        """
        await self._service.stop(self._timeout_ms)
        header = UnregisterBrokerRequestHeader(
            broker_name=self.identity.broker_name,
            broker_addr=self.identity.broker_addr,
            cluster_name=self.identity.cluster_name,
            broker_id=self.identity.broker_id,
        )
        results = await asyncio.gather(
            *(
                self._send(address, unregister_broker_request(header))
                for address in self.namesrv_addresses
            )
        )
        return sum(results)

    async def _step(self) -> None:
        await self.register_once()

    async def _send(self, address: str, request: RemotingCommand) -> bool:
        what = RequestCode(request.code).name
        try:
            response = await self._pool.invoke(address, request, self._timeout_ms)
        except BolideError as error:
            _log.warning("%s to name server %s failed: %s", what, address, error)
            return False
        if response.code != ResponseCode.SUCCESS:
            _log.warning(
                "%s to name server %s answered %d: %s",
                what,
                address,
                response.code,
                response.remark,
            )
            return False
        if self._on_registered is not None and request.code == RequestCode.REGISTER_BROKER:
            try:
                answer = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields)
            except HeaderError as error:
                _log.warning("REGISTER_BROKER answer from %s unreadable: %s", address, error)
            else:
                self._on_registered(answer.master_addr, answer.ha_server_addr)
        return True

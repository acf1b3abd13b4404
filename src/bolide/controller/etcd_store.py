"""The controller's state in etcd v3 (through ``aetcd``) and its leadership.

Key layout under ``/bolide/controller/``:

====================  =========================================================  ===========
key                   value                                                      lease
====================  =========================================================  ===========
``leader``            the leading controller's address                           its lease
``members/<addr>``    ``<addr>`` (every running controller, for 1005's peers)    its lease
``sets/<brokerName>`` :class:`~bolide.controller.replicas.ReplicaSet` JSON       none
====================  =========================================================  ===========

Leadership is holding ``leader``: a campaign is one transaction ``create_revision(leader) ==
0 → put(leader, addr, lease)``; the lease is refreshed every
:data:`~bolide.base.limits.CONTROLLER_LEASE_REFRESH_MS`, well inside its TTL. The key's
``create_revision`` is the fencing token: **every** state write is one transaction comparing
it (the key is still the one we created) and the written set's ``mod_revision`` (what we read
is still current). A deposed controller's write therefore fails in etcd itself, whatever it
believes. Several endpoints (``H:P,H:P``) are tried in turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aetcd
import aetcd.exceptions

from bolide.base import limits
from bolide.base.errors import BolideError, ConfigError
from bolide.controller.replicas import ReplicaSet

__all__ = [
    "ControllerStore",
    "EtcdUnreachableError",
    "NotLeaderError",
    "parse_etcd_endpoints",
]

_log = logging.getLogger("bolide.controller.etcd")

PREFIX = b"/bolide/controller/"
LEADER_KEY = PREFIX + b"leader"
MEMBERS_PREFIX = PREFIX + b"members/"
SETS_PREFIX = PREFIX + b"sets/"

T = TypeVar("T")

_ETCD_ERRORS: tuple[type[BaseException], ...] = (
    aetcd.exceptions.ClientError,
    OSError,
    asyncio.TimeoutError,
)


class EtcdUnreachableError(ConfigError):
    """No etcd endpoint answered; the message names them all."""


class NotLeaderError(BolideError):
    """This controller does not hold the leader key (any more): it may write nothing."""


def parse_etcd_endpoints(text: str) -> list[tuple[str, int]]:
    """``"H:P[,H:P…]"`` → [(host, port)]; raises :class:`ConfigError` naming a bad item."""
    endpoints: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"etcd endpoint {item!r} is not host:port (in {text!r})")
        endpoints.append((host, int(port)))
    return endpoints


class ControllerStore:
    """One controller's view of etcd: state reads, fenced writes, leadership.

    ``identity`` is the controller's own address (the leader key's value). Call
    :meth:`connect` first (raises :class:`EtcdUnreachableError`), :meth:`close` when done.
    """

    def __init__(self, endpoints: list[tuple[str, int]], identity: str) -> None:
        self._endpoints = endpoints
        self._clients = [
            aetcd.Client(host, port, timeout=limits.CONTROLLER_ETCD_TIMEOUT_S)
            for host, port in endpoints
        ]
        self._current = 0
        self.identity = identity
        self._lease_id: int | None = None
        self._leader_revision: int | None = None
        self._write_lock = asyncio.Lock()

    @property
    def endpoints_text(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self._endpoints)

    @property
    def is_leader(self) -> bool:
        """Whether this controller believes it holds the leader key."""
        return self._leader_revision is not None

    async def connect(self) -> None:
        """Reach one endpoint and grant this controller's lease; registers it as a member."""
        try:
            await self._call(lambda client: client.status())
            lease = await self._call(lambda client: client.lease(limits.CONTROLLER_LEASE_TTL_S))
        except EtcdUnreachableError as error:
            raise EtcdUnreachableError(f"etcd unreachable at {error}") from error
        self._lease_id = lease.id
        await self._put_member()

    async def close(self) -> None:
        """Give up leadership (revoke the lease) and close the clients."""
        lease_id, self._lease_id = self._lease_id, None
        self._leader_revision = None
        if lease_id is not None:
            try:
                await self._call(lambda client: client.revoke_lease(lease_id))
            except EtcdUnreachableError as error:
                _log.warning("controller %s: lease not revoked: %s", self.identity, error)
        for client in self._clients:
            await client.close()

    async def _put_member(self) -> None:
        key = MEMBERS_PREFIX + self.identity.encode()
        await self._call(lambda c: c.put(key, self.identity.encode(), lease=self._lease_id))

    async def _call(self, operation: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``operation(client)`` on the current endpoint, then each other once. Raises
        :class:`EtcdUnreachableError` (a BolideError: the loops retry) when none answered,
        e.g. while etcd elects a new Raft leader."""
        last_error: BaseException | None = None
        for step in range(len(self._clients)):
            index = (self._current + step) % len(self._clients)
            try:
                result = await operation(self._clients[index])
            except _ETCD_ERRORS as error:
                last_error = error
                continue
            self._current = index
            return result
        if last_error is None:
            raise EtcdUnreachableError("no etcd endpoint configured")
        detail = str(last_error) or type(last_error).__name__
        raise EtcdUnreachableError(f"{self.endpoints_text}: {detail}") from last_error

    # --- leadership --------------------------------------------------------------------------

    async def keep_alive(self) -> bool:
        """Refresh the lease once; a lost lease (expired) drops leadership and grants a new
        one. Returns whether the lease is alive; raises on etcd errors (the caller counts)."""
        if self._lease_id is None:
            return False
        lease_id = self._lease_id
        reply = await self._call(lambda client: client.refresh_lease(lease_id))
        if reply is not None and reply.TTL > 0:
            return True
        _log.warning("controller %s: etcd lease expired; not leader", self.identity)
        self._leader_revision = None
        lease = await self._call(lambda client: client.lease(limits.CONTROLLER_LEASE_TTL_S))
        self._lease_id = lease.id
        await self._put_member()
        return False

    def drop_leadership(self, reason: str) -> None:
        """Stop acting as leader (the lease could not be renewed in time)."""
        if self._leader_revision is not None:
            _log.warning("controller %s: leadership dropped: %s", self.identity, reason)
        self._leader_revision = None

    async def campaign(self) -> bool:
        """Try once to take the leader key; returns whether this controller leads now."""
        if self._lease_id is None:
            return False
        lease_id = self._lease_id

        async def attempt(client: Any) -> tuple[bool, list[Any]]:
            result: tuple[bool, list[Any]] = await client.transaction(
                compare=[client.transactions.create(LEADER_KEY) == 0],
                success=[
                    client.transactions.put(LEADER_KEY, self.identity.encode(), lease=lease_id)
                ],
                failure=[client.transactions.get(LEADER_KEY)],
            )
            return result

        won, responses = await self._call(attempt)
        if won:
            self._leader_revision = responses[0].response_put.header.revision
            _log.info("controller %s leads (revision %s)", self.identity, self._leader_revision)
            return True
        current = responses[0][0][1] if responses and responses[0] else None
        if current is not None and current.lease == lease_id:
            self._leader_revision = current.create_revision  # ours already (a lost reply)
            return True
        self._leader_revision = None
        return False

    async def leader_address(self) -> str | None:
        """The address in the leader key (None: nobody leads)."""
        got = await self._call(lambda client: client.get(LEADER_KEY))
        return None if got is None else bytes(got.value).decode()

    async def member_addresses(self) -> list[str]:
        """Every running controller's address, sorted."""
        items = await self._call(lambda client: client.get_prefix(MEMBERS_PREFIX))
        return sorted(bytes(item.value).decode() for item in items)

    # --- state -------------------------------------------------------------------------------

    async def read_set(self, broker_name: str) -> tuple[ReplicaSet | None, int]:
        """The set stored for ``broker_name`` and its ``mod_revision`` (0: none)."""
        got = await self._call(lambda client: client.get(SETS_PREFIX + broker_name.encode()))
        if got is None:
            return None, 0
        return ReplicaSet.from_json(bytes(got.value)), got.mod_revision

    async def read_all_sets(self) -> dict[str, ReplicaSet]:
        """Every stored set by broker name."""
        items = await self._call(lambda client: client.get_prefix(SETS_PREFIX))
        sets = [ReplicaSet.from_json(bytes(item.value)) for item in items]
        return {replica_set.broker_name: replica_set for replica_set in sets}

    def writing(self) -> asyncio.Lock:
        """The lock a read-modify-write holds, so this controller's writes never race."""
        return self._write_lock

    async def write_set(
        self, broker_name: str, replica_set: ReplicaSet | None, read_revision: int
    ) -> None:
        """Write (or delete, for None) the set read at ``read_revision``, in one transaction
        guarded by the leader key; raises :class:`NotLeaderError` when the guard fails."""
        revision = self._leader_revision
        if revision is None:
            raise NotLeaderError(f"controller {self.identity} is not the leader")
        key = SETS_PREFIX + broker_name.encode()

        async def attempt(client: Any) -> bool:
            change = (
                client.transactions.delete(key)
                if replica_set is None
                else client.transactions.put(key, replica_set.to_json())
            )
            succeeded, _ = await client.transaction(
                compare=[
                    client.transactions.create(LEADER_KEY) == revision,
                    client.transactions.mod(key) == read_revision,
                ],
                success=[change],
                failure=[],
            )
            return bool(succeeded)

        if not await self._call(attempt):
            await self._check_still_leader(revision)
            raise StaleReadError(f"broker set {broker_name} changed since it was read")

    async def _check_still_leader(self, revision: int) -> None:
        got = await self._call(lambda client: client.get(LEADER_KEY))
        if got is None or got.create_revision != revision:
            self.drop_leadership("the leader key is no longer ours")
            raise NotLeaderError(f"controller {self.identity} was deposed")


class StaleReadError(BolideError):
    """A fenced write lost its compare on the set's revision while we still lead: re-read."""

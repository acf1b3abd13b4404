"""ACL administration over the wire (RocketMQ 4.x codes 50-54), on brokers of a cluster.

Functions over a started admin session (an :class:`~bolide.client.admin.AdminClient`: its
connections, timeout and credentials; the broker asks for an admin account). They sit beside
:mod:`.operations` in the package's layers. Changes go to every master of the
cluster (or the brokers named), as ``mqadmin updateAclConfig -c`` does; each broker writes its
own accounts file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bolide.client.admin.session import AdminSession
from bolide.client.rpc.acl import (
    BrokerAclConfig,
    delete_acl_config,
    get_acl_config,
    get_acl_info,
    update_acl_config,
    update_global_white_addrs,
)
from bolide.protocol.headers.acl import AccessConfigRequestHeader, AclInfoResponseHeader

__all__ = [
    "AclAccountUpdate",
    "BrokerAclConfig",
    "acl_config",
    "acl_info",
    "delete_acl_account",
    "update_acl_account",
    "update_global_white_addresses",
]


@dataclass(frozen=True, slots=True)
class AclAccountUpdate:
    """An account to create or change; fields left None keep their value on each broker."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: Sequence[str] | None = None
    """``name=PERM`` entries (PERM: PUB, SUB, PUB|SUB, DENY)."""
    group_perms: Sequence[str] | None = None

    def header(self) -> AccessConfigRequestHeader:
        return AccessConfigRequestHeader(
            access_key=self.access_key,
            secret_key=self.secret_key,
            white_remote_address=self.white_remote_address,
            admin=self.admin,
            default_topic_perm=self.default_topic_perm,
            default_group_perm=self.default_group_perm,
            topic_perms=None if self.topic_perms is None else ",".join(self.topic_perms),
            group_perms=None if self.group_perms is None else ",".join(self.group_perms),
        )


async def update_acl_account(
    admin: AdminSession,
    update: AclAccountUpdate,
    *,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """UPDATE_AND_CREATE_ACL_CONFIG on each target broker; returns the broker names. Raises
    RemoteError (the first refusal) or transport errors."""
    targets = await admin.targets(cluster, brokers)
    for name in sorted(targets):
        await update_acl_config(admin.pool, targets[name], update.header(), admin.timeout_ms)
    return sorted(targets)


async def delete_acl_account(
    admin: AdminSession, access_key: str, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> list[str]:
    """DELETE_ACL_CONFIG on each target broker; returns the broker names."""
    targets = await admin.targets(cluster, brokers)
    for name in sorted(targets):
        await delete_acl_config(admin.pool, targets[name], access_key, admin.timeout_ms)
    return sorted(targets)


async def update_global_white_addresses(
    admin: AdminSession,
    patterns: Sequence[str],
    *,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (the whole list) on each target broker."""
    targets = await admin.targets(cluster, brokers)
    for name in sorted(targets):
        address = targets[name]
        await update_global_white_addrs(admin.pool, address, list(patterns), admin.timeout_ms)
    return sorted(targets)


async def acl_info(
    admin: AdminSession, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> dict[str, AclInfoResponseHeader]:
    """GET_BROKER_CLUSTER_ACL_INFO of each target broker: broker name -> data version."""
    found: dict[str, AclInfoResponseHeader] = {}
    for name, address in sorted((await admin.targets(cluster, brokers)).items()):
        found[name] = await get_acl_info(admin.pool, address, admin.timeout_ms)
    return found


async def acl_config(
    admin: AdminSession, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> dict[str, BrokerAclConfig]:
    """GET_BROKER_CLUSTER_ACL_CONFIG of each target broker. Raises ProtocolError for a body
    that is not the expected JSON."""
    found: dict[str, BrokerAclConfig] = {}
    for name, address in sorted((await admin.targets(cluster, brokers)).items()):
        found[name] = await get_acl_config(admin.pool, address, admin.timeout_ms)
    return found

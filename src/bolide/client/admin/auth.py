"""ACL 2.0 administration over the wire (RocketMQ 5.3 codes 3001-3010), on brokers of a cluster.

Functions over a started admin session (an :class:`~bolide.client.admin.AdminClient`, signed
by a Super user or one allowed ``Cluster`` Update / Get). Changes go to every master of the
cluster (or the brokers named), as ``mqadmin createUser -c`` does; reads ask one broker (the
first of the targets, by name). Bodies are Java's ``UserInfo`` and ``AclInfo`` objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bolide.base.errors import ProtocolError
from bolide.client.admin.session import AdminSession
from bolide.client.rpc.acl import auth_read, auth_write
from bolide.protocol.codes import RequestCode

__all__ = [
    "acl_entry",
    "create_acl",
    "create_user",
    "delete_acl",
    "delete_user",
    "get_acl",
    "get_user",
    "list_acls",
    "list_users",
    "put_acl_info",
    "update_acl",
    "update_user",
]

R = RequestCode


def acl_entry(
    resource: str,
    actions: Iterable[str],
    *,
    source_ips: Iterable[str] = (),
    decision: str = "Allow",
) -> dict[str, Any]:
    """One policy entry: ``acl_entry("Topic:orders*", ["Pub"])``."""
    return {
        "resource": resource,
        "actions": list(actions),
        "sourceIps": list(source_ips),
        "decision": decision,
    }


async def _write(
    admin: AdminSession,
    code: RequestCode,
    fields: dict[str, str],
    body: object,
    cluster: str | None,
    brokers: Iterable[str],
) -> list[str]:
    targets = await admin.targets(cluster, brokers)
    for name in sorted(targets):
        await auth_write(admin.pool, targets[name], code, fields, body, admin.timeout_ms)
    return sorted(targets)


async def _read(
    admin: AdminSession,
    code: RequestCode,
    fields: dict[str, str],
    cluster: str | None,
    brokers: Iterable[str],
) -> Any:
    targets = await admin.targets(cluster, brokers)
    if not targets:
        raise ProtocolError("no broker to ask")
    address = targets[sorted(targets)[0]]
    return await auth_read(admin.pool, address, code, fields, admin.timeout_ms)


async def create_user(
    admin: AdminSession,
    username: str,
    password: str,
    *,
    user_type: str = "Normal",
    status: str = "enable",
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_CREATE_USER on each target broker; the broker names."""
    body = {"username": username, "password": password, "userType": user_type,
            "userStatus": status}  # fmt: skip
    return await _write(admin, R.AUTH_CREATE_USER, {"username": username}, body, cluster, brokers)


async def update_user(
    admin: AdminSession,
    username: str,
    *,
    password: str | None = None,
    user_type: str | None = None,
    status: str | None = None,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_UPDATE_USER: the fields given replace the user's."""
    body: dict[str, str] = {"username": username}
    for key, value in (("password", password), ("userType", user_type), ("userStatus", status)):
        if value is not None:
            body[key] = value
    return await _write(admin, R.AUTH_UPDATE_USER, {"username": username}, body, cluster, brokers)


async def delete_user(
    admin: AdminSession, username: str, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> list[str]:
    """AUTH_DELETE_USER (and the user's ACL)."""
    return await _write(admin, R.AUTH_DELETE_USER, {"username": username}, None, cluster, brokers)


async def get_user(
    admin: AdminSession, username: str, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> dict[str, Any]:
    """AUTH_GET_USER: the UserInfo (no password)."""
    found: dict[str, Any] = await _read(
        admin, R.AUTH_GET_USER, {"username": username}, cluster, brokers
    )
    return found


async def list_users(
    admin: AdminSession, name_filter: str = "", *, cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[dict[str, Any]]:  # fmt: skip
    """AUTH_LIST_USER: the users whose name contains ``name_filter``."""
    found: list[dict[str, Any]] = await _read(
        admin, R.AUTH_LIST_USER, {"filter": name_filter}, cluster, brokers
    )
    return found


async def create_acl(
    admin: AdminSession,
    username: str,
    entries: list[dict[str, Any]],
    *,
    policy_type: str = "Custom",
    update: bool = False,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_CREATE_ACL (or, with ``update``, AUTH_UPDATE_ACL: entries merged by resource)
    for ``User:<username>`` with ``entries`` (:func:`acl_entry`) in ``policy_type``."""
    subject = f"User:{username}"
    body = {"subject": subject, "policies": [{"policyType": policy_type, "entries": entries}]}
    code = R.AUTH_UPDATE_ACL if update else R.AUTH_CREATE_ACL
    return await _write(admin, code, {"subject": subject}, body, cluster, brokers)


async def put_acl_info(
    admin: AdminSession,
    acl_info: dict[str, Any],
    *,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_CREATE_ACL of a whole ``AclInfo`` object (``{"subject": "User:x", "policies":
    [...]}``, every policy type at once) on each target broker; the broker names."""
    subject = str(acl_info.get("subject", ""))
    return await _write(admin, R.AUTH_CREATE_ACL, {"subject": subject}, acl_info, cluster, brokers)


async def update_acl(
    admin: AdminSession,
    username: str,
    entries: list[dict[str, Any]],
    *,
    policy_type: str = "Custom",
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_UPDATE_ACL; see :func:`create_acl`."""
    return await create_acl(
        admin, username, entries, policy_type=policy_type, update=True, cluster=cluster,
        brokers=brokers,
    )  # fmt: skip


async def delete_acl(
    admin: AdminSession,
    username: str,
    *,
    policy_type: str | None = None,
    resource: str | None = None,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[str]:
    """AUTH_DELETE_ACL: the whole ACL, or the entries of ``resource`` / ``policy_type``."""
    fields = {"subject": f"User:{username}"}
    if policy_type is not None:
        fields["policyType"] = policy_type
    if resource is not None:
        fields["resource"] = resource
    return await _write(admin, R.AUTH_DELETE_ACL, fields, None, cluster, brokers)


async def get_acl(
    admin: AdminSession, username: str, *, cluster: str | None = None, brokers: Iterable[str] = ()
) -> dict[str, Any]:
    """AUTH_GET_ACL: the AclInfo of ``User:<username>``."""
    found: dict[str, Any] = await _read(
        admin, R.AUTH_GET_ACL, {"subject": f"User:{username}"}, cluster, brokers
    )
    return found


async def list_acls(
    admin: AdminSession,
    subject_filter: str = "",
    resource_filter: str = "",
    *,
    cluster: str | None = None,
    brokers: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """AUTH_LIST_ACL: the ACLs whose subject contains ``subject_filter`` and that have an
    entry whose resource contains ``resource_filter``."""
    fields = {"subjectFilter": subject_filter, "resourceFilter": resource_filter}
    found: list[dict[str, Any]] = await _read(admin, R.AUTH_LIST_ACL, fields, cluster, brokers)
    return found

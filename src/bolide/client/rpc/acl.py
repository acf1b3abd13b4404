"""The ACL requests of RocketMQ 4.x (codes 50-54) and 5.3's ACL 2.0 (codes 3001-3010), one
coroutine per request, each to one broker. Each raises
:class:`~bolide.base.errors.RemoteError` for a refusal (through :func:`bolide.client.rpc.call`),
:class:`~bolide.base.errors.ProtocolError` for a body it cannot parse, and the transport's
errors. :mod:`bolide.client.admin.acl` and :mod:`bolide.client.admin.auth` choose the brokers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from bolide.base.errors import ProtocolError
from bolide.client.rpc.call import call
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.acl import (
    AccessConfigRequestHeader,
    AclInfoResponseHeader,
    DeleteAccessConfigRequestHeader,
    UpdateGlobalWhiteAddrsRequestHeader,
)
from bolide.remoting import ClientPool

__all__ = [
    "AUTH_READ_CODES",
    "AUTH_WRITE_CODES",
    "BrokerAclConfig",
    "auth_read",
    "auth_write",
    "delete_acl_config",
    "get_acl_config",
    "get_acl_info",
    "update_acl_config",
    "update_global_white_addrs",
]

AUTH_WRITE_CODES = frozenset(
    {
        RequestCode.AUTH_CREATE_USER,
        RequestCode.AUTH_UPDATE_USER,
        RequestCode.AUTH_DELETE_USER,
        RequestCode.AUTH_CREATE_ACL,
        RequestCode.AUTH_UPDATE_ACL,
        RequestCode.AUTH_DELETE_ACL,
    }
)
"""The ACL 2.0 requests that change a broker's users or policies (:func:`auth_write`)."""
AUTH_READ_CODES = frozenset(
    {
        RequestCode.AUTH_GET_USER,
        RequestCode.AUTH_LIST_USER,
        RequestCode.AUTH_GET_ACL,
        RequestCode.AUTH_LIST_ACL,
    }
)
"""The ACL 2.0 requests that read them (:func:`auth_read`)."""


@dataclass(frozen=True, slots=True)
class BrokerAclConfig:
    """What GET_BROKER_CLUSTER_ACL_CONFIG (54) returns: the white list and the accounts (the
    plain_acl.yml entries, secret keys included)."""

    global_white_addresses: list[str]
    accounts: list[dict[str, Any]]


async def update_acl_config(
    pool: ClientPool, address: str, header: AccessConfigRequestHeader, timeout_ms: int
) -> None:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): create or change one account on one broker."""
    code = RequestCode.UPDATE_AND_CREATE_ACL_CONFIG
    await call(pool, address, RemotingCommand.request(code, header.to_ext_fields()), timeout_ms)


async def delete_acl_config(
    pool: ClientPool, address: str, access_key: str, timeout_ms: int
) -> None:
    """DELETE_ACL_CONFIG (51): drop the account ``access_key`` on one broker."""
    fields = DeleteAccessConfigRequestHeader(access_key).to_ext_fields()
    request = RemotingCommand.request(RequestCode.DELETE_ACL_CONFIG, fields)
    await call(pool, address, request, timeout_ms)


async def update_global_white_addrs(
    pool: ClientPool, address: str, patterns: list[str], timeout_ms: int
) -> None:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace one broker's whole white list."""
    fields = UpdateGlobalWhiteAddrsRequestHeader(",".join(patterns)).to_ext_fields()
    request = RemotingCommand.request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields)
    await call(pool, address, request, timeout_ms)


async def get_acl_info(pool: ClientPool, address: str, timeout_ms: int) -> AclInfoResponseHeader:
    """GET_BROKER_CLUSTER_ACL_INFO (52): one broker's ACL data version."""
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
    response = await call(pool, address, request, timeout_ms)
    return AclInfoResponseHeader.from_ext_fields(response.ext_fields)


async def get_acl_config(pool: ClientPool, address: str, timeout_ms: int) -> BrokerAclConfig:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54): one broker's white list and accounts. Raises
    ProtocolError for a body that is not the expected JSON."""
    request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
    response = await call(pool, address, request, timeout_ms)
    try:
        body = orjson.loads(response.body)
        white = [str(item) for item in body.get("globalWhiteAddrs") or []]
        accounts = [dict(item) for item in body.get("plainAccessConfigs") or []]
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as error:
        raise ProtocolError(f"{address}: bad ACL config body: {error}") from error
    return BrokerAclConfig(white, accounts)


async def auth_write(
    pool: ClientPool,
    address: str,
    code: RequestCode,
    fields: dict[str, str],
    body: object,
    timeout_ms: int,
) -> None:
    """One ACL 2.0 change (a code of :data:`AUTH_WRITE_CODES`) on one broker; ``body`` (a
    UserInfo or AclInfo object, or None for none) is sent as JSON. Raises ValueError for a
    code that is not such a change."""
    if code not in AUTH_WRITE_CODES:
        raise ValueError(f"{code!r} is not an ACL 2.0 change")
    data = b"" if body is None else orjson.dumps(body)
    await call(pool, address, RemotingCommand.request(code, dict(fields), data), timeout_ms)


async def auth_read(
    pool: ClientPool, address: str, code: RequestCode, fields: dict[str, str], timeout_ms: int
) -> Any:
    """One ACL 2.0 read (a code of :data:`AUTH_READ_CODES`) on one broker: its JSON body,
    decoded. Raises ValueError for a code that is not such a read, ProtocolError for a body
    that is not JSON."""
    if code not in AUTH_READ_CODES:
        raise ValueError(f"{code!r} is not an ACL 2.0 read")
    response = await call(pool, address, RemotingCommand.request(code, dict(fields)), timeout_ms)
    try:
        return orjson.loads(response.body)
    except orjson.JSONDecodeError as error:
        raise ProtocolError(f"{address}: bad body of request code {code}: {error}") from error

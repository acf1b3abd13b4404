"""The ACL admin requests (RocketMQ 4.x codes 50-54), on the broker's accounts file.

Only admin accounts get here when the ACL is on (bolide.acl.permissions.ADMIN_REQUEST_CODES);
with ``aclEnable=false`` each answers its FAILED code (or SYSTEM_ERROR) saying so.

* UPDATE_AND_CREATE_ACL_CONFIG (50) -> SUCCESS, or UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209)
  with the reason (a bad permission, a short key, an unknown address pattern...).
* DELETE_ACL_CONFIG (51) -> SUCCESS, or DELETE_ACL_CONFIG_FAILED (210): no such account.
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) -> SUCCESS or UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED;
  ``aclFileFullPath`` chooses one of the accounts files (empty: the main one).
* GET_BROKER_CLUSTER_ACL_INFO (52) -> the main file's data version, every file's
  (``allAclFileVersion``), and the broker's identity (header).
* GET_BROKER_CLUSTER_ACL_CONFIG (54) -> every account (secret keys included, as RocketMQ: an
  admin request) and the global white list, as JSON.

Every change is written to the file atomically and in force before the answer is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson

from bolide.acl import AclConfigError, AclFile
from bolide.acl.rules import account_to_document
from bolide.broker.config import BrokerConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.acl import (
    AccessConfigRequestHeader,
    AclInfoResponseHeader,
    DeleteAccessConfigRequestHeader,
    UpdateGlobalWhiteAddrsRequestHeader,
)
from bolide.protocol.headers.fields import HeaderError
from bolide.remoting import Connection, Dispatcher, Handler

__all__ = ["AclAdminHandlers"]

_log = logging.getLogger("bolide.broker.acl")

_T = TypeVar("_T")

_AclHandler = Callable[[AclFile, RemotingCommand], Coroutine[Any, Any, RemotingCommand]]
"""``handler(acl_file, request) -> response``: one admin request on the accounts file."""

_DISABLED = "ACL is not enabled on this broker (broker.conf aclEnable=false)"


class AclAdminHandlers:
    """Codes 50-54 over ``acl_file`` (None when the ACL is off)."""

    def __init__(self, config: BrokerConfig, acl_file: AclFile | None) -> None:
        self._config = config
        self._file = acl_file
        self._lock = asyncio.Lock()

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 50-54 in the ``admin`` family, each refused while the ACL is off."""
        routes: tuple[tuple[int, int, _AclHandler], ...] = (
            (
                RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                self.update_account,
            ),
            (
                RequestCode.DELETE_ACL_CONFIG,
                ResponseCode.DELETE_ACL_CONFIG_FAILED,
                self.delete_account,
            ),
            (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, ResponseCode.SYSTEM_ERROR, self.acl_info),
            (
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                self.update_white_addresses,
            ),
            (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, ResponseCode.SYSTEM_ERROR, self.acl_config),
        )
        for code, failed, handler in routes:
            dispatcher.register(code, self._when_enabled(failed, handler), family="admin")

    def _when_enabled(self, failed: int, handler: _AclHandler) -> Handler:
        """``handler`` on the accounts file; while the ACL is off, ``failed`` saying so."""

        async def handle(connection: Connection, request: RemotingCommand) -> RemotingCommand:
            del connection
            if self._file is None:
                return request.make_response(failed, _DISABLED)
            return await handler(self._file, request)

        return handle

    async def _change(self, change: Callable[..., _T], *arguments: Any) -> _T:
        """``change(*arguments)`` on a worker thread, one change of the file at a time."""
        async with self._lock:
            return await asyncio.to_thread(change, *arguments)

    async def update_account(self, acl_file: AclFile, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        try:
            header = AccessConfigRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(failed, str(error))
        entry = {
            "accessKey": header.access_key,
            "secretKey": header.secret_key,
            "whiteRemoteAddress": header.white_remote_address,
            "admin": header.admin,
            "defaultTopicPerm": header.default_topic_perm,
            "defaultGroupPerm": header.default_group_perm,
            "topicPerms": _split(header.topic_perms),
            "groupPerms": _split(header.group_perms),
        }
        try:
            await self._change(acl_file.update_account, entry)
        except (AclConfigError, OSError) as error:
            return request.make_response(failed, f"accessKey {header.access_key}: {error}")
        _log.info("ACL account %s created or updated by %s", header.access_key, _who(request))
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_account(self, acl_file: AclFile, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        try:
            header = DeleteAccessConfigRequestHeader.from_ext_fields(request.ext_fields)
            deleted = await self._change(acl_file.delete_account, header.access_key)
        except (HeaderError, AclConfigError, OSError) as error:
            return request.make_response(failed, str(error))
        if not deleted:
            return request.make_response(
                failed, f"The accesskey[{header.access_key}] has no account to delete"
            )
        _log.info("ACL account %s deleted by %s", header.access_key, _who(request))
        return request.make_response(ResponseCode.SUCCESS)

    async def update_white_addresses(
        self, acl_file: AclFile, request: RemotingCommand
    ) -> RemotingCommand:
        header = UpdateGlobalWhiteAddrsRequestHeader.from_ext_fields(request.ext_fields)
        try:
            patterns = await self._change(
                acl_file.update_global_white_addresses,
                _split(header.global_white_addrs) or [],
                header.acl_file_full_path,
            )
        except (AclConfigError, OSError) as error:
            return request.make_response(
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(error)
            )
        _log.info("ACL global white list set to %s by %s", patterns, _who(request))
        return request.make_response(ResponseCode.SUCCESS)

    async def acl_info(self, acl_file: AclFile, request: RemotingCommand) -> RemotingCommand:
        rules = acl_file.validator.rules
        version = orjson.dumps(
            {"counter": rules.data_version_counter, "timestamp": rules.data_version_timestamp_ms}
        ).decode()
        config = self._config
        header = AclInfoResponseHeader(
            version=version,
            broker_name=config.broker_name,
            broker_addr=config.broker_address,
            cluster_name=config.broker_cluster_name,
            all_acl_file_version=orjson.dumps(
                {
                    path: {"counter": counter, "timestamp": timestamp_ms}
                    for path, (counter, timestamp_ms) in rules.file_versions.items()
                }
            ).decode(),
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields())

    async def acl_config(self, acl_file: AclFile, request: RemotingCommand) -> RemotingCommand:
        rules = acl_file.validator.rules
        body = {
            "globalWhiteAddrs": [pattern.text for pattern in rules.global_white_addresses],
            "plainAccessConfigs": [
                account_to_document(account) for account in rules.accounts.values()
            ],
        }
        return request.make_response(ResponseCode.SUCCESS, body=orjson.dumps(body))


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _who(request: RemotingCommand) -> str:
    return f"accessKey={request.ext_fields.get('AccessKey', '(none)')}"

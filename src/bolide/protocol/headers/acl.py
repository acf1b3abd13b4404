"""ACL admin headers (RocketMQ 4.x, codes 50-54):

* UPDATE_AND_CREATE_ACL_CONFIG (50): :class:`AccessConfigRequestHeader`; ``topicPerms`` and
  ``groupPerms`` are comma-separated ``name=PERM`` lists.
* DELETE_ACL_CONFIG (51): ``accessKey``.
* GET_BROKER_CLUSTER_ACL_INFO (52): no header; the response header says ``version`` (the
  file's data version as JSON), ``allAclFileVersion``, ``brokerName``, ``brokerAddr``,
  ``clusterName``.
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``globalWhiteAddrs`` (comma-separated patterns) and
  ``aclFileFullPath`` (which accounts file; empty: the main one).
* GET_BROKER_CLUSTER_ACL_CONFIG (54): no header; the body is
  ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from bolide.protocol.headers.fields import (
    format_bool,
    optional_str,
    parse_bool,
    put_optional,
    required_str,
)

__all__ = [
    "AccessConfigRequestHeader",
    "AclInfoResponseHeader",
    "DeleteAccessConfigRequestHeader",
    "UpdateGlobalWhiteAddrsRequestHeader",
]


@dataclass(frozen=True, slots=True)
class AccessConfigRequestHeader:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): create or change one account. Fields left None are
    not sent (an existing account keeps them)."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        """Decode; raises :class:`HeaderError` without ``accessKey``."""
        return cls(
            required_str(fields, "accessKey"),
            optional_str(fields, "secretKey"),
            optional_str(fields, "whiteRemoteAddress"),
            parse_bool(fields, "admin"),
            optional_str(fields, "defaultTopicPerm"),
            optional_str(fields, "defaultGroupPerm"),
            optional_str(fields, "topicPerms"),
            optional_str(fields, "groupPerms"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        fields = {"accessKey": self.access_key, "admin": format_bool(self.admin)}
        put_optional(fields, "secretKey", self.secret_key)
        put_optional(fields, "whiteRemoteAddress", self.white_remote_address)
        put_optional(fields, "defaultTopicPerm", self.default_topic_perm)
        put_optional(fields, "defaultGroupPerm", self.default_group_perm)
        put_optional(fields, "topicPerms", self.topic_perms)
        put_optional(fields, "groupPerms", self.group_perms)
        return fields


@dataclass(frozen=True, slots=True)
class DeleteAccessConfigRequestHeader:
    """DELETE_ACL_CONFIG (51)."""

    access_key: str

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        return cls(required_str(fields, "accessKey"))

    def to_ext_fields(self) -> dict[str, str]:
        return {"accessKey": self.access_key}


@dataclass(frozen=True, slots=True)
class UpdateGlobalWhiteAddrsRequestHeader:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53); ``global_white_addrs`` comma-separated."""

    global_white_addrs: str
    acl_file_full_path: str = ""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        return cls(fields.get("globalWhiteAddrs", ""), fields.get("aclFileFullPath", ""))

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "globalWhiteAddrs": self.global_white_addrs,
            "aclFileFullPath": self.acl_file_full_path,
        }


@dataclass(frozen=True, slots=True)
class AclInfoResponseHeader:
    """The GET_BROKER_CLUSTER_ACL_INFO (52) response header."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str = ""

    @classmethod
    def from_ext_fields(cls, fields: Mapping[str, str]) -> Self:
        return cls(
            required_str(fields, "version"),
            required_str(fields, "brokerName"),
            required_str(fields, "brokerAddr"),
            required_str(fields, "clusterName"),
            fields.get("allAclFileVersion", ""),
        )

    def to_ext_fields(self) -> dict[str, str]:
        return {
            "version": self.version,
            "brokerName": self.broker_name,
            "brokerAddr": self.broker_addr,
            "clusterName": self.cluster_name,
            "allAclFileVersion": self.all_acl_file_version,
        }

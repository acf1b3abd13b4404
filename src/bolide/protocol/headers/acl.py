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

from bolide.protocol.headers.fields import WireHeader, wire, wire_header

__all__ = [
    "AccessConfigRequestHeader",
    "AclInfoResponseHeader",
    "DeleteAccessConfigRequestHeader",
    "UpdateGlobalWhiteAddrsRequestHeader",
]


@wire_header
class AccessConfigRequestHeader(WireHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG (50): create or change one account. Fields left None are
    not sent (an existing account keeps them); only ``accessKey`` is required."""

    access_key: str = wire("accessKey")
    secret_key: str | None = wire("secretKey", default=None)
    white_remote_address: str | None = wire("whiteRemoteAddress", default=None)
    admin: bool = wire("admin", default=False)
    default_topic_perm: str | None = wire("defaultTopicPerm", default=None)
    default_group_perm: str | None = wire("defaultGroupPerm", default=None)
    topic_perms: str | None = wire("topicPerms", default=None)
    group_perms: str | None = wire("groupPerms", default=None)


@wire_header
class DeleteAccessConfigRequestHeader(WireHeader):
    """DELETE_ACL_CONFIG (51)."""

    access_key: str = wire("accessKey")


@wire_header
class UpdateGlobalWhiteAddrsRequestHeader(WireHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53); ``global_white_addrs`` comma-separated. Both
    fields read as ``""`` when missing."""

    global_white_addrs: str = wire("globalWhiteAddrs", default="")
    acl_file_full_path: str = wire("aclFileFullPath", default="")


@wire_header
class AclInfoResponseHeader(WireHeader):
    """The GET_BROKER_CLUSTER_ACL_INFO (52) response header."""

    version: str = wire("version")
    broker_name: str = wire("brokerName")
    broker_addr: str = wire("brokerAddr")
    cluster_name: str = wire("clusterName")
    all_acl_file_version: str = wire("allAclFileVersion", default="")

"""The accounts file: RocketMQ's ``plain_acl.yml``, parsed into immutable :class:`AclRules`.

The document (YAML; every key optional)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]   # these peers skip every check
    accounts:
      - accessKey: RocketMQ             # > 6 characters, unique
        secretKey: 12345678             # > 6 characters (a YAML number is read as its digits)
        whiteRemoteAddress: 192.168.0.* # these peers skip the signature check of the account
        admin: false                    # admin codes; with no topicPerms/groupPerms: all
        defaultTopicPerm: DENY          # topics not listed (missing: DENY)
        defaultGroupPerm: SUB           # groups not listed (missing: DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
    dataVersion: [{counter: 3, timestamp: 1700000000000}]    # written by the admin requests

Where RocketMQ quietly reads a bad entry as DENY or skips it, Bolide refuses the whole file
with an :class:`AclConfigError` naming the entry: a typo must never change who may do what
without anyone noticing. Unknown keys are refused for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml

from bolide.acl.addresses import AclConfigError, AddressPattern, compile_address_pattern
from bolide.acl.permissions import Perm, format_perm, parse_perm
from bolide.base import limits
from bolide.protocol.system_topics import group_of_retry_topic, is_retry_topic

__all__ = [
    "AclAccount",
    "AclRules",
    "account_to_document",
    "load_yaml_document",
    "merge_rules",
    "parse_account",
    "parse_rules",
    "resource_is_group",
]

_TOP_KEYS = frozenset({"globalWhiteRemoteAddresses", "accounts", "dataVersion"})
_ACCOUNT_KEYS = frozenset(
    {
        "accessKey",
        "secretKey",
        "whiteRemoteAddress",
        "admin",
        "defaultTopicPerm",
        "defaultGroupPerm",
        "topicPerms",
        "groupPerms",
    }
)


@dataclass(frozen=True, slots=True)
class AclAccount:
    """One account. ``resource_perms`` maps topics and ``%RETRY%<group>`` to permissions."""

    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressPattern
    admin: bool
    default_topic_perm: Perm
    default_group_perm: Perm
    topic_perms: Mapping[str, Perm]
    group_perms: Mapping[str, Perm]
    """Keyed by group name (the file's spelling)."""

    @property
    def lists_resources(self) -> bool:
        """Whether topicPerms or groupPerms name anything (an admin without lists may do all)."""
        return bool(self.topic_perms or self.group_perms)

    def owned_perm(self, resource: str, *, is_group: bool) -> Perm:
        """The permission on ``resource`` (a topic, or a group's retry topic)."""
        if is_group:
            group = group_of_retry_topic(resource) or resource
            return self.group_perms.get(group, self.default_group_perm)
        return self.topic_perms.get(resource, self.default_topic_perm)


@dataclass(frozen=True, slots=True)
class AclRules:
    """Everything one accounts file says; immutable, swapped whole on reload."""

    global_white_addresses: tuple[AddressPattern, ...] = ()
    accounts: Mapping[str, AclAccount] = field(default_factory=lambda: MappingProxyType({}))
    data_version_counter: int = 0
    data_version_timestamp_ms: int = 0
    """The data version of the main file (``aclFile``)."""
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Access key -> the file that defines it (filled by :func:`merge_rules`)."""
    file_versions: Mapping[str, tuple[int, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """File -> (counter, timestamp ms) of its dataVersion."""


def merge_rules(parts: Sequence[tuple[str, AclRules]]) -> AclRules:
    """One set of rules from several files (the main file first): white lists joined,
    accounts joined. An access key defined in two files is refused (RocketMQ keeps the first
    and logs a warning; which one applies should not depend on file order). Raises
    :class:`AclConfigError`."""
    white: list[AddressPattern] = []
    accounts: dict[str, AclAccount] = {}
    sources: dict[str, str] = {}
    versions: dict[str, tuple[int, int]] = {}
    for source, rules in parts:
        white += rules.global_white_addresses
        for key, account in rules.accounts.items():
            if key in accounts:
                raise AclConfigError(f"accessKey {key!r} is defined in {sources[key]} and {source}")
            accounts[key], sources[key] = account, source
        versions[source] = (rules.data_version_counter, rules.data_version_timestamp_ms)
    main = parts[0][1] if parts else AclRules()
    return AclRules(
        tuple(white),
        MappingProxyType(accounts),
        main.data_version_counter,
        main.data_version_timestamp_ms,
        MappingProxyType(sources),
        MappingProxyType(versions),
    )


def load_yaml_document(text: str, source: str) -> dict[str, Any]:
    """The YAML mapping in ``text`` (an empty file is an empty mapping).

    Raises :class:`AclConfigError` for a file over :data:`~limits.ACL_FILE_MAX_BYTES`, YAML
    that does not parse, or a document that is not a mapping.
    """
    if len(text) > limits.ACL_FILE_MAX_BYTES:
        raise AclConfigError(f"{source}: larger than {limits.ACL_FILE_MAX_BYTES} bytes")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AclConfigError(f"{source}: not valid YAML: {_yaml_problem(error)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise AclConfigError(f"{source}: expected a mapping at the top, got {_kind(document)}")
    return document


def _yaml_problem(error: yaml.YAMLError) -> str:
    """What is wrong and where, without PyYAML's snippet of the line (it may hold a secret)."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        return f"{error.problem or error.context or 'malformed'}{where}"
    return type(error).__name__


def parse_rules(document: Mapping[str, Any], source: str) -> AclRules:
    """Validate a parsed plain_acl.yml document. Raises :class:`AclConfigError`."""
    unknown = sorted(str(key) for key in document if key not in _TOP_KEYS)
    if unknown:
        raise AclConfigError(f"{source}: unknown keys {unknown} (known: {sorted(_TOP_KEYS)})")
    white = tuple(
        compile_address_pattern(text)
        for text in _string_list(document, "globalWhiteRemoteAddresses", source)
    )
    accounts: dict[str, AclAccount] = {}
    raw_accounts = document.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError(f"{source}: accounts must be a list, not {_kind(raw_accounts)}")
    for index, raw in enumerate(raw_accounts):
        where = f"{source}: accounts[{index}]"
        account = _parse_account(raw, where)
        if account.access_key in accounts:
            raise AclConfigError(f"{where}: accessKey {account.access_key!r} listed twice")
        accounts[account.access_key] = account
    counter, timestamp_ms = _data_version(document.get("dataVersion"), source)
    return AclRules(white, MappingProxyType(accounts), counter, timestamp_ms)


def account_to_document(account: AclAccount) -> dict[str, Any]:
    """The file's entry for ``account`` (what the admin requests write)."""
    entry: dict[str, Any] = {
        "accessKey": account.access_key,
        "secretKey": account.secret_key,
        "whiteRemoteAddress": account.white_remote_address.text or None,
        "admin": account.admin,
        "defaultTopicPerm": format_perm(account.default_topic_perm),
        "defaultGroupPerm": format_perm(account.default_group_perm),
        "topicPerms": [f"{name}={format_perm(p)}" for name, p in account.topic_perms.items()],
        "groupPerms": [f"{name}={format_perm(p)}" for name, p in account.group_perms.items()],
    }
    return entry


def parse_account(raw: object, where: str) -> AclAccount:
    """One account entry (a mapping); raises :class:`AclConfigError` naming ``where``."""
    return _parse_account(raw, where)


def _parse_account(raw: object, where: str) -> AclAccount:
    if not isinstance(raw, dict):
        raise AclConfigError(f"{where}: expected a mapping, got {_kind(raw)}")
    unknown = sorted(str(key) for key in raw if key not in _ACCOUNT_KEYS)
    if unknown:
        raise AclConfigError(f"{where}: unknown keys {unknown}")
    access_key = _key_text(raw.get("accessKey"), f"{where}: accessKey")
    where = f"{where} ({access_key})"
    secret_key = _key_text(raw.get("secretKey"), f"{where}: secretKey")
    white = raw.get("whiteRemoteAddress")
    if white is not None and not isinstance(white, str):
        raise AclConfigError(f"{where}: whiteRemoteAddress must be text, not {_kind(white)}")
    return AclAccount(
        access_key=access_key,
        secret_key=secret_key,
        white_remote_address=compile_address_pattern(white or ""),
        admin=_bool(raw.get("admin", False), f"{where}: admin"),
        default_topic_perm=_default_perm(raw.get("defaultTopicPerm"), f"{where}: defaultTopicPerm"),
        default_group_perm=_default_perm(raw.get("defaultGroupPerm"), f"{where}: defaultGroupPerm"),
        topic_perms=_resource_perms(raw, "topicPerms", where),
        group_perms=_resource_perms(raw, "groupPerms", where),
    )


def _key_text(value: object, where: str) -> str:
    # YAML reads `secretKey: 12345678` as a number; RocketMQ takes its digits, so do we.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise AclConfigError(f"{where}: missing (expected text of at least 7 characters)")
    if len(value) < limits.ACL_KEY_MIN_CHARS:
        raise AclConfigError(
            f"{where}: shorter than {limits.ACL_KEY_MIN_CHARS} characters (RocketMQ's minimum)"
        )
    if len(value) > limits.ACL_EXT_FIELD_MAX_CHARS:
        raise AclConfigError(f"{where}: longer than {limits.ACL_EXT_FIELD_MAX_CHARS} characters")
    return value


def _bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclConfigError(f"{where}: expected true or false, got {value!r}")


def _default_perm(value: object, where: str) -> Perm:
    return Perm.DENY if value is None else parse_perm(value, where)


def _resource_perms(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Perm]:
    perms: dict[str, Perm] = {}
    for entry in _string_list(raw, key, where):
        name, separator, perm_text = entry.partition("=")
        name = name.strip()
        if not separator or not name or "=" in perm_text:
            raise AclConfigError(f"{where}: {key} entry {entry!r} is not name=PERM")
        perms[name] = parse_perm(perm_text, f"{where}: {key} {name}")
    return MappingProxyType(perms)


def _string_list(raw: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = raw.get(key)
    if value is None:
        return []
    if isinstance(value, str):  # RocketMQ's admin tools write comma-separated text sometimes
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AclConfigError(f"{where}: {key} must be a list of text entries")
    return [item.strip() for item in value if item.strip()]


def _data_version(value: object, source: str) -> tuple[int, int]:
    if value is None or value == []:
        return 0, 0
    first = value[0] if isinstance(value, list) else value
    if not isinstance(first, dict):
        raise AclConfigError(f"{source}: dataVersion must be [{{counter, timestamp}}]")
    counter, timestamp = first.get("counter", 0), first.get("timestamp", 0)
    if not isinstance(counter, int) or not isinstance(timestamp, int):
        raise AclConfigError(f"{source}: dataVersion counter and timestamp must be numbers")
    return counter, timestamp


def _kind(value: object) -> str:
    return type(value).__name__


def resource_is_group(resource: str) -> bool:
    """Whether ``resource`` names a group (its retry topic) rather than a topic."""
    return is_retry_topic(resource)

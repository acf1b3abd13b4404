"""ACL 2.0 (RocketMQ 5.3's auth model): users, policies and their Java JSON bodies.

A **user** has a name, a password (its secret: requests are signed with it exactly as ACL 1.0
signs with a secret key), a type (``Super`` skips authorization, ``Normal``) and a status
(``enable`` / ``disable``). An **ACL** belongs to a subject (``User:<name>``) and holds up to
two policies, ``Custom`` and ``Default``, each a list of entries::

    resource   "*" (anything), "Cluster", "Namespace:x", "Topic:x", "Group:x";
               a name ending in "*" is PREFIXED ("Topic:order*"), "*" alone ANY ("Topic:*"),
               anything else LITERAL
    actions    All, Any, Pub, Sub, Create, Update, Delete, Get, List
    sourceIps  empty: any address; else addresses or CIDR blocks ("10.0.0.0/8")
    decision   Allow | Deny

Bodies as Java's ``UserInfo`` (``{"username", "password", "userType", "userStatus"}``) and
``AclInfo`` (``{"subject", "policies": [{"policyType", "entries": [{"resource", "actions",
"sourceIps", "decision"}]}]}``). Pure: no I/O.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from bolide.acl.addresses import AclConfigError

__all__ = [
    "SUBJECT_USER_PREFIX",
    "Acl",
    "Action",
    "Decision",
    "PolicyEntry",
    "PolicyType",
    "Resource",
    "ResourcePattern",
    "ResourceType",
    "User",
    "UserStatus",
    "UserType",
    "subject_of",
]

SUBJECT_USER_PREFIX = "User:"


class _Named(enum.Enum):
    """An enum read from and written as Java's display name (case-insensitive on input)."""

    @classmethod
    def parse(cls, text: object, where: str) -> Self:
        for member in cls:
            if isinstance(text, str) and member.value.lower() == text.strip().lower():
                return member
        names = ", ".join(member.value for member in cls)
        raise AclConfigError(f"{where}: {text!r} is not one of {names}")


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    ANY = "*"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(_Named):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


def subject_of(username: str) -> str:
    """The subject key of a user: ``User:<name>``."""
    return SUBJECT_USER_PREFIX + username


@dataclass(frozen=True, slots=True)
class User:
    """One ACL 2.0 user (Java's ``UserInfo``)."""

    username: str
    password: str
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], where: str = "user") -> Self:
        """From a ``UserInfo`` object; raises :class:`AclConfigError`."""
        username = obj.get("username")
        if not isinstance(username, str) or not username.strip():
            raise AclConfigError(f"{where}: username is missing")
        password = obj.get("password")
        if not isinstance(password, str) or not password:
            raise AclConfigError(f"{where}: user {username}: password is missing")
        user_type = obj.get("userType")
        status = obj.get("userStatus")
        return cls(
            username.strip(),
            password,
            UserType.NORMAL if user_type is None else UserType.parse(user_type, where),
            UserStatus.ENABLE if status is None else UserStatus.parse(status, where),
        )

    def to_object(self, *, with_password: bool = True) -> dict[str, Any]:
        obj: dict[str, Any] = {"username": self.username}
        if with_password:
            obj["password"] = self.password
        obj["userType"] = self.user_type.value
        obj["userStatus"] = self.status.value
        return obj


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource, or a pattern of resources (``name`` None for ANY)."""

    type: ResourceType
    name: str | None
    pattern: ResourcePattern

    @classmethod
    def parse(cls, text: str) -> Self:
        """``"*"``, ``"Cluster"``, ``"Topic:orders"``, ``"Topic:order*"``, ``"Group:*"``...
        Raises :class:`AclConfigError` for an unknown type or an empty name."""
        text = text.strip()
        if text == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, colon, name = text.partition(":")
        resource_type = ResourceType.parse(kind, f"resource {text!r}")
        if resource_type is ResourceType.CLUSTER and not colon:
            return cls(resource_type, "", ResourcePattern.LITERAL)
        if not name:
            raise AclConfigError(f"resource {text!r}: the name after ':' is missing")
        if name == "*":
            return cls(resource_type, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(resource_type, name[:-1], ResourcePattern.PREFIXED)
        return cls(resource_type, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        """The resource as written (``Topic:order*``)."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.type is ResourceType.CLUSTER and self.pattern is ResourcePattern.LITERAL:
            return "Cluster" if not self.name else f"Cluster:{self.name}"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        suffix = "*" if self.pattern is ResourcePattern.PREFIXED else ""
        return f"{self.type.value}:{self.name}{suffix}"

    def matches(self, wanted: Resource) -> bool:
        """Whether this pattern covers the concrete resource ``wanted``."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is ResourcePattern.ANY or self.type is ResourceType.CLUSTER:
            return True
        name = wanted.name or ""
        if self.pattern is ResourcePattern.PREFIXED:
            return name.startswith(self.name or "")
        return name == self.name

    def specificity(self) -> tuple[int, int]:
        """Sort key, most specific first: a typed resource before ``*``, LITERAL before
        PREFIXED (the longer prefix first) before ANY."""
        if self.type is ResourceType.ANY:
            return (3, 0)
        if self.pattern is ResourcePattern.LITERAL:
            return (0, 0)
        if self.pattern is ResourcePattern.PREFIXED:
            return (1, -len(self.name or ""))
        return (2, 0)


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One entry of a policy: resource, actions, source addresses, decision."""

    resource: Resource
    actions: frozenset[Action]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW
    _networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default=(), compare=False, repr=False
    )

    @classmethod
    def build(
        cls,
        resource: Resource,
        actions: Iterable[Action],
        source_ips: Sequence[str] = (),
        decision: Decision = Decision.ALLOW,
    ) -> Self:
        """Raises :class:`AclConfigError` for an empty action list or a bad address."""
        action_set = frozenset(actions)
        if not action_set:
            raise AclConfigError(f"policy entry {resource.key}: no action")
        networks = []
        for text in source_ips:
            try:
                networks.append(ipaddress.ip_network(text.strip(), strict=False))
            except ValueError as error:
                raise AclConfigError(f"policy entry {resource.key}: {error}") from error
        return cls(resource, action_set, tuple(source_ips), decision, tuple(networks))

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], where: str) -> Self:
        resource = obj.get("resource")
        if not isinstance(resource, str):
            raise AclConfigError(f"{where}: resource is missing")
        actions = obj.get("actions") or []
        ips = obj.get("sourceIps") or []
        if not isinstance(actions, list) or not isinstance(ips, list):
            raise AclConfigError(f"{where}: actions and sourceIps must be lists")
        decision = obj.get("decision")
        return cls.build(
            Resource.parse(resource),
            (Action.parse(action, where) for action in actions),
            [str(ip) for ip in ips],
            Decision.ALLOW if decision is None else Decision.parse(decision, where),
        )

    def to_object(self) -> dict[str, Any]:
        return {
            "resource": self.resource.key,
            "actions": sorted(action.value for action in self.actions),
            "sourceIps": list(self.source_ips),
            "decision": self.decision.value,
        }

    def matches(self, wanted: Resource, actions: frozenset[Action], ip: str) -> bool:
        """Resource covered, one requested action held (or All), the address allowed."""
        if not self.resource.matches(wanted):
            return False
        if Action.ALL not in self.actions and not (self.actions & actions):
            return False
        if not self._networks:
            return True
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(address in network for network in self._networks)


@dataclass(frozen=True, slots=True)
class Acl:
    """The policies of one subject: entries by policy type."""

    subject: str
    policies: Mapping[PolicyType, tuple[PolicyEntry, ...]]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Self:
        """From an ``AclInfo`` object; raises :class:`AclConfigError`."""
        subject = obj.get("subject")
        if not isinstance(subject, str) or not subject.startswith(SUBJECT_USER_PREFIX):
            raise AclConfigError(f"acl: subject {subject!r} is not User:<name>")
        policies: dict[PolicyType, tuple[PolicyEntry, ...]] = {}
        for index, policy in enumerate(obj.get("policies") or []):
            where = f"acl {subject} policy {index}"
            if not isinstance(policy, Mapping):
                raise AclConfigError(f"{where}: not an object")
            kind = policy.get("policyType")
            policy_type = PolicyType.CUSTOM if kind is None else PolicyType.parse(kind, where)
            entries = tuple(
                PolicyEntry.from_object(entry, f"{where} entry {number}")
                for number, entry in enumerate(policy.get("entries") or [])
                if isinstance(entry, Mapping)
            )
            policies[policy_type] = policies.get(policy_type, ()) + entries
        return cls(subject, policies)

    def to_object(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "policies": [
                {"policyType": kind.value, "entries": [e.to_object() for e in entries]}
                for kind, entries in self.policies.items()
            ],
        }

    def merged(self, other: Acl) -> Acl:
        """This ACL with ``other``'s entries added (an entry for the same resource in the
        same policy type replaced), as AUTH_UPDATE_ACL does."""
        policies = dict(self.policies)
        for kind, entries in other.policies.items():
            replaced = {entry.resource.key for entry in entries}
            kept = tuple(e for e in policies.get(kind, ()) if e.resource.key not in replaced)
            policies[kind] = kept + entries
        return Acl(self.subject, policies)

    def without(self, policy_type: PolicyType | None, resource: str | None) -> Acl:
        """This ACL less the entries of ``resource`` (all when None) in ``policy_type``
        (every type when None), as AUTH_DELETE_ACL does."""
        policies: dict[PolicyType, tuple[PolicyEntry, ...]] = {}
        for kind, entries in self.policies.items():
            if policy_type is not None and kind is not policy_type:
                policies[kind] = entries
                continue
            if resource is None:
                continue
            key = Resource.parse(resource).key
            left = tuple(entry for entry in entries if entry.resource.key != key)
            if left:
                policies[kind] = left
        return Acl(self.subject, policies)

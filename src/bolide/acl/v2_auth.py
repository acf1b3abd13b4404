"""ACL 2.0's store and its one decision, for the 4.x remoting path, the 5.x proxy and the
dashboard alike.

**The store** is one JSON file (``authStoreFile``, default ``<data-dir>/conf/auth.json``):
``{"users": [UserInfo...], "acls": [AclInfo...]}``, rewritten atomically on every change
(the admin codes 3001-3010). ``initAuthenticationUser`` creates a Super user on first start.

**Authentication** (``authenticationEnabled``): a remoting request carries the 1.0 fields,
``AccessKey`` = the user name and ``Signature`` = the HMAC-SHA1 of the sorted ext field values
and the body, keyed with the user's password. A missing, unknown or disabled user or a wrong
signature is refused.

**Authorization** (``authorizationEnabled``), :meth:`AuthV2.decide`: a Super user may do
anything. Otherwise the entries of the user's ``Custom`` policy that match the resource, one
of the actions and the source address are taken; only when none matches, the ``Default``
policy's. No match: denied ("no matched policies"). Among matches the most specific wins (a
typed resource over ``*``, LITERAL over PREFIXED over ANY, the longer prefix first), and on a
tie Deny wins over Allow (RocketMQ's intent; its comparator is inconsistent there).

**Whitelists** (``authenticationWhitelist`` / ``authorizationWhitelist``, RocketMQ 5.3's
keys): the RPCs that skip that step, named as RocketMQ 5.3 names them — a remoting request
code (``"10"``) or a 5.x request message's full name (``apache.rocketmq.v2.QueryRouteRequest``,
the telemetry stream ``apache.rocketmq.v2.TelemetryCommand``). An RPC skipping
authentication is still authorized as the user it names (the remoting ``AccessKey``, the 5.x
``Credential``), unverified; none named: refused unless authorization skips it too.

What a remoting request needs comes from ACL 1.0's table (:mod:`bolide.acl.permissions`):
topic PUB -> ``Topic:t`` Pub, SUB -> Sub, ANY -> Pub or Sub; a consumer group (or its
``%RETRY%`` topic) -> ``Group:g`` Sub; an admin code -> ``Cluster`` Update; the 2.0 admin codes
-> ``Cluster`` Update (writes) or Get (reads).
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from bolide.acl.addresses import AclConfigError, host_of
from bolide.acl.permissions import (
    ADMIN_REQUEST_CODES,
    Perm,
    RequestParseError,
    required_resources,
)
from bolide.acl.v2_model import (
    Acl,
    Action,
    Decision,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
    subject_of,
)
from bolide.acl.validator import (
    GRPC_AUTHORIZATION_ALGORITHM,
    AclDeniedError,
    grpc_credentials,
    grpc_signature_ok,
    shown_key,
)
from bolide.base.fileio import atomic_write
from bolide.protocol.acl_signature import (
    ACCESS_KEY_FIELD,
    SIGNATURE_FIELD,
    compute_signature,
    signature_content,
    signatures_equal,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.system_topics import group_of_retry_topic, is_retry_topic

__all__ = ["AUTH_READ_CODES", "AUTH_WRITE_CODES", "AuthV2", "Need", "request_needs"]

_log = logging.getLogger("bolide.acl")

R = RequestCode
AUTH_WRITE_CODES: frozenset[int] = frozenset(
    {
        R.AUTH_CREATE_USER,
        R.AUTH_UPDATE_USER,
        R.AUTH_DELETE_USER,
        R.AUTH_CREATE_ACL,
        R.AUTH_UPDATE_ACL,
        R.AUTH_DELETE_ACL,
    }
)
AUTH_READ_CODES: frozenset[int] = frozenset(
    {R.AUTH_GET_USER, R.AUTH_LIST_USER, R.AUTH_GET_ACL, R.AUTH_LIST_ACL}
)
_CLUSTER = Resource(ResourceType.CLUSTER, "", ResourcePattern.LITERAL)
_ACTIONS_OF_PERM: Mapping[Perm, frozenset[Action]] = {
    Perm.PUB: frozenset({Action.PUB}),
    Perm.SUB: frozenset({Action.SUB}),
    Perm.ANY: frozenset({Action.PUB, Action.SUB}),
}

Need = tuple[Resource, frozenset[Action]]


def request_needs(request: RemotingCommand) -> list[Need]:
    """What ``request`` needs, as 2.0 resources and actions (see the module docstring).
    Raises :class:`RequestParseError` when a field the check needs is missing."""
    code = request.code
    if code in AUTH_READ_CODES:
        return [(_CLUSTER, frozenset({Action.GET}))]
    if code in AUTH_WRITE_CODES or code in ADMIN_REQUEST_CODES:
        return [(_CLUSTER, frozenset({Action.UPDATE}))]
    return [_need(name, perm) for name, perm in required_resources(request).items()]


def _need(name: str, perm: Perm) -> Need:
    actions = _ACTIONS_OF_PERM.get(perm, frozenset({Action.PUB, Action.SUB}))
    if is_retry_topic(name):
        group = group_of_retry_topic(name) or name
        return (Resource(ResourceType.GROUP, group, ResourcePattern.LITERAL), actions)
    return (Resource(ResourceType.TOPIC, name, ResourcePattern.LITERAL), actions)


class AuthV2:
    """ACL 2.0 users and ACLs, persisted in ``path``, and the checks on them.

    ``authentication`` / ``authorization``: the two switches. Changes made through the
    methods are written to ``path`` at once (atomic). Raises :class:`AclConfigError` when the
    file exists but does not parse.
    """

    def __init__(
        self,
        path: Path,
        *,
        authentication: bool = True,
        authorization: bool = True,
        init_user: tuple[str, str] | None = None,
        authentication_whitelist: Iterable[str] = (),
        authorization_whitelist: Iterable[str] = (),
    ) -> None:
        self.path = path
        self.authentication = authentication
        self.authorization = authorization
        self.authentication_whitelist = frozenset(authentication_whitelist)
        """RPCs that skip authentication (authenticationWhitelist): codes as text, 5.x names."""
        self.authorization_whitelist = frozenset(authorization_whitelist)
        """RPCs that skip authorization (authorizationWhitelist)."""
        self._lock = threading.Lock()
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self._inner: dict[str, User] = {}
        self.denied_count = 0
        self._load()
        if init_user is not None and init_user[0] not in self.users:
            self.put_user(User(init_user[0], init_user[1], UserType.SUPER))

    # --- the store -----------------------------------------------------------------------

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise AclConfigError(f"{self.path}: not JSON: {error}") from error
        if not isinstance(data, dict):
            raise AclConfigError(f"{self.path}: expected an object with users and acls")
        for item in data.get("users") or []:
            user = User.from_object(item, f"{self.path} user")
            self.users[user.username] = user
        for item in data.get("acls") or []:
            acl = Acl.from_object(item)
            self.acls[acl.subject] = acl

    def _save(self) -> None:
        data = {
            "users": [user.to_object() for user in self.users.values()],
            "acls": [acl.to_object() for acl in self.acls.values()],
        }
        atomic_write(self.path, orjson.dumps(data, option=orjson.OPT_INDENT_2))

    def put_user(self, user: User) -> None:
        with self._lock:
            self.users[user.username] = user
            self._save()

    def delete_user(self, username: str) -> bool:
        with self._lock:
            found = self.users.pop(username, None) is not None
            self.acls.pop(subject_of(username), None)
            self._save()
            return found

    def put_acl(self, acl: Acl) -> None:
        with self._lock:
            self.acls[acl.subject] = acl
            self._save()

    def delete_acl(self, subject: str) -> bool:
        with self._lock:
            found = self.acls.pop(subject, None) is not None
            self._save()
            return found

    def add_inner_user(self, username: str, password: str) -> None:
        """A Super user kept in memory only (a stored user of that name wins): the
        credentials one part of a process uses toward another (``bolide standalone``'s proxy
        and dashboard reaching its broker)."""
        self._inner[username] = User(username, password, UserType.SUPER)

    def user(self, username: str) -> User | None:
        """The stored user, else the inner one, else None."""
        return self.users.get(username) or self._inner.get(username)

    # --- the decision --------------------------------------------------------------------

    def decide(
        self, username: str, resource: Resource, actions: Iterable[Action], ip: str
    ) -> tuple[Decision, str]:
        """Whether ``username`` may do one of ``actions`` on ``resource`` from ``ip``, and
        why (the module docstring has the rule)."""
        user = self.user(username)
        if user is None:
            return Decision.DENY, f"user {shown_key(username)} not found"
        if user.status is UserStatus.DISABLE:
            return Decision.DENY, f"user {shown_key(username)} is disabled"
        if user.user_type is UserType.SUPER:
            return Decision.ALLOW, "super user"
        acl = self.acls.get(subject_of(username))
        wanted = frozenset(actions)
        matched = []
        for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
            entries = () if acl is None else acl.policies.get(policy_type, ())
            matched = [entry for entry in entries if entry.matches(resource, wanted, ip)]
            if matched:
                break
        who = f"{subject_of(shown_key(username))} on {resource.key} from {ip}"
        if not matched:
            return Decision.DENY, f"{who}: no matched policies"
        matched.sort(
            key=lambda e: (e.resource.specificity(), 0 if e.decision is Decision.DENY else 1)
        )
        chosen = matched[0]
        if chosen.decision is Decision.DENY:
            return Decision.DENY, f"{who}: the decision is deny ({chosen.resource.key})"
        return Decision.ALLOW, f"{who}: allowed by {chosen.resource.key}"

    def authorize(self, username: str, needs: Iterable[Need], ip: str) -> None:
        """Raise :class:`AclDeniedError` unless every need is allowed (switch off: nothing
        is checked)."""
        if not self.authorization:
            return
        for resource, actions in needs:
            decision, reason = self.decide(username, resource, actions, ip)
            if decision is Decision.DENY:
                raise AclDeniedError(reason, username)

    def authenticate_request(self, request: RemotingCommand, ip: str) -> str | None:
        """The user a remoting request is signed by (None: authentication is off). Raises
        :class:`AclDeniedError`."""
        if not self.authentication:
            return request.ext_fields.get(ACCESS_KEY_FIELD)
        fields = request.ext_fields
        username = fields.get(ACCESS_KEY_FIELD)
        if not username:
            raise AclDeniedError("No accessKey is configured")
        user = self.user(username)
        if user is None:
            raise AclDeniedError(f"User:{shown_key(username)} is not found", username)
        if user.status is UserStatus.DISABLE:
            raise AclDeniedError(f"User:{shown_key(username)} is disabled", username)
        content = signature_content(fields, request.body, version=request.version)
        expected = compute_signature(user.password, content)
        if not signatures_equal(expected, fields.get(SIGNATURE_FIELD, "")):
            raise AclDeniedError(f"check signature failed for User:{shown_key(username)}", username)
        return username

    def check(self, request: RemotingCommand, remote_address: str) -> None:
        """Authenticate then authorize a remoting request; raises :class:`AclDeniedError`."""
        ip = host_of(remote_address)
        rpc = str(request.code)
        authorize = self.authorization and rpc not in self.authorization_whitelist
        try:
            if self.authentication and rpc in self.authentication_whitelist:
                username = request.ext_fields.get(ACCESS_KEY_FIELD)
                if not username and authorize:
                    raise AclDeniedError("No accessKey is configured")
            else:
                username = self.authenticate_request(request, ip)
            if username is None or not authorize:
                return
            try:
                needs = request_needs(request)
            except RequestParseError as error:
                raise AclDeniedError(str(error), username) from None
            self.authorize(username, needs, ip)
        except AclDeniedError:
            self.denied_count += 1
            raise

    # --- the 5.x proxy's calls (the same users and the same decision) ----------------------

    def verify_grpc_authorization(
        self,
        authorization: str | None,
        date_time: str | None,
        remote_address: str,
        rpc_name: str = "",
    ) -> tuple[str, str, str] | None:
        """Check a 5.x call's ``authorization`` header (``MQv2-HMAC-SHA1 Credential=<user>,
        SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(password, date-time)>``);
        returns ``(user, ip, rpc_name)`` for :meth:`authorize_grpc`, or None with authentication
        off. ``rpc_name`` (the request message's full name) in the authentication whitelist:
        the user the header names is taken unverified. Raises :class:`AclDeniedError`."""
        ip = host_of(remote_address)
        if not self.authentication:
            return None
        algorithm, username, signature = grpc_credentials(authorization)
        if rpc_name and rpc_name in self.authentication_whitelist:
            return username, ip, rpc_name
        if algorithm != GRPC_AUTHORIZATION_ALGORITHM:
            raise AclDeniedError("No accessKey is configured")
        user = self.user(username) if username else None
        if user is None or user.status is UserStatus.DISABLE:
            raise AclDeniedError(f"User:{shown_key(username)} is not found or disabled", username)
        if not grpc_signature_ok(user.password, date_time, signature):
            raise AclDeniedError(f"check signature failed for User:{shown_key(username)}", username)
        return username, ip, rpc_name

    def authorize_grpc(self, identity: object, needed: Mapping[str, Perm]) -> None:
        """The permission step of a 5.x call: ``identity`` is what
        :meth:`verify_grpc_authorization` returned, ``needed`` the 1.0 form of what the call
        needs (topics, ``%RETRY%<group>``). Raises :class:`AclDeniedError`."""
        if not isinstance(identity, tuple):
            return
        username, ip, rpc_name = identity
        if rpc_name and rpc_name in self.authorization_whitelist:
            return
        try:
            if not username:
                raise AclDeniedError("No accessKey is configured")
            self.authorize(username, [_need(name, perm) for name, perm in needed.items()], ip)
        except AclDeniedError:
            self.denied_count += 1
            raise

    def authenticate(self, username: str, password: str) -> User | None:
        """The enabled user whose password this is (compared in constant time), else None
        (the dashboard's login; a Super user administers)."""
        user = self.user(username)
        if user is None or user.status is UserStatus.DISABLE:
            return None
        if not hmac.compare_digest(user.password.encode(), password.encode()):
            return None
        return user

    def summary(self) -> dict[str, Any]:
        """Counts for the start-up log line."""
        return {"users": len(self.users), "acls": len(self.acls)}

"""Who may do what: the checks of RocketMQ's ACL 1.0, run before a request is dispatched.

Order (as RocketMQ's PlainPermissionManager; the first that decides wins)::

    1. the peer's IP matches globalWhiteRemoteAddresses        -> allowed, nothing else checked
    2. no AccessKey field                                      -> refused
    3. no account with that AccessKey                          -> refused
    4. the peer's IP matches the account's whiteRemoteAddress  -> allowed, nothing else checked
    5. Signature missing or not what the secret key gives      -> refused
    6. an admin code from a non-admin account                  -> refused
    7. a send to the trace topic (RMQ_SYS_TRACE_TOPIC)         -> allowed
    8. each resource the request needs (permissions.py)        -> refused unless granted; an
       admin account that lists no topicPerms/groupPerms has every permission

A refusal is :class:`AclDeniedError`; its message names the access key and the reason and
never a secret. Besides remoting requests, :meth:`AclValidator.authenticate`,
:meth:`~AclValidator.is_admin`, :meth:`~AclValidator.verify_grpc_authorization` and
:meth:`~AclValidator.authorize` serve the other front ends (dashboard, metrics, 5.x proxy),
so every listener follows the same accounts.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from types import MappingProxyType

from bolide.acl.addresses import compile_address_pattern, host_of
from bolide.acl.permissions import (
    ADMIN_REQUEST_CODES,
    Perm,
    RequestParseError,
    check_permission,
    required_resources,
)
from bolide.acl.rules import AclAccount, AclRules, resource_is_group
from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.protocol.acl_signature import (
    ACCESS_KEY_FIELD,
    SIGNATURE_FIELD,
    compute_signature,
    signature_content,
    signatures_equal,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC, group_of_retry_topic

__all__ = [
    "ACL_EXCEPTION_PREFIX",
    "GRPC_AUTHORIZATION_ALGORITHM",
    "AclDeniedError",
    "AclValidator",
    "grpc_credentials",
    "grpc_signature_ok",
]

ACL_EXCEPTION_PREFIX = "org.apache.rocketmq.acl.common.AclException: "
"""Remarks of refusals start like RocketMQ 4.x's, so tools that look for AclException work."""
GRPC_AUTHORIZATION_ALGORITHM = "MQv2-HMAC-SHA1"
_SEND_CODES = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)
_SHOWN_KEY_MAX_CHARS = 64


class AclDeniedError(BolideError):
    """A request refused by the ACL. ``reason`` says why (never with a secret);
    ``access_key`` is the account named by the request, if any."""

    def __init__(self, reason: str, access_key: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.access_key = access_key

    @property
    def remark(self) -> str:
        """The response remark: ``org.apache.rocketmq.acl.common.AclException: <reason>``."""
        return ACL_EXCEPTION_PREFIX + self.reason


def shown_key(access_key: str) -> str:
    """An access key fit for a message: printable, at most 64 characters."""
    text = access_key if access_key.isprintable() else access_key.encode("unicode_escape").decode()
    if len(text) > _SHOWN_KEY_MAX_CHARS:
        return text[:_SHOWN_KEY_MAX_CHARS] + "..."
    return text


class AclValidator:
    """Checks requests against the current :class:`AclRules` (swapped whole on reload).

    ``trace_topic``: sends to it need no permission. One validator may serve several
    servers of a process (``bolide standalone``: name server and broker), each passing its
    own admin codes to :meth:`check`.
    """

    def __init__(self, rules: AclRules, *, trace_topic: str = DEFAULT_TRACE_TOPIC) -> None:
        self._rules = rules
        self._trace_topic = trace_topic
        self._inner_accounts: dict[str, AclAccount] = {}
        self.denied_count = 0
        """Requests refused since start (for stats and tests)."""

    @property
    def rules(self) -> AclRules:
        return self._rules

    def replace_rules(self, rules: AclRules) -> None:
        """Use ``rules`` from the next request on (a reload, an admin update)."""
        self._rules = rules

    def add_inner_account(self, access_key: str, secret_key: str) -> None:
        """An admin account kept in memory only, beside the file's (which wins on a clash):
        the credentials one part of a process uses toward another (``bolide standalone``'s
        broker registering with its name server)."""
        self._inner_accounts[access_key] = AclAccount(
            access_key=access_key,
            secret_key=secret_key,
            white_remote_address=compile_address_pattern(""),
            admin=True,
            default_topic_perm=Perm.DENY,
            default_group_perm=Perm.DENY,
            topic_perms=MappingProxyType({}),
            group_perms=MappingProxyType({}),
        )

    def account(self, access_key: str) -> AclAccount | None:
        """The account named ``access_key`` (file first, then inner accounts), or None."""
        return self._rules.accounts.get(access_key) or self._inner_accounts.get(access_key)

    # --- remoting requests ------------------------------------------------------------------

    def check(
        self,
        request: RemotingCommand,
        remote_address: str,
        *,
        admin_codes: frozenset[int] = ADMIN_REQUEST_CODES,
    ) -> None:
        """Allow ``request`` from ``remote_address`` (``ip:port``) or raise AclDeniedError;
        ``admin_codes`` need an admin account (default: the broker's)."""
        try:
            self._check(request, host_of(remote_address), admin_codes)
        except AclDeniedError:
            self.denied_count += 1
            raise

    def _check(self, request: RemotingCommand, ip: str, admin_codes: frozenset[int]) -> None:
        rules = self._rules
        if any(pattern.matches(ip) for pattern in rules.global_white_addresses):
            return
        fields = request.ext_fields
        access_key = fields.get(ACCESS_KEY_FIELD)
        if not access_key:
            raise AclDeniedError("No accessKey is configured")
        if len(access_key) > limits.ACL_EXT_FIELD_MAX_CHARS:
            raise AclDeniedError(f"accessKey longer than {limits.ACL_EXT_FIELD_MAX_CHARS} chars")
        account = self.account(access_key)
        if account is None:
            raise AclDeniedError(f"No acl config for {shown_key(access_key)}", access_key)
        if account.white_remote_address.matches(ip):
            return
        signature = fields.get(SIGNATURE_FIELD, "")
        content = signature_content(fields, request.body, version=request.version)
        expected = compute_signature(account.secret_key, content)
        if not signature or not signatures_equal(expected, signature):
            raise AclDeniedError(
                f"Check signature failed for accessKey={shown_key(access_key)}", access_key
            )
        code = request.code
        if code in admin_codes and not account.admin:
            raise AclDeniedError(
                f"Need admin permission for request code={code},"
                f" but accessKey={shown_key(access_key)} is not admin",
                access_key,
            )
        try:
            needed = required_resources(request)
        except RequestParseError as error:
            raise AclDeniedError(
                f"{error} (accessKey={shown_key(access_key)})", access_key
            ) from None
        if code in _SEND_CODES and needed == {self._trace_topic: Perm.PUB}:
            return
        self.authorize_account(account, needed)

    # --- the API for the other front ends (dashboard, metrics, gRPC proxy) --------------------

    def authenticate(self, access_key: str, secret_key: str) -> AclAccount | None:
        """The account when ``secret_key`` is its secret (compared in constant time)."""
        account = self.account(access_key)
        if account is None:
            return None
        if not hmac.compare_digest(account.secret_key.encode(), secret_key.encode()):
            return None
        return account

    def is_admin(self, access_key: str, secret_key: str) -> bool:
        """Whether these credentials are an admin account's (dashboard and admin endpoints)."""
        account = self.authenticate(access_key, secret_key)
        return account is not None and account.admin

    def is_white_listed(self, remote_address: str) -> bool:
        """Whether ``remote_address`` (``ip`` or ``ip:port``) is globally white-listed."""
        ip = host_of(remote_address)
        return any(pattern.matches(ip) for pattern in self._rules.global_white_addresses)

    def verify_grpc_authorization(
        self,
        authorization: str | None,
        date_time: str | None,
        remote_address: str,
        rpc_name: str = "",
    ) -> AclAccount | None:
        """Check a 5.x client's ``authorization`` header against its ``x-mq-date-time``.

        The header is ``MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time,
        Signature=<hex HMAC-SHA1(secretKey, date-time)>``. Returns the account, or None when a
        white list lets the peer in without checks (then :meth:`authorize` is not needed).
        ``rpc_name`` is not used: ACL 1.0 has no per-RPC whitelist.
        Raises :class:`AclDeniedError`.
        """
        ip = host_of(remote_address)
        rules = self._rules
        if any(pattern.matches(ip) for pattern in rules.global_white_addresses):
            return None
        if not authorization:
            raise AclDeniedError("No accessKey is configured")
        algorithm, access_key, signature = grpc_credentials(authorization)
        if algorithm != GRPC_AUTHORIZATION_ALGORITHM:
            raise AclDeniedError(f"authorization algorithm {shown_key(algorithm)} not supported")
        if not access_key:
            raise AclDeniedError("No accessKey is configured")
        account = self.account(access_key)
        if account is None:
            raise AclDeniedError(f"No acl config for {shown_key(access_key)}", access_key)
        if account.white_remote_address.matches(ip):
            return None
        if not grpc_signature_ok(account.secret_key, date_time, signature):
            raise AclDeniedError(
                f"Check signature failed for accessKey={shown_key(access_key)}", access_key
            )
        return account

    def authorize(
        self, access_key: str, needed: Mapping[str, Perm], *, admin: bool = False
    ) -> None:
        """Raise :class:`AclDeniedError` unless the (already authenticated) account
        ``access_key`` holds every permission in ``needed`` (topics, ``%RETRY%<group>``) and,
        with ``admin``, is an admin account."""
        account = self.account(access_key)
        if account is None:
            raise AclDeniedError(f"No acl config for {shown_key(access_key)}", access_key)
        if admin and not account.admin:
            raise AclDeniedError(f"accessKey={shown_key(access_key)} is not admin", access_key)
        self.authorize_account(account, needed)

    def authorize_grpc(self, account: AclAccount | None, needed: Mapping[str, Perm]) -> None:
        """The permission step of a 5.x call: ``account`` is what
        :meth:`verify_grpc_authorization` returned (None: white-listed, allowed), ``needed``
        what :func:`~bolide.acl.permissions.grpc_required_resources` gives. Uses the account's
        current rules (a reload applies from the next call on); a send to the trace topic
        needs nothing. Raises :class:`AclDeniedError`."""
        if account is None or dict(needed) == {self._trace_topic: Perm.PUB}:
            return
        current = self.account(account.access_key)
        if current is None:
            self.denied_count += 1
            raise AclDeniedError(
                f"No acl config for {shown_key(account.access_key)}", account.access_key
            )
        try:
            self.authorize_account(current, needed)
        except AclDeniedError:
            self.denied_count += 1
            raise

    @staticmethod
    def authorize_account(account: AclAccount, needed: Mapping[str, Perm]) -> None:
        """The permission step for an account already identified; see :meth:`authorize`."""
        if not needed or (account.admin and not account.lists_resources):
            return
        for resource, perm in needed.items():
            is_group = resource_is_group(resource)
            if check_permission(perm, account.owned_perm(resource, is_group=is_group)):
                continue
            group = group_of_retry_topic(resource) if is_group else None
            kind, name = ("group", group) if group is not None else ("topic", resource)
            wanted = "SUB" if perm & Perm.SUB else "PUB" if perm & Perm.PUB else "any"
            raise AclDeniedError(
                f"No {wanted} permission for {kind}={name},"
                f" accessKey={shown_key(account.access_key)}",
                account.access_key,
            )


def grpc_credentials(authorization: str | None) -> tuple[str, str, str]:
    """``(algorithm, access key, signature)`` of a 5.x ``authorization`` header
    (``MQv2-HMAC-SHA1 Credential=<AK>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>``);
    an empty string for each part the header lacks."""
    algorithm, _, rest = (authorization or "").strip().partition(" ")
    parts = dict(_key_value(item) for item in rest.split(","))
    return algorithm, parts.get("Credential", "").split("/", 1)[0], parts.get("Signature", "")


def grpc_signature_ok(secret: str, date_time: str | None, signature: str) -> bool:
    """Whether ``signature`` is the hex HMAC-SHA1 of the ``x-mq-date-time`` value under
    ``secret`` (either case, compared in constant time); False without a date-time."""
    if not date_time:
        return False
    expected = hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()
    return signatures_equal(expected.upper(), signature.upper())


def _key_value(item: str) -> tuple[str, str]:
    key, _, value = item.strip().partition("=")
    return key.strip(), value.strip()

"""ACL 2.0's admin requests (RocketMQ 5.3 codes 3001-3010) on the broker's auth store.

=====  ================  ==============================  ===================================
code   name              header                          body / answer
=====  ================  ==============================  ===================================
3001   AUTH_CREATE_USER  username                        UserInfo; refused if the user exists
3002   AUTH_UPDATE_USER  username                        UserInfo (fields given replace)
3003   AUTH_DELETE_USER  username                        -
3004   AUTH_GET_USER     username                        answer: UserInfo (no password)
3005   AUTH_LIST_USER    filter (substring, optional)    answer: [UserInfo]
3006   AUTH_CREATE_ACL   subject (User:<name>)           AclInfo; refused if it exists
3007   AUTH_UPDATE_ACL   subject                         AclInfo, merged by resource
3008   AUTH_DELETE_ACL   subject, policyType, resource   - (optional fields narrow it)
3009   AUTH_GET_ACL      subject                         answer: AclInfo
3010   AUTH_LIST_ACL     subjectFilter, resourceFilter   answer: [AclInfo]
=====  ================  ==============================  ===================================

Who may call them is the request check's business (``Cluster`` Update / Get, Super users
always). Without ACL 2.0 on each answers SYSTEM_ERROR saying so; a bad body or an unknown
user answers SYSTEM_ERROR with the reason and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import orjson

from bolide.acl.addresses import AclConfigError
from bolide.acl.v2_auth import AuthV2
from bolide.acl.v2_model import Acl, PolicyType, User, UserStatus, UserType, subject_of
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection, Dispatcher

__all__ = ["AuthAdminHandlers"]

_V = TypeVar("_V")

R = RequestCode

_DISABLED = "ACL 2.0 is not enabled on this broker (authenticationEnabled / authorizationEnabled)"


class AuthAdminHandlers:
    """Codes 3001-3010 over ``auth`` (None when ACL 2.0 is off)."""

    def __init__(self, auth: AuthV2 | None) -> None:
        self._auth = auth

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 3001-3010 in the ``admin`` family."""
        for code, handler in (
            (R.AUTH_CREATE_USER, self.create_user),
            (R.AUTH_UPDATE_USER, self.update_user),
            (R.AUTH_DELETE_USER, self.delete_user),
            (R.AUTH_GET_USER, self.get_user),
            (R.AUTH_LIST_USER, self.list_users),
            (R.AUTH_CREATE_ACL, self.create_acl),
            (R.AUTH_UPDATE_ACL, self.update_acl),
            (R.AUTH_DELETE_ACL, self.delete_acl),
            (R.AUTH_GET_ACL, self.get_acl),
            (R.AUTH_LIST_ACL, self.list_acls),
        ):
            dispatcher.register(code, _guarded(self, handler), family="admin")

    def _store(self) -> AuthV2:
        if self._auth is None:
            raise AclConfigError(_DISABLED)
        return self._auth

    async def create_user(self, request: RemotingCommand) -> RemotingCommand:
        auth = self._store()
        user = User.from_object(_body(request), "UserInfo")
        if user.username in auth.users:
            raise AclConfigError(f"user {user.username} already exists")
        auth.put_user(user)
        return request.make_response(ResponseCode.SUCCESS)

    async def update_user(self, request: RemotingCommand) -> RemotingCommand:
        auth = self._store()
        body = _body(request)
        name = request.ext_fields.get("username") or body.get("username") or ""
        old = _found(auth.users, name, f"user {name} is not found")
        password = body.get("password") or old.password
        kind, status = body.get("userType"), body.get("userStatus")
        auth.put_user(
            User(
                name,
                password,
                old.user_type if kind is None else UserType.parse(kind, "userType"),
                old.status if status is None else UserStatus.parse(status, "userStatus"),
            )
        )
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_user(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "username")
        if not self._store().delete_user(name):
            raise AclConfigError(f"user {name} is not found")
        return request.make_response(ResponseCode.SUCCESS)

    async def get_user(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "username")
        user = _found(self._store().users, name, f"user {name} is not found")
        return _answer(request, user.to_object(with_password=False))

    async def list_users(self, request: RemotingCommand) -> RemotingCommand:
        needle = request.ext_fields.get("filter") or ""
        users = [u for u in self._store().users.values() if needle in u.username]
        return _answer(request, [u.to_object(with_password=False) for u in users])

    async def create_acl(self, request: RemotingCommand) -> RemotingCommand:
        auth = self._store()
        acl = Acl.from_object(_body(request))
        if acl.subject in auth.acls:
            raise AclConfigError(f"the acl of {acl.subject} already exists")
        _user_exists(auth, acl.subject)
        auth.put_acl(acl)
        return request.make_response(ResponseCode.SUCCESS)

    async def update_acl(self, request: RemotingCommand) -> RemotingCommand:
        auth = self._store()
        acl = Acl.from_object(_body(request))
        _user_exists(auth, acl.subject)
        old = auth.acls.get(acl.subject)
        auth.put_acl(acl if old is None else old.merged(acl))
        return request.make_response(ResponseCode.SUCCESS)

    async def delete_acl(self, request: RemotingCommand) -> RemotingCommand:
        auth = self._store()
        subject = _field(request, "subject")
        old = _found(auth.acls, subject, f"the acl of {subject} is not found")
        kind = request.ext_fields.get("policyType")
        resource = request.ext_fields.get("resource") or None
        if kind is None and resource is None:
            auth.delete_acl(subject)
        else:
            policy_type = None if kind is None else PolicyType.parse(kind, "policyType")
            auth.put_acl(old.without(policy_type, resource))
        return request.make_response(ResponseCode.SUCCESS)

    async def get_acl(self, request: RemotingCommand) -> RemotingCommand:
        subject = _field(request, "subject")
        acl = _found(self._store().acls, subject, f"the acl of {subject} is not found")
        return _answer(request, acl.to_object())

    async def list_acls(self, request: RemotingCommand) -> RemotingCommand:
        subject_filter = request.ext_fields.get("subjectFilter") or ""
        resource_filter = request.ext_fields.get("resourceFilter") or ""
        found = [
            acl.to_object()
            for acl in self._store().acls.values()
            if subject_filter in acl.subject
            and (
                not resource_filter
                or any(
                    resource_filter in entry.resource.key
                    for entries in acl.policies.values()
                    for entry in entries
                )
            )
        ]
        return _answer(request, found)


def _guarded(owner: AuthAdminHandlers, handler: Any) -> Any:
    """``handler(request)`` as a dispatcher handler, its refusals answered SYSTEM_ERROR."""
    del owner

    async def handle(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        del connection
        try:
            response: RemotingCommand = await handler(request)
        except (AclConfigError, orjson.JSONDecodeError) as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        return response

    return handle


def _body(request: RemotingCommand) -> dict[str, Any]:
    data = orjson.loads(bytes(request.body) or b"null")
    if not isinstance(data, dict):
        raise AclConfigError("the body must be a JSON object")
    return data


def _field(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if not value:
        raise AclConfigError(f"header field {name} is missing")
    return value


def _user_exists(auth: AuthV2, subject: str) -> None:
    name = subject.removeprefix("User:")
    if name not in auth.users or subject_of(name) != subject:
        raise AclConfigError(f"{subject}: no such user")


def _found(table: Mapping[str, _V], key: str, missing: str) -> _V:
    """``table[key]``; AclConfigError saying ``missing`` when there is none."""
    found = table.get(key)
    if found is None:
        raise AclConfigError(missing)
    return found


def _answer(request: RemotingCommand, body: object) -> RemotingCommand:
    response = request.make_response(ResponseCode.SUCCESS)
    response.body = orjson.dumps(body)
    return response

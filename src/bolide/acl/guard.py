"""The ACL as a remoting request check: refusals become responses, before any handler runs."""

from __future__ import annotations

import logging

from bolide.acl.permissions import ADMIN_REQUEST_CODES
from bolide.acl.validator import ACL_EXCEPTION_PREFIX, AclDeniedError, AclValidator
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting.connection import Connection
from bolide.remoting.dispatcher import RequestCheck

__all__ = ["acl_request_check"]

_log = logging.getLogger("bolide.acl")


def acl_request_check(
    validator: AclValidator,
    *,
    admin_codes: frozenset[int] = ADMIN_REQUEST_CODES,
    denial_code: int = ResponseCode.SYSTEM_ERROR,
) -> RequestCheck:
    """A :data:`~bolide.remoting.dispatcher.RequestCheck` refusing what ``validator`` does
    (``admin_codes``: the server's admin-only requests). A refusal answers ``denial_code``
    (SYSTEM_ERROR as RocketMQ 4.x, or NO_PERMISSION as 5.x) with the AclException remark; an
    unexpected failure of the check refuses too (fail closed)."""

    def check(connection: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            validator.check(request, connection.remote_address, admin_codes=admin_codes)
        except AclDeniedError as error:
            _log.debug(
                "refused request code %d from %s: %s",
                request.code,
                connection.remote_address,
                error.reason,
            )
            return request.make_response(denial_code, error.remark)
        except Exception as error:  # a bug in a check must not open the door
            _log.error("ACL check of request code %d crashed", request.code, exc_info=error)
            return request.make_response(
                denial_code, f"{ACL_EXCEPTION_PREFIX}ACL check failed: {type(error).__name__}"
            )
        return None

    return check

"""The ACL as a remoting request check: refusals become responses, before any handler runs.

Every refusal is logged at DEBUG; at WARNING, at most one refusal per
:data:`~bolide.base.limits.ACL_DENIAL_LOG_INTERVAL_MS` is logged, with the count of those
left out since, so that operators see refusals without a flood of bad requests flooding the
log.
"""

from __future__ import annotations

import logging

from bolide.acl.permissions import ADMIN_REQUEST_CODES
from bolide.acl.v2_auth import AuthV2
from bolide.acl.validator import ACL_EXCEPTION_PREFIX, AclDeniedError, AclValidator
from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting.connection import Connection
from bolide.remoting.dispatcher import RequestCheck

__all__ = ["acl_request_check", "auth_v2_request_check"]

_log = logging.getLogger("bolide.acl")


class _DenialLog:
    """Logs the first refusal of each interval at WARNING (refusals are logged at DEBUG)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._next_ms = 0
        self._left_out = 0

    def refused(self, request: RemotingCommand, peer: str, reason: str) -> None:
        _log.debug("refused request code %d from %s: %s", request.code, peer, reason)
        now_ms = self._clock.monotonic_ms()
        if now_ms < self._next_ms:
            self._left_out += 1
            return
        left_out, self._left_out = self._left_out, 0
        self._next_ms = now_ms + limits.ACL_DENIAL_LOG_INTERVAL_MS
        more = f" ({left_out} more refused since the last report)" if left_out else ""
        _log.warning("ACL refused request code %d from %s: %s%s", request.code, peer, reason, more)


def acl_request_check(
    validator: AclValidator,
    *,
    admin_codes: frozenset[int] = ADMIN_REQUEST_CODES,
    denial_code: int = ResponseCode.SYSTEM_ERROR,
    clock: Clock | None = None,
) -> RequestCheck:
    """A :data:`~bolide.remoting.dispatcher.RequestCheck` refusing what ``validator`` does
    (``admin_codes``: the server's admin-only requests). A refusal answers ``denial_code``
    (SYSTEM_ERROR as RocketMQ 4.x, or NO_PERMISSION as 5.x) with the AclException remark; an
    unexpected failure of the check refuses too (fail closed). ``clock`` paces the WARNING
    log of refusals (default: the system clock)."""
    denials = _DenialLog(clock or SystemClock())

    def check(connection: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            validator.check(request, connection.remote_address, admin_codes=admin_codes)
        except AclDeniedError as error:
            denials.refused(request, connection.remote_address, error.reason)
            return request.make_response(denial_code, error.remark)
        except Exception as error:  # a bug in a check must not open the door
            _log.error("ACL check of request code %d crashed", request.code, exc_info=error)
            return request.make_response(
                denial_code, f"{ACL_EXCEPTION_PREFIX}ACL check failed: {type(error).__name__}"
            )
        return None

    return check


def auth_v2_request_check(auth: AuthV2, *, clock: Clock | None = None) -> RequestCheck:
    """The ACL 2.0 check of every remoting request (:meth:`AuthV2.check`): a refusal answers
    NO_PERMISSION (16) with the reason, as RocketMQ 5.3; a crashing check refuses too."""
    denials = _DenialLog(clock or SystemClock())

    def check(connection: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            auth.check(request, connection.remote_address)
        except AclDeniedError as error:
            denials.refused(request, connection.remote_address, error.reason)
            return request.make_response(ResponseCode.NO_PERMISSION, error.reason)
        except Exception as error:  # a bug in a check must not open the door
            _log.error("ACL 2.0 check of request code %d crashed", request.code, exc_info=error)
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"ACL check failed: {type(error).__name__}"
            )
        return None

    return check

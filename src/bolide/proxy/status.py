"""5.x status codes: building ``Status`` and mapping remoting response codes and errors to
the ``Code`` an Apache proxy answers."""

from __future__ import annotations

from bolide.base.errors import (
    BackpressureError,
    BolideError,
    ConnectionClosedError,
    NoRouteError,
    RemoteError,
    RequestTimeoutError,
    TopicNotFoundError,
)
from bolide.protocol.codes import ResponseCode
from bolide.proxy.proto import definition_pb2 as pb

__all__ = ["ProxyError", "code_of_error", "code_of_response", "status"]

_BY_RESPONSE: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.PULL_NOT_FOUND: pb.MESSAGE_NOT_FOUND,
    ResponseCode.NO_MESSAGE: pb.INVALID_RECEIPT_HANDLE,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
}


class ProxyError(Exception):
    """A request the proxy answers with ``code`` and ``message`` in its Status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def code_of_response(code: int) -> int:
    """The 5.x Code of a remoting response code (INTERNAL_SERVER_ERROR when unmapped)."""
    return _BY_RESPONSE.get(code, pb.INTERNAL_SERVER_ERROR)


def code_of_error(error: BaseException) -> int:
    """The 5.x Code of an error met while talking to brokers."""
    if isinstance(error, ProxyError):
        return error.code
    if isinstance(error, TopicNotFoundError):
        return pb.TOPIC_NOT_FOUND
    if isinstance(error, RemoteError):
        return code_of_response(error.code)
    if isinstance(error, RequestTimeoutError):
        return pb.PROXY_TIMEOUT
    if isinstance(error, BackpressureError):
        return pb.TOO_MANY_REQUESTS
    if isinstance(error, NoRouteError | ConnectionClosedError | BolideError):
        return pb.INTERNAL_SERVER_ERROR
    return pb.INTERNAL_ERROR

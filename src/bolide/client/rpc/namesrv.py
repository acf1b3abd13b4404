"""Requests to a name server: GET_ROUTEINFO_BY_TOPIC (105)."""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies import TopicRouteData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import GetRouteInfoRequestHeader
from bolide.remoting import ClientPool

__all__ = ["get_route"]


async def get_route(pool: ClientPool, address: str, topic: str, timeout_ms: int) -> TopicRouteData:
    """The route of ``topic`` from the name server at ``address``.

    We ask for standard JSON (``acceptStandardJsonOnly``); unquoted fastjson keys parse too.

    Raises:
        RemoteError: TOPIC_NOT_EXIST (17) when the name server knows no broker holding it.
        ProtocolError: the body is not a route.
        ConnectionClosedError, RequestTimeoutError: the name server is unreachable or slow.
    """
    header = GetRouteInfoRequestHeader(topic, accept_standard_json_only=True)
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return TopicRouteData.from_json(response.body)

"""Bolide's GET_STATS_HISTORY (:mod:`bolide.protocol.bodies.stats_history`): a broker's
per-minute put rate of a topic, or lag and get rate of a topic@group, over the last hour."""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies.stats_history import GetStatsHistoryRequestHeader, StatsHistory
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool

__all__ = ["get_stats_history"]


async def get_stats_history(
    pool: ClientPool, address: str, header: GetStatsHistoryRequestHeader, timeout_ms: int
) -> StatsHistory:
    """GET_STATS_HISTORY to the broker at ``address``.

    Raises RemoteError (TOPIC_NOT_EXIST; REQUEST_CODE_NOT_SUPPORTED from a broker without
    it), ProtocolError for a body it cannot parse, transport errors.
    """
    request = RemotingCommand.request(RequestCode.BOLIDE_GET_STATS_HISTORY, header.to_ext_fields())
    response = await call(pool, address, request, timeout_ms)
    return StatsHistory.from_json(response.body)

"""The requests a client sends a controller (controller mode): CONTROLLER_GET_METADATA_INFO
(1005, any controller: who leads) and CONTROLLER_GET_SYNC_STATE_DATA (1006, the leader: the
replica sets). Each raises :class:`~bolide.base.errors.RemoteError` for a refusal (through
:func:`bolide.client.rpc.call`), :class:`~bolide.base.errors.ProtocolError` for an answer it
cannot parse, and the transport's errors. The broker's own requests to the controller stay in
:mod:`bolide.broker.controller_mode`."""

from __future__ import annotations

from bolide.client.rpc.call import call
from bolide.protocol.bodies.controller import BrokerReplicasInfo
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import GetMetadataInfoResponseHeader
from bolide.remoting import ClientPool

__all__ = ["get_controller_metadata", "get_sync_state_data"]


async def get_controller_metadata(
    pool: ClientPool, address: str, timeout_ms: int
) -> GetMetadataInfoResponseHeader:
    """CONTROLLER_GET_METADATA_INFO: the leading controller's id and address, and the peers."""
    request = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
    response = await call(pool, address, request, timeout_ms)
    return GetMetadataInfoResponseHeader.from_ext_fields(response.ext_fields)


async def get_sync_state_data(
    pool: ClientPool, address: str, timeout_ms: int
) -> BrokerReplicasInfo:
    """CONTROLLER_GET_SYNC_STATE_DATA (no names: every broker set) from the leader at
    ``address``: per broker set the master, epochs and SyncStateSet."""
    request = RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
    response = await call(pool, address, request, timeout_ms)
    return BrokerReplicasInfo.from_json(response.body)

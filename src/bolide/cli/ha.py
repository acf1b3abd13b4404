"""``bolide ha status --controller H:P``: what a controller (controller mode) knows: the
leading controller and its peers, and per broker set the master, ``masterEpoch``, the
SyncStateSet with its epoch, and each replica's address and liveness as the leader sees it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from bolide.base.errors import BolideError
from bolide.cli.common import JsonOption, Output, exit_code_of, fail
from bolide.protocol.bodies.controller import BrokerReplicasInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.controller import GetMetadataInfoResponseHeader
from bolide.remoting import ClientPool
from bolide.remoting.loop import run

__all__ = ["ha_app", "register"]

ha_app = typer.Typer(
    help="Controller mode: leader, epochs and SyncStateSets.", no_args_is_help=True
)

ControllerOption = Annotated[
    str, typer.Option("--controller", help="A controller, host:port (any: it names the leader).")
]


def register(root: typer.Typer) -> None:
    """Add the ``ha`` group to ``root``."""
    root.add_typer(ha_app, name="ha")


@ha_app.command("status")
def ha_status(controller: ControllerOption, json_output: JsonOption = False) -> None:
    """The controller leader, and every broker set's master, epochs and SyncStateSet."""
    output = Output(json_output)
    try:
        status = run(_fetch(controller))
    except (BolideError, OSError) as error:
        fail(output, f"controller {controller}: {error}", exit_code_of(error))
    if json_output:
        output.json(status)
        return
    output.line(f"controller leader: {status['leader'] or '-'}   peers: {status['peers'] or '-'}")
    rows = []
    for name, info in status["brokerSets"].items():
        for replica in info["inSyncReplicas"] + info["notInSyncReplicas"]:
            rows.append(
                (
                    name,
                    replica["brokerId"],
                    replica["brokerAddress"],
                    "master" if replica["brokerId"] == info.get("masterBrokerId") else "replica",
                    info["masterEpoch"],
                    "yes" if replica in info["inSyncReplicas"] else "no",
                    info["syncStateSetEpoch"],
                    "yes" if replica["alive"] else "no",
                )
            )
    output.table(
        None,
        ("broker", "id", "address", "role", "master epoch", "in sync", "SSS epoch", "alive"),
        rows,
    )


async def _fetch(controller: str) -> dict[str, Any]:
    pool = ClientPool()
    try:
        meta = await pool.invoke(
            controller, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
        )
        header = GetMetadataInfoResponseHeader.from_ext_fields(meta.ext_fields)
        leader = header.controller_leader_address
        data = await pool.invoke(
            leader or controller,
            RemotingCommand.request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA),
        )
        if data.code != ResponseCode.SUCCESS:
            raise BolideError(f"GET_SYNC_STATE_DATA answered {data.code}: {data.remark}")
        table = BrokerReplicasInfo.from_json(data.body).replicas_info_table
        return {
            "leader": leader,
            "peers": header.peers,
            "brokerSets": {name: info.to_object() for name, info in table.items()},
        }
    finally:
        await asyncio.shield(pool.close())

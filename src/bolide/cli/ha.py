"""``bolide ha status --controller H:P``: what a controller (controller mode) knows: the
leading controller and its peers, and per broker set the master, ``masterEpoch``, the
SyncStateSet with its epoch, and each replica's address and liveness as the leader sees it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.cli.common import JsonOption, Output, exit_code_of, fail
from bolide.client.rpc.controller import get_controller_metadata, get_sync_state_data
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
        timeout_ms = limits.REQUEST_TIMEOUT_DEFAULT_MS
        header = await get_controller_metadata(pool, controller, timeout_ms)
        leader = header.controller_leader_address
        replicas = await get_sync_state_data(pool, leader or controller, timeout_ms)
        table = replicas.replicas_info_table
        return {
            "leader": leader,
            "peers": header.peers,
            "brokerSets": {name: info.to_object() for name, info in table.items()},
        }
    finally:
        await asyncio.shield(pool.close())

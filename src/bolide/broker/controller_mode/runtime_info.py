"""Controller mode's part of GET_BROKER_RUNTIME_INFO (Bolide's keys, strings), which the
dashboard's cluster page shows:

* ``controllerBrokerId``: the id the controller gave this broker ("" before it has one);
* ``controllerRole``: ``master``, ``slave``, or ``none`` before the controller gave a role;
* ``controllerMasterEpoch`` / ``controllerMasterBrokerId``: the epoch it leads or follows and
  that epoch's master;
* ``controllerSyncStateSet`` (ids, comma-separated) and ``controllerSyncStateSetEpoch``: the
  SyncStateSet the controller confirmed (a master's; "" on a slave);
* ``controllerRoleSince``: when (epoch ms) it took that role — on a master, when it learned
  it won the election of ``controllerMasterEpoch``;
* ``controllerLeader``, ``controllerFenced``, ``controllerRoleChanges``.
"""

from __future__ import annotations

from bolide.broker.controller_mode.replicas_manager import ReplicasManager

__all__ = ["runtime_info"]


def runtime_info(manager: ReplicasManager) -> dict[str, str]:
    """The keys above for ``manager``'s broker."""
    if manager.role_changed_at_ms is None:
        role = "none"
    else:
        role = "master" if manager.is_master else "slave"
    members = manager.sync_state_set.sync_state_set if manager.is_master else frozenset()
    master = manager.master_broker_id
    return {
        "controllerBrokerId": "" if manager.broker_id is None else str(manager.broker_id),
        "controllerRole": role,
        "controllerMasterEpoch": str(manager.master_epoch),
        "controllerMasterBrokerId": "" if master is None else str(master),
        "controllerSyncStateSet": ",".join(str(member) for member in sorted(members)),
        "controllerSyncStateSetEpoch": str(
            manager.sync_state_set.sync_state_set_epoch if manager.is_master else ""
        ),
        "controllerRoleSince": str(manager.role_changed_at_ms or ""),
        "controllerLeader": manager.leader or "",
        "controllerFenced": str(manager.fenced).lower(),
        "controllerRoleChanges": str(manager.role_changes),
    }

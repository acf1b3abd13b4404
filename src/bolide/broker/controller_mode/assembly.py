"""Wiring a broker into controller mode (docs/replication.md): the epoch-aware roles, the
replicas manager that follows the controller, its metrics and the runtime info it reports.

The broker (bolide.broker.broker) stays the composition root; this is its controller-mode
branch, kept here so the broker's own module holds only what every broker runs.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from bolide.base.clock import Clock
from bolide.base.service import CrashHandler
from bolide.broker.config import BrokerConfig
from bolide.broker.context import BrokerContext
from bolide.broker.controller_mode.broker_roles import RoleParts
from bolide.broker.controller_mode.epoch_roles import EpochBrokerRoles
from bolide.broker.controller_mode.metrics import ControllerModeCollector
from bolide.broker.controller_mode.replicas_manager import ReplicasManager
from bolide.broker.controller_mode.runtime_info import runtime_info
from bolide.broker.controller_mode.settings import ControllerModeSettings
from bolide.broker.ha.replication import Replication
from bolide.broker.metrics.exporter import BrokerMetrics
from bolide.broker.registration import NameServerRegistration
from bolide.store.file_store import FileMessageStore


def follow_controller(
    settings: ControllerModeSettings,
    config: BrokerConfig,
    *,
    context: BrokerContext,
    replication: Replication,
    store: FileMessageStore,
    registration: Callable[[], NameServerRegistration],
    start_master_services: Callable[[], Awaitable[None]],
    ha_port: Callable[[], int],
    own_id: Callable[[], int | None],
    clock: Clock,
    metrics: BrokerMetrics | None,
    on_crash: CrashHandler,
) -> ReplicasManager:
    """Build and start the replicas manager of a controller-mode broker: registration with
    the name servers waits until the controller gives a role. Returns the started manager
    (the caller stops it first at shutdown)."""
    replication.on_released = context.long_polling.check_now  # reads past confirm
    parts = RoleParts(
        replication=replication,
        store=store,
        registration=registration,
        start_registration=lambda: registration().start(),
        start_master_services=start_master_services,
        broker_ip=config.broker_ip1,
        ha_port=ha_port,
        clock=clock,
    )
    roles = EpochBrokerRoles(settings, parts, enter_epoch=context.topics.enter_epoch, own_id=own_id)
    manager = ReplicasManager(
        settings,
        cluster_name=config.broker_cluster_name,
        broker_name=config.broker_name,
        broker_address=config.broker_address,
        store_root=config.store_path_root_dir,
        roles=roles,
        progress=roles,
        clock=clock,
        on_crash=on_crash,
    )
    if metrics is not None:
        labels = (config.broker_cluster_name, config.broker_name, config.broker_ip1)
        metrics.add_collector(ControllerModeCollector(manager, labels))
    replication.controller_runtime_info = functools.partial(runtime_info, manager)
    manager.start()
    return manager

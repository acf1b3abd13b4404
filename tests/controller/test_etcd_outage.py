"""The controller's leadership loop outlives etcd going away (issue 25's chaos run found it
crashing on the etcd client's own error when every endpoint failed, e.g. while a
three-member etcd elected a new leader, leaving a controller that believed it led while its
lease lapsed): it drops leadership once its lease cannot be renewed, and leads again when
etcd is back. A real one-member etcd, killed and restarted on its data."""

from __future__ import annotations

import pytest

from bolide.controller.etcd_store import EtcdUnreachableError
from bolide.testing.etcd import EtcdCluster
from bolide.testing.waiting import until
from tests.controller.support import running_controller, wait_leader

pytestmark = pytest.mark.timeout(120)


async def test_the_leadership_loop_outlives_an_etcd_outage(etcd: EtcdCluster) -> None:
    async with running_controller(etcd.endpoints) as controller:
        await wait_leader(controller)
        etcd.kill(0)
        with pytest.raises(EtcdUnreachableError, match=etcd.members[0].endpoint):
            await controller.store.keep_alive()  # a BolideError the loops retry
        await until(lambda: not controller.is_leader)  # its lease could not be renewed
        await etcd.restart(0)
        await until(lambda: controller.is_leader)

"""bolide.testing.etcd: a member whose port was taken between ``free_port`` and etcd's bind
(another process, or a second pytest worker) starts again on fresh ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bolide.testing.etcd import EtcdCluster, etcd_binary

pytestmark = pytest.mark.skipif(etcd_binary() is None, reason="`make test` installs etcd")


async def test_a_client_port_taken_before_the_start_moves_to_a_free_one(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        cluster = EtcdCluster(tmp_path)
        cluster.members[0].client_port = taken
        async with cluster:
            assert cluster.members[0].client_port != taken
            assert await cluster.leader_index() == 0

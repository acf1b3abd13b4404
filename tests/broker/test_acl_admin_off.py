"""The ACL admin requests (50-54) on a broker with ``aclEnable=false``: each answers its own
FAILED code (or SYSTEM_ERROR) saying the ACL is off, over a real socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from tests.integration.wire import connected


@pytest.mark.parametrize(
    ("code", "refused"),
    [
        (
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
        ),
        (RequestCode.DELETE_ACL_CONFIG, ResponseCode.DELETE_ACL_CONFIG_FAILED),
        (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, ResponseCode.SYSTEM_ERROR),
        (
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
        ),
        (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, ResponseCode.SYSTEM_ERROR),
    ],
)
async def test_each_acl_admin_request_is_refused_while_the_acl_is_off(
    tmp_path: Path, code: int, refused: int
) -> None:
    async with connected(tmp_path) as (_, wire):
        response = await wire.invoke(RemotingCommand.request(code, {"accessKey": "RocketMQ"}))
    assert response.code == refused
    assert response.remark == "ACL is not enabled on this broker (broker.conf aclEnable=false)"

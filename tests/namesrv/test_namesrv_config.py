"""GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318) over a socket."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bolide.namesrv.config_handlers import parse_properties_text
from bolide.namesrv.namesrv import NameServer
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Dispatcher


@pytest.fixture
async def served() -> AsyncIterator[tuple[NameServer, ClientPool]]:
    namesrv = NameServer()
    await namesrv.start()
    pool = ClientPool(Dispatcher())
    try:
        yield namesrv, pool
    finally:
        await pool.close()
        await namesrv.stop()


async def ask(
    pool: ClientPool, namesrv: NameServer, code: int, body: bytes = b""
) -> RemotingCommand:
    return await pool.invoke(namesrv.address, RemotingCommand.request(code, None, body), 3_000)


async def test_get_config_lists_the_settings(served: tuple[NameServer, ClientPool]) -> None:
    namesrv, pool = served
    response = await ask(pool, namesrv, RequestCode.GET_NAMESRV_CONFIG)
    assert response.code == ResponseCode.SUCCESS
    settings = parse_properties_text(response.body.decode())
    assert settings["listenPort"] == str(namesrv.port)
    assert settings["orderMessageEnable"] == "false"


async def test_update_switches_order_messages(served: tuple[NameServer, ClientPool]) -> None:
    namesrv, pool = served
    response = await ask(
        pool, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG, b"orderMessageEnable=true\n"
    )
    assert response.code == ResponseCode.SUCCESS
    after = await ask(pool, namesrv, RequestCode.GET_NAMESRV_CONFIG)
    assert "orderMessageEnable=true" in after.body.decode()


@pytest.mark.parametrize(
    ("body", "code", "remark"),
    [
        (b"kvConfigPath=/tmp/x", ResponseCode.NO_PERMISSION, "black list"),
        (b"listenPort=1", ResponseCode.SYSTEM_ERROR, "listenPort"),
        (b"noSuchKey=1", ResponseCode.SYSTEM_ERROR, "noSuchKey"),
        (b"orderMessageEnable=maybe", ResponseCode.SYSTEM_ERROR, "true or false"),
        (b"not a property line", ResponseCode.SYSTEM_ERROR, "string2Properties"),
    ],
)
async def test_update_refuses_by_name(
    served: tuple[NameServer, ClientPool], body: bytes, code: int, remark: str
) -> None:
    namesrv, pool = served
    response = await ask(pool, namesrv, RequestCode.UPDATE_NAMESRV_CONFIG, body)
    assert response.code == code
    assert remark in (response.remark or "")
    settings = parse_properties_text((await ask(pool, namesrv, 319)).body.decode())
    assert settings["orderMessageEnable"] == "false"

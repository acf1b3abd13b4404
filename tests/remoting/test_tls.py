"""TLS on a remoting server: enforcing (TLS only), permissive (both on one port), client
certificates, and the errors for unusable files."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.errors import ConfigError, ConnectionClosedError
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher, RemotingServer
from bolide.remoting.tls import ClientAuth, TlsClientSettings, TlsMode, TlsServerSettings
from tests.remoting.tls_certs import KEY_PASSWORD, CertificateFiles, make_certificates

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return make_certificates(tmp_path_factory.mktemp("certs"))


async def _echo(connection: Connection, request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, remark="tls" if _is_tls(connection) else "")


def _is_tls(connection: Connection) -> bool:
    transport = connection._transport
    return transport is not None and transport.get_extra_info("ssl_object") is not None


async def _server(settings: TlsServerSettings) -> RemotingServer:
    dispatcher = Dispatcher()
    dispatcher.register(RequestCode.GET_BROKER_RUNTIME_INFO, _echo, family="admin")
    server = RemotingServer(dispatcher, "127.0.0.1", 0, tls=settings)
    await server.start()
    return server


async def _ask(pool: ClientPool, address: str) -> str | None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    response = await pool.invoke(address, request, 5_000)
    assert response.code == ResponseCode.SUCCESS
    return response.remark


@pytest.fixture
async def pools(certs: CertificateFiles) -> AsyncIterator[dict[str, ClientPool]]:
    made = {
        "plain": ClientPool(),
        "tls": ClientPool(tls=TlsClientSettings(trust_cert_path=certs.ca)),
        "tls-client-cert": ClientPool(
            tls=TlsClientSettings(
                trust_cert_path=certs.ca, cert_path=certs.client_cert, key_path=certs.client_key
            )
        ),
        "untrusting": ClientPool(tls=TlsClientSettings(trust_cert_path=certs.other_ca)),
    }
    yield made
    for pool in made.values():
        await pool.close()


def _settings(certs: CertificateFiles, mode: TlsMode, **extra: object) -> TlsServerSettings:
    return TlsServerSettings(
        mode=mode,
        cert_path=certs.server_cert,
        key_path=certs.server_key,
        **extra,  # type: ignore[arg-type]
    )


async def test_enforcing_serves_tls_and_refuses_plain(
    certs: CertificateFiles, pools: dict[str, ClientPool]
) -> None:
    server = await _server(_settings(certs, TlsMode.ENFORCING))
    try:
        assert await _ask(pools["tls"], server.address) == "tls"
        with pytest.raises(ConnectionClosedError):
            await _ask(pools["plain"], server.address)
        with pytest.raises(ConnectionClosedError, match="CERTIFICATE_VERIFY_FAILED"):
            await _ask(pools["untrusting"], server.address)
        assert await _ask(pools["tls"], server.address) == "tls"  # still serving
    finally:
        await server.stop()


async def test_permissive_serves_both_on_one_port(
    certs: CertificateFiles, pools: dict[str, ClientPool]
) -> None:
    server = await _server(_settings(certs, TlsMode.PERMISSIVE))
    try:
        assert await _ask(pools["plain"], server.address) == ""
        assert await _ask(pools["tls"], server.address) == "tls"
        assert len(server.connections) == 2
    finally:
        await server.stop()


async def test_permissive_drops_a_peer_that_closes_before_sending(
    certs: CertificateFiles, pools: dict[str, ClientPool]
) -> None:
    server = await _server(_settings(certs, TlsMode.PERMISSIVE))
    try:
        host, port = server.address.rsplit(":", 1)
        for _ in range(3):
            _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            await writer.wait_closed()
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"\x00\x00\x00\x05junk!")  # not a frame anyone can read
        await writer.drain()
        assert await _ask(pools["plain"], server.address) == ""  # still serving
        assert await _ask(pools["tls"], server.address) == "tls"
        writer.close()
        await writer.wait_closed()
    finally:
        await server.stop()


async def test_required_client_certificate(
    certs: CertificateFiles, pools: dict[str, ClientPool]
) -> None:
    settings = _settings(
        certs, TlsMode.ENFORCING, trust_cert_path=certs.ca, client_auth=ClientAuth.REQUIRE
    )
    server = await _server(settings)
    try:
        assert await _ask(pools["tls-client-cert"], server.address) == "tls"
        with pytest.raises(ConnectionClosedError):
            await _ask(pools["tls"], server.address)
    finally:
        await server.stop()


async def test_an_encrypted_key_with_its_password(
    certs: CertificateFiles, pools: dict[str, ClientPool]
) -> None:
    settings = TlsServerSettings(
        TlsMode.ENFORCING, certs.server_cert, certs.encrypted_server_key, key_password=KEY_PASSWORD
    )
    server = await _server(settings)
    try:
        assert await _ask(pools["tls"], server.address) == "tls"
    finally:
        await server.stop()
    wrong = TlsServerSettings(
        TlsMode.ENFORCING, certs.server_cert, certs.encrypted_server_key, key_password="wrong"
    )
    with pytest.raises(ConfigError, match="unusable"):
        wrong.context()


async def test_unusable_files_are_configuration_errors(
    certs: CertificateFiles, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"needs tls\.server\.certPath"):
        await _server(TlsServerSettings(mode=TlsMode.ENFORCING))
    with pytest.raises(ConfigError, match="is not a readable file"):
        await _server(
            TlsServerSettings(TlsMode.PERMISSIVE, tmp_path / "none.pem", certs.server_key)
        )
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"\x00not a certificate")
    with pytest.raises(ConfigError, match="unusable"):
        await _server(TlsServerSettings(TlsMode.ENFORCING, garbage, certs.server_key))
    with pytest.raises(ConfigError, match="trustCertPath"):
        _settings(certs, TlsMode.ENFORCING, client_auth=ClientAuth.REQUIRE).context()

"""A name server and broker with TLS and the ACL together, over real sockets: Bolide's producer
and push consumer over TLS in enforcing mode, a plain client refused there and accepted in
permissive mode; the name server's own ACL (route lookups need a signature, broker
registration an admin account given by innerClientAuthenticationCredentials)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.base.errors import ConnectionClosedError, RemoteError
from bolide.base.types import Address
from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.producer.producer import Producer
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.message import Message, MessageExt
from bolide.remoting import ClientPool
from bolide.remoting.tls import TlsClientSettings, TlsMode, TlsServerSettings
from bolide.testing.cluster import Cluster
from tests.remoting.tls_certs import CertificateFiles, make_certificates

pytestmark = pytest.mark.timeout(120)

TOPIC = "SecureOrders"
ACCOUNTS = """
accounts:
  - accessKey: appUser1
    secretKey: app-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: brokerInner
    secretKey: inner-secret
    admin: true
"""
WAIT_S = 30.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _tls_keys(certs: CertificateFiles, mode: str) -> dict[str, str]:
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.enable": "true",
        "tls.client.trustCertPath": str(certs.ca),
    }


def _write_accounts(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    return acl_file


async def _secure_cluster(root: Path, certs: CertificateFiles, mode: str) -> Cluster:
    acl_file = _write_accounts(root)
    server_tls = TlsServerSettings(TlsMode(mode), certs.server_cert, certs.server_key)
    settings = {
        **_tls_keys(certs, mode),
        "aclEnable": "true",
        "aclFile": str(acl_file),
        "innerClientAuthenticationCredentials": json.dumps(
            {"accessKey": "brokerInner", "secretKey": "inner-secret"}
        ),
    }
    cluster = Cluster(
        root / "cluster",
        settings=settings,
        namesrv_options={"tls": server_tls, "acl_file": acl_file},
    )
    await cluster.start()
    return cluster


@pytest.fixture
async def enforcing(tmp_path: Path, certs: CertificateFiles) -> AsyncIterator[Cluster]:
    cluster = await _secure_cluster(tmp_path, certs, "enforcing")
    try:
        yield cluster
    finally:
        await cluster.stop()


def _client_tls(certs: CertificateFiles) -> TlsClientSettings:
    return TlsClientSettings(trust_cert_path=certs.ca)


async def test_producer_and_push_consumer_over_tls_in_enforcing_mode(
    enforcing: Cluster, certs: CertificateFiles
) -> None:
    tls = _client_tls(certs)
    async with AdminClient(enforcing.namesrv_address, access_key="brokerInner",
                           secret_key="inner-secret", tls=tls) as admin:  # fmt: skip
        await admin.create_topic(TOPIC, queue_count=2)
    producer = Producer(
        "secure-producers",
        namesrv=enforcing.namesrv_address,
        access_key="appUser1",
        secret_key="app-secret",
        tls=tls,
    )
    async with producer:
        for index in range(5):
            await producer.send(Message(TOPIC, f"secret {index}".encode()))
    received: list[bytes] = []
    done = asyncio.Event()

    async def listener(messages: list[MessageExt]) -> ConsumeResult:
        received.extend(m.body for m in messages)
        if len(received) >= 5:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer("secure-consumers", namesrv=enforcing.namesrv_address,
                            consume_from=ConsumeFrom.FIRST_OFFSET, access_key="appUser1",
                            secret_key="app-secret", tls=tls)  # fmt: skip
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), WAIT_S)
    assert sorted(received) == [f"secret {i}".encode() for i in range(5)]


async def test_plain_client_refused_in_enforcing_mode(enforcing: Cluster) -> None:
    pool = ClientPool()
    try:
        for address in (enforcing.namesrv_address, enforcing.brokers[0].address):
            request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            with pytest.raises(ConnectionClosedError):
                await pool.invoke(address, request, 5_000)
    finally:
        await pool.close()


async def test_permissive_accepts_plain_and_tls_clients(
    tmp_path: Path, certs: CertificateFiles
) -> None:
    cluster = await _secure_cluster(tmp_path, certs, "permissive")
    try:
        for tls in (None, _client_tls(certs)):
            async with AdminClient(cluster.namesrv_address, access_key="brokerInner",
                                   secret_key="inner-secret", tls=tls) as admin:  # fmt: skip
                brokers = await admin.list_brokers()
                assert [b.broker_name for b in brokers] == ["broker-a"]
    finally:
        await cluster.stop()


async def test_name_server_acl(enforcing: Cluster, certs: CertificateFiles) -> None:
    # The broker registered (over TLS) with its inner admin account.
    assert enforcing.namesrvs[0].routes.is_live(Address(enforcing.brokers[0].address))
    pool = ClientPool(tls=_client_tls(certs))
    try:
        route = {"topic": "TBW102"}
        unsigned = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, route)
        response = await pool.invoke(enforcing.namesrv_address, unsigned, 5_000)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "No accessKey is configured" in (response.remark or "")
        signed = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, route)
        sign_request(signed, "appUser1", "app-secret")
        response = await pool.invoke(enforcing.namesrv_address, signed, 5_000)
        assert response.code == ResponseCode.SUCCESS
        wipe = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TBW102"})
        sign_request(wipe, "appUser1", "app-secret")
        response = await pool.invoke(enforcing.namesrv_address, wipe, 5_000)
        assert "is not admin" in (response.remark or "")
    finally:
        await pool.close()
    async with AdminClient(enforcing.namesrv_address, access_key="appUser1",
                           secret_key="wrong-secret", tls=_client_tls(certs)) as admin:  # fmt: skip
        with pytest.raises(RemoteError, match="Check signature failed"):
            await admin.list_brokers()

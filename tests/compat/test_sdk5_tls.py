"""TLS on the 5.x gRPC proxy (issue 29, finding 10), with the official 5.x SDK over TLS.

``bolide standalone`` takes the remoting port's ``tls.server.*`` keys for its gRPC port too:
enforcing serves TLS only (a plain HTTP/2 client is refused), permissive serves both on one
port. The SDK runs in a child process so that gRPC trusts the test CA
(``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` is read once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bolide
from bolide.remoting.tls import TlsClientSettings
from tests.compat.sdk5_support import (
    SDK_REQUEST_TIMEOUT_S,
    configuration,
    sdk_message,
    standalone,
)
from tests.remoting.tls_certs import CertificateFiles, make_certificates

pytestmark = [pytest.mark.compat, pytest.mark.timeout(240)]

pytest.importorskip("rocketmq.v5")
grpc = pytest.importorskip("grpc")

CHILD_TIMEOUT_S = 120
SDK_OVER_TLS = """
import json, sys
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer

endpoint, topic, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
config = ClientConfiguration(endpoint, Credentials(), request_timeout=timeout)
producer = Producer(config, (topic,), tls_enable=True)
producer.startup()
consumer = SimpleConsumer(
    config, "tls5", {topic: FilterExpression("*")}, await_duration=2, tls_enable=True
)
consumer.startup()
try:
    message = Message()
    message.topic = topic
    message.body = b"over TLS"
    receipt = producer.send(message)
    got = []
    for _ in range(30):
        got.extend(consumer.receive(16, 30))
        if got:
            break
    for item in got:
        consumer.ack(item)
    print(json.dumps({"sent": receipt.message_id, "got": [m.message_id for m in got]}))
finally:
    consumer.shutdown()
    producer.shutdown()
"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertificateFiles:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _conf(tmp_path: Path, certs: CertificateFiles, mode: str) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"tls.server.mode={mode}\ntls.server.certPath={certs.server_cert}\n"
        f"tls.server.keyPath={certs.server_key}\n"
        f"tls.enable=true\ntls.client.trustCertPath={certs.ca}\n"
    )
    return conf


def _create_topic(namesrv: str, certs: CertificateFiles, topic: str) -> None:
    tls = TlsClientSettings(trust_cert_path=certs.ca)
    with bolide.AdminClient(namesrv, tls=tls) as admin:
        admin.create_topic(topic, queue_count=2)


def _sdk_over_tls(endpoint: str, topic: str, certs: CertificateFiles) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SDK_OVER_TLS, endpoint, topic, str(SDK_REQUEST_TIMEOUT_S)],
        env={**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(certs.ca)},
        capture_output=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    result: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def _plain_query_route(endpoint: str) -> None:
    """One plain-HTTP/2 gRPC call (QueryRoute); raises grpc.RpcError when refused."""
    from bolide.proxy.proto import service_pb2 as spb

    with grpc.insecure_channel(endpoint) as channel:
        call = channel.unary_unary(
            "/apache.rocketmq.v2.MessagingService/QueryRoute",
            request_serializer=spb.QueryRouteRequest.SerializeToString,
            response_deserializer=spb.QueryRouteResponse.FromString,
        )
        call(spb.QueryRouteRequest(), timeout=10)


def test_enforcing_serves_the_sdk_over_tls_and_refuses_plain(
    tmp_path: Path, certs: CertificateFiles
) -> None:
    conf = _conf(tmp_path, certs, "enforcing")
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        _create_topic(server.namesrv, certs, "Tls5")
        result = _sdk_over_tls(server.proxy, "Tls5", certs)
        assert result["got"] == [result["sent"]]
        with pytest.raises(grpc.RpcError) as refused:
            _plain_query_route(server.proxy)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_permissive_serves_tls_and_plain_on_one_port(
    tmp_path: Path, certs: CertificateFiles
) -> None:
    from rocketmq import Producer

    conf = _conf(tmp_path, certs, "permissive")
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        _create_topic(server.namesrv, certs, "Tls5p")
        result = _sdk_over_tls(server.proxy, "Tls5p", certs)
        assert result["got"] == [result["sent"]]
        plain = Producer(configuration(server.proxy), ("Tls5p",))  # tls_enable=False
        plain.startup()
        try:
            assert plain.send(sdk_message("Tls5p", b"plain")).message_id
        finally:
            plain.shutdown()

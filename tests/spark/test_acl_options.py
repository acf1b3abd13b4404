"""The data source's ACL and TLS options (accessKey, secretKey, tls, tlsTrustCertPath,
tlsVerifyServer), and the sink and reader tasks signing for a broker with aclEnable=true
(called in this process the way an executor calls them, no JVM)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from bolide.base.errors import ConfigError, RemoteError
from bolide.protocol.bodies import TopicConfig
from bolide.spark.client import BlockingClient
from bolide.spark.options import ClusterAccess, parse_read_options, parse_write_options
from bolide.spark.queues import fetch_bounds, list_queues
from bolide.spark.writer import BolideBatchWriter
from tests.spark.conftest import BackgroundCluster

ACCOUNTS = """
accounts:
  - accessKey: sparkUser1
    secretKey: spark-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
SCHEMA = StructType([StructField("body", StringType())])


def test_options_are_parsed_and_checked() -> None:
    options = parse_write_options(
        {"namesrv": "h:1", "topic": "t", "accessKey": "sparkUser1", "secretKey": "s3cret-x",
         "tls": "true", "tlsTrustCertPath": "/etc/ca.pem", "tlsVerifyServer": "false"}
    )  # fmt: skip
    assert options.access == ClusterAccess("sparkUser1", "s3cret-x", True, "/etc/ca.pem", False)
    assert "s3cret-x" not in repr(options.access)
    client = options.access.client_options()
    assert client["access_key"] == "sparkUser1" and client["tls"].verify_server is False
    read = parse_read_options({"namesrv": "h:1", "topic": "t"}, streaming=False)
    assert read.access == ClusterAccess()
    with pytest.raises(ConfigError, match="accessKey and secretKey go together"):
        parse_read_options({"namesrv": "h:1", "topic": "t", "accessKey": "a"}, streaming=False)


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    started = BackgroundCluster(tmp_path, settings={"aclEnable": "true", "aclFile": str(acl_file)})
    started.start()
    try:
        broker = started.broker
        assert broker is not None
        started.run(broker.context.topics.update_topic_config(TopicConfig("sparkAcl", 2, 2)))
        started.run(broker.registration.register_once())
        yield started
    finally:
        started.stop()


def _batch(bodies: list[str]) -> pa.RecordBatch:
    schema = pa.schema([("body", pa.string())])
    return pa.RecordBatch.from_pylist([{"body": b} for b in bodies], schema=schema)


def test_sink_signs_with_the_options(acl_cluster: BackgroundCluster) -> None:
    base = {"namesrv": acl_cluster.namesrv_address, "topic": "sparkAcl"}
    signed = BolideBatchWriter(
        parse_write_options({**base, "accessKey": "sparkUser1", "secretKey": "spark-secret"}),
        SCHEMA,
    )
    report = signed.write(iter([_batch(["a", "b", "c"])]))
    assert report.rows == 3
    unsigned = BolideBatchWriter(parse_write_options(base), SCHEMA)
    with pytest.raises(RemoteError, match="No accessKey is configured"):
        unsigned.write(iter([_batch(["refused"])]))
    broker = acl_cluster.broker
    assert broker is not None
    stored = sum(broker.context.store.max_offset("sparkAcl", queue) for queue in (0, 1))
    assert stored == 3


def test_reader_client_signs(acl_cluster: BackgroundCluster) -> None:
    for access, allowed in ((ClusterAccess("sparkUser1", "spark-secret"), True),
                            (ClusterAccess(), False)):  # fmt: skip
        client = BlockingClient(acl_cluster.namesrv_address, "test", access)
        try:
            queues = client.run(list_queues(client.instance, ["sparkAcl"]))
            if allowed:
                assert len(client.run(fetch_bounds(client.instance, queues))) == 2
            else:
                with pytest.raises(RemoteError, match="No accessKey"):
                    client.run(fetch_bounds(client.instance, queues))
        finally:
            client.close()

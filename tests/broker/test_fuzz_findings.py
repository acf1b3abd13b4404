"""Broker defects found by bench/fuzz_remoting.py (issue 30), each pinned over real sockets.

* DELETE_TOPIC_IN_BROKER (215) with a topic name that is no valid topic name: the name is a
  directory of the store, so ``a\\0b`` crashed the handler (``rmtree``: "embedded null byte",
  a traceback in the log) and ``..`` would have removed the store's own directory.
* UPDATE_AND_CREATE_TOPIC (17) with ``topicSysFlag`` 2**64: stored, then every JSON write of
  the topic table failed, and the broker's registration service stopped for good ("cannot
  write int as JSON"): the name servers would drop the broker. Header integers are now
  refused outside a Java long.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import CreateTopicRequestHeader, TopicRequestHeader
from bolide.remoting import ClientPool
from bolide.store.file_store import FileMessageStore
from tests.broker.admin_support import admin_cluster, fill
from tests.integration.wire import BrokerWire

pytestmark = pytest.mark.timeout(60)

TOPIC = "FuzzKept"


@pytest.mark.parametrize("name", ["..", ".", "a\x00b", "../consumequeue", "x/y", "a" * 300])
async def test_delete_topic_refuses_a_name_that_is_no_topic_name(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with admin_cluster(tmp_path) as cluster:
        broker = cluster.brokers[0]
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, broker.address)
            await fill(wire, TOPIC, {0: 2})
            store = broker.context.store
            assert isinstance(store, FileMessageStore)
            store_config = store.config
            queue_dir = store_config.consume_queue_dir
            assert (queue_dir / TOPIC).is_dir()

            fields = TopicRequestHeader(name).to_ext_fields()
            request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, fields)
            response = await wire.invoke(request)

            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark is not None and "cannot delete topic" in response.remark
            assert "crashed" not in caplog.text
            # Nothing of the store was touched: its directories and the topic's queue remain.
            assert queue_dir.is_dir() and (queue_dir / TOPIC).is_dir()
            assert store_config.commit_log_dir.is_dir()
            assert store.max_offset(TOPIC, 0) == 2
        finally:
            await pool.close()


@pytest.mark.parametrize("value", [str(2**64), str(2**63), str(-(2**63) - 1)])
async def test_a_header_integer_outside_a_java_long_is_refused(tmp_path: Path, value: str) -> None:
    async with admin_cluster(tmp_path) as cluster:
        broker = cluster.brokers[0]
        pool = ClientPool()
        try:
            wire = BrokerWire(pool, broker.address)
            fields = CreateTopicRequestHeader(TOPIC, "TBW102", 4, 4, 6).to_ext_fields()
            fields["topicSysFlag"] = value
            request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)

            response = await wire.invoke(request)

            assert response.code != ResponseCode.SUCCESS
            assert response.remark is not None and "outside a Java long" in response.remark
            assert broker.context.topics.find(TOPIC) is None
            await broker.context.register_now()  # the registration body still encodes
        finally:
            await pool.close()

"""UPDATE_BROKER_CONFIG (25) written back to the broker's config file (issue 29, finding 9): a
broker drained with brokerPermission comes back drained after a restart; the file keeps its
comments and other lines; a file that cannot be written refuses the update; a broker without
a file warns that the change is not persisted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bolide.base.errors import RemoteError
from bolide.broker.broker import Broker
from bolide.broker.config import BrokerConfig, parse_broker_conf, read_broker_conf
from bolide.broker.config_values import rewrite_broker_conf
from bolide.client import admin_stats
from bolide.client.admin import AdminClient
from bolide.namesrv.namesrv import NameServer

pytestmark = pytest.mark.timeout(120)


def _conf(tmp_path: Path, namesrv: str) -> str:
    return (
        "# drained brokers keep their permission\n"
        "brokerClusterName=DefaultCluster\n"
        "brokerName=broker-p\n"
        "listenPort=0\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
        f"namesrvAddr={namesrv}\n"
        "brokerPermission=6\n"
        "vipChannelEnabled=false\n"
    )


async def _start(config_file: Path | None, config: BrokerConfig) -> Broker:
    broker = Broker(config, config_file=config_file)
    await broker.start()
    return broker


async def test_a_config_update_survives_a_restart(tmp_path: Path) -> None:
    namesrv = NameServer("127.0.0.1", 0)
    await namesrv.start()
    conf = tmp_path / "broker.conf"
    try:
        conf.write_text(_conf(tmp_path, namesrv.address))
        broker = await _start(conf, BrokerConfig.from_mapping(read_broker_conf(conf)))
        try:
            async with AdminClient(namesrv.address) as admin:
                await admin_stats.update_broker_config(
                    admin, broker.address, {"brokerPermission": "4", "longPollingEnable": "false"}
                )
            assert broker.context.config.broker_permission == 4
        finally:
            await broker.stop()
        text = conf.read_text()
        assert text.startswith("# drained brokers keep their permission\n")
        assert "brokerPermission=4\n" in text and "brokerPermission=6" not in text
        assert text.endswith("longPollingEnable=false\n")
        again = await _start(conf, BrokerConfig.from_mapping(read_broker_conf(conf)))
        try:
            assert again.context.config.broker_permission == 4  # still drained
            assert again.context.config.long_polling_enable is False
        finally:
            await again.stop()
    finally:
        await namesrv.stop()


async def test_an_unwritable_file_refuses_and_no_file_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    namesrv = NameServer("127.0.0.1", 0)
    await namesrv.start()
    try:
        config = BrokerConfig.from_mapping(parse_broker_conf(_conf(tmp_path, namesrv.address)))
        not_a_file = tmp_path / "conf-dir"
        not_a_file.mkdir()
        broker = await _start(not_a_file, config)
        try:
            async with AdminClient(namesrv.address) as admin:
                with pytest.raises(RemoteError, match="not applied: cannot write"):
                    await admin_stats.update_broker_config(
                        admin, broker.address, {"brokerPermission": "4"}
                    )
            assert broker.context.config.broker_permission == 6
        finally:
            await broker.stop()
        broker = await _start(None, config)
        try:
            with caplog.at_level(logging.WARNING, logger="bolide.broker"):
                async with AdminClient(namesrv.address) as admin:
                    await admin_stats.update_broker_config(
                        admin, broker.address, {"brokerPermission": "4"}
                    )
            assert broker.context.config.broker_permission == 4
            assert "broker config update not persisted" in caplog.text
        finally:
            await broker.stop()
    finally:
        await namesrv.stop()


def test_rewrite_keeps_other_lines_and_appends_new_keys() -> None:
    text = "a=1\n# c\nb : 2\\\n  continued\n! x\nb=3\n"
    assert rewrite_broker_conf(text, {"b": "9", "d": "4"}) == "a=1\n# c\nb=9\n! x\nb=9\nd=4\n"
    assert rewrite_broker_conf("", {"k": "v"}) == "k=v\n"

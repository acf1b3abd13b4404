"""broker.conf parsing and BrokerConfig typing, defaults and errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bolide.base.errors import ConfigError
from bolide.base.fileio import backup_path
from bolide.broker.config import (
    BrokerConfig,
    BrokerRole,
    ConfigFileWriter,
    FlushDiskType,
    parse_broker_conf,
    parse_delay_levels,
    read_broker_conf,
)
from bolide.broker.security import acl_file_path, tls_server_settings, unhonoured_keys
from bolide.store.config_files import MetadataFile

# The shape of RocketMQ's distributed conf/broker.conf, with the noise real files carry.
SAMPLE = """\ufeff# Licensed to the Apache Software Foundation (ASF)
#  under one or more contributor license agreements.

brokerClusterName = DefaultCluster
brokerName=broker-b
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = SYNC_FLUSH
   namesrvAddr = 10.0.0.1:9876;10.0.0.2:9876;   \t
! an old-style comment
listenPort: 10921
autoCreateTopicEnable=false
messageDelayLevel=1s 5s \\
    1m 2h
"""


def test_parse_broker_conf_handles_comments_blanks_separators_and_continuations() -> None:
    values = parse_broker_conf(SAMPLE)
    assert values == {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-b",
        "brokerId": "0",
        "deleteWhen": "04",
        "fileReservedTime": "48",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "SYNC_FLUSH",
        "namesrvAddr": "10.0.0.1:9876;10.0.0.2:9876;",
        "listenPort": "10921",
        "autoCreateTopicEnable": "false",
        "messageDelayLevel": "1s 5s 1m 2h",
    }


def test_from_mapping_types_every_value() -> None:
    config = BrokerConfig.from_mapping(parse_broker_conf(SAMPLE))
    assert config.broker_name == "broker-b"
    assert config.file_reserved_time_hours == 48
    assert config.file_reserved_time_ms == 48 * 3_600_000
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.broker_role is BrokerRole.ASYNC_MASTER
    assert config.namesrv_addresses == ("10.0.0.1:9876", "10.0.0.2:9876")
    assert config.listen_port == 10921
    assert config.auto_create_topic_enable is False
    assert config.message_delay_levels_ms == (1_000, 5_000, 60_000, 7_200_000)
    assert config.delete_when_hours == (4,)
    assert config.broker_address == "127.0.0.1:10921"


def test_defaults_are_rocketmq_defaults() -> None:
    config = BrokerConfig()
    assert config.broker_cluster_name == "DefaultCluster"
    assert config.broker_name == "broker-a"
    assert config.broker_id == 0
    assert config.listen_port == 10911
    assert config.default_topic_queue_nums == 8
    assert config.broker_permission == 6
    assert config.auto_create_topic_enable and config.auto_create_subscription_group
    assert config.long_polling_enable and config.notify_consumer_ids_changed_enable
    assert config.short_polling_time_ms == 1_000
    assert config.flush_consumer_offset_interval_ms == 5_000
    assert config.register_name_server_period_ms == 30_000
    assert config.region_id == "DefaultRegion"
    assert config.trace_on is True
    assert config.max_message_size_bytes == 4 * 1024 * 1024
    assert config.commit_log_segment_bytes == 1024**3
    assert config.file_reserved_time_hours == 72
    assert config.disk_max_used_space_ratio_percent == 75
    assert len(config.message_delay_levels_ms) == 18
    assert config.message_delay_levels_ms[2] == 10_000
    assert config.message_delay_levels_ms[-1] == 7_200_000
    assert config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert not config.enable_property_filter and not config.reject_transaction_message


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("listenPort", "ten", "an integer"),
        ("listenPort", "70000", "between 0 and 65535"),
        ("brokerId", "-1", "between 0"),
        ("autoCreateTopicEnable", "ture", "true or false"),
        ("flushDiskType", "SOMETIMES", "ASYNC_FLUSH or SYNC_FLUSH"),
        ("brokerRole", "MASTER", "ASYNC_MASTER or SYNC_MASTER or SLAVE"),
        ("namesrvAddr", "10.0.0.1", "host:port"),
        ("namesrvAddr", "10.0.0.1:0", "ports between 1 and 65535"),
        ("messageDelayLevel", "1s 5x", "unit s, m, h or d"),
        ("messageDelayLevel", "0s", "positive delays"),
        ("deleteWhen", "25", "hours of the day"),
        ("diskMaxUsedSpaceRatio", "99", "between 10 and 95"),
        ("diskSpaceCleanForciblyRatio", "90", "between 30 and 85"),
        ("defaultTopicQueueNums", "0", "between 1 and 1024"),
        ("mapedFileSizeConsumeQueue", "6000001", "multiple of 20"),
        ("registerNameServerPeriod", "120000", "between 1 and 119999"),
        ("brokerName", "", "non-empty"),
    ],
)
def test_bad_value_raises_config_error_naming_key_and_value(
    key: str, value: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_mapping({key: value})
    message = str(caught.value)
    assert key in message
    assert repr(value) in message or value in message
    assert expected in message


def test_line_without_separator_is_an_error_with_its_line_number() -> None:
    with pytest.raises(ConfigError, match="line 3"):
        parse_broker_conf("# comment\nbrokerId=0\nlistenPort 10911\n")
    with pytest.raises(ConfigError, match="empty key"):
        parse_broker_conf("=5\n")


def test_unknown_keys_are_kept_and_named_as_unhonoured() -> None:
    config = BrokerConfig.from_mapping(
        {
            "brokerName": "b",
            "sendMessageThreadPoolNums": "16",
            "notifyConsumerIdsChangedEnable": "false",
        }
    )
    assert config.extra_properties == {"sendMessageThreadPoolNums": "16"}
    # the broker logs these in one warning when it starts (tests/integration/test_acl_broker.py)
    # notifyConsumerIdsChangedEnable is honoured (the broker-wide switch of rebalance notices)
    assert unhonoured_keys(config) == ["sendMessageThreadPoolNums"]
    assert config.to_properties()["sendMessageThreadPoolNums"] == "16"


CREDENTIALS = '{"accessKey": "broker01", "secretKey": "s3cret-1"}'


def test_acl_and_tls_keys() -> None:
    config = BrokerConfig.from_mapping(
        {"aclEnable": "true", "tls.server.mode": "Permissive", "tls.server.certPath": "/c.pem",
         "tls.server.keyPath": "/k.pem", "tls.server.need.client.auth": "require",
         "innerClientAuthenticationCredentials": CREDENTIALS,
         "tls.server.keyPassword": "pem-pass-1",
         "storePathRootDir": "/data/store"}
    )  # fmt: skip
    assert acl_file_path(config) == Path("/data/conf/plain_acl.yml")
    tls = tls_server_settings(config)
    assert tls is not None and tls.mode.value == "permissive"
    assert tls.client_auth.value == "require"
    assert tls_server_settings(BrokerConfig()) is None
    assert config.inner_client_credentials == ("broker01", "s3cret-1")
    properties = config.to_properties()
    assert "s3cret-1" not in properties["innerClientAuthenticationCredentials"]
    assert properties["tls.server.keyPassword"] == "******"
    assert "pem-pass-1" not in repr(config) and "s3cret-1" not in repr(config)
    assert tls.key_password == "pem-pass-1"
    assert properties["tls.server.mode"] == "permissive"
    with pytest.raises(ConfigError, match="disabled or permissive or enforcing"):
        BrokerConfig.from_mapping({"tls.server.mode": "strict"})
    with pytest.raises(ConfigError, match="innerClientAuthenticationCredentials") as caught:
        BrokerConfig.from_mapping({"innerClientAuthenticationCredentials": "secret-text"})
    assert "secret-text" not in str(caught.value)


def test_overrides_win_and_accept_field_names_and_plain_values(tmp_path: Path) -> None:
    config = BrokerConfig.from_mapping(
        {"listenPort": "10911", "brokerName": "from-file"},
        {
            "listenPort": 0,
            "store_path_root_dir": tmp_path,
            "flushDiskType": FlushDiskType.SYNC_FLUSH,
            "auto_create_topic_enable": False,
            "namesrvAddr": "127.0.0.1:9876",
        },
    )
    assert config.listen_port == 0
    assert config.broker_name == "from-file"
    assert config.store_path_root_dir == tmp_path
    assert config.config_dir == tmp_path / "config"
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.auto_create_topic_enable is False
    assert config.namesrv_addresses == ("127.0.0.1:9876",)
    with pytest.raises(ConfigError, match="unsupported value type"):
        BrokerConfig.from_mapping({}, {"listenPort": 1.5})


def test_properties_round_trip_to_an_equal_config(tmp_path: Path) -> None:
    config = BrokerConfig(
        store_path_root_dir=tmp_path,
        namesrv_addresses=("a:1", "b:2"),
        delete_when_hours=(4, 16),
        message_delay_levels_ms=(500_000, 86_400_000, 90_000),
    )
    properties = config.to_properties()
    assert properties["deleteWhen"] == "04;16"
    assert properties["messageDelayLevel"] == "500s 1d 90s"
    assert BrokerConfig.from_mapping(properties) == config


def test_keyword_construction_is_validated_too() -> None:
    with pytest.raises(ConfigError, match="listenPort"):
        BrokerConfig(listen_port=-5)
    with pytest.raises(ConfigError, match="maxMessageSize"):
        BrokerConfig().replace(max_message_size_bytes=0)


def test_parse_delay_levels_bounds() -> None:
    assert parse_delay_levels("1s 2m 3h 1d") == (1_000, 120_000, 10_800_000, 86_400_000)
    with pytest.raises(ConfigError):
        parse_delay_levels("")
    with pytest.raises(ConfigError):
        parse_delay_levels("1s " * 65)


def test_read_broker_conf_reports_missing_file_and_bad_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_broker_conf(tmp_path / "absent.conf")
    path = tmp_path / "broker.conf"
    path.write_text("brokerName=x\nnonsense\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broker\.conf.*line 2"):
        read_broker_conf(path)
    path.write_text(SAMPLE, encoding="utf-8")
    assert read_broker_conf(path)["brokerName"] == "broker-b"


def test_store_config_carries_the_store_settings(tmp_path: Path) -> None:
    config = BrokerConfig.from_mapping(
        {
            "storePathRootDir": str(tmp_path),
            "mapedFileSizeCommitLog": "65536",
            "mapedFileSizeConsumeQueue": "2000",
            "flushDiskType": "SYNC_FLUSH",
            "deleteWhen": "02;14",
            "fileReservedTime": "1",
            "diskSpaceCleanForciblyRatio": "80",
            "cleanFileForciblyEnable": "false",
        }
    )
    store = config.store_config()
    store.validate()
    assert store.store_path_root_dir == tmp_path
    assert store.commit_log_segment_bytes == 65_536
    assert store.consume_queue_file_entries == 100
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert store.delete_when_hours == frozenset({2, 14})
    assert store.file_reserved_time_ms == 3_600_000
    assert store.disk_space_clean_forcibly_ratio_percent == 80
    assert not store.clean_file_forcibly_enable
    assert store.message_delay_levels_ms == config.message_delay_levels_ms
    BrokerConfig().store_config().validate()
    assert config.metadata_path(MetadataFile.TOPICS) == tmp_path / "config" / "topics.json"


class _Document:
    def __init__(self) -> None:
        self.version = 0
        self.encodes = 0

    def encode(self) -> bytes:
        self.encodes += 1
        return f'{{"version":{self.version}}}'.encode()


async def test_config_file_writer_skips_unchanged_and_keeps_a_backup(tmp_path: Path) -> None:
    document = _Document()
    writer = ConfigFileWriter(tmp_path / "config" / "doc.json", document)
    assert not writer.pending
    assert await writer.flush() is False
    document.version = 1
    assert writer.pending
    assert await writer.flush() is True
    assert await writer.flush() is False
    document.version = 2
    assert writer.flush_blocking() is True
    assert writer.path.read_bytes() == b'{"version":2}'
    assert backup_path(writer.path).read_bytes() == b'{"version":1}'
    assert document.encodes == 2


async def test_config_file_writer_coalesces_concurrent_flushes(tmp_path: Path) -> None:
    document = _Document()
    writer = ConfigFileWriter(tmp_path / "doc.json", document)
    document.version = 5
    results = await asyncio.gather(*(writer.flush() for _ in range(5)))
    assert results.count(True) == 1
    assert document.encodes == 1
    assert writer.written_version == 5


def test_replication_keys_and_their_defaults() -> None:
    master = BrokerConfig.from_mapping({"listenPort": "10911", "brokerRole": "SYNC_MASTER"})
    assert master.effective_ha_listen_port == 10912  # listenPort + 1, as BrokerStartup sets it
    assert master.ha_master_address == ""
    assert master.slave_read_enable is False
    assert master.access_message_in_memory_max_ratio_percent == 40
    slave = BrokerConfig.from_mapping(
        {
            "brokerId": "1",
            "brokerRole": "SLAVE",
            "haListenPort": "20912",
            "haMasterAddress": "10.0.0.1:10912",
            "slaveReadEnable": "true",
        }
    )
    assert slave.broker_role.is_master is False
    assert slave.effective_ha_listen_port == 20912
    assert slave.ha_master_address == "10.0.0.1:10912"
    assert slave.slave_read_enable is True


def test_a_slave_must_not_have_the_master_id() -> None:
    with pytest.raises(ConfigError, match="brokerId"):
        BrokerConfig.from_mapping({"brokerRole": "SLAVE"})


def test_the_pull_transfer_limits_have_java_defaults_and_bounds() -> None:
    config = BrokerConfig()
    assert config.max_transfer_count_on_message_in_memory == 32
    assert config.max_transfer_bytes_on_message_in_memory == 256 * 1024
    assert config.max_transfer_count_on_message_in_disk == 8
    assert config.max_transfer_bytes_on_message_in_disk == 64 * 1024
    raised = BrokerConfig.from_mapping(
        {"maxTransferCountOnMessageInMemory": "1024", "maxTransferBytesOnMessageInDisk": "1"}
    )
    assert raised.max_transfer_count_on_message_in_memory == 1024
    assert unhonoured_keys(raised) == ["maxTransferBytesOnMessageInDisk"]
    with pytest.raises(ConfigError, match="maxTransferCountOnMessageInMemory"):
        BrokerConfig.from_mapping({"maxTransferCountOnMessageInMemory": "0"})
    with pytest.raises(ConfigError, match="maxTransferBytesOnMessageInMemory"):
        BrokerConfig.from_mapping({"maxTransferBytesOnMessageInMemory": str(64 * 1024 * 1024)})

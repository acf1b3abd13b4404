"""The broker's settings: RocketMQ ``broker.conf`` keys, typed, validated, with RocketMQ defaults.

``broker.conf`` is a Java properties file. :func:`parse_broker_conf` reads its text into
``{key: value}``; :meth:`BrokerConfig.from_mapping` turns those strings (plus overrides from
the command line) into a frozen :class:`BrokerConfig`, raising :class:`ConfigError` that names
the key and the bad value. Keys keep their RocketMQ spelling in files; the Python fields are
snake_case with the unit last:

=============================== ====================================== ===================
broker.conf key                 field                                  default
=============================== ====================================== ===================
brokerClusterName               broker_cluster_name                    DefaultCluster
brokerName                      broker_name                            broker-a (1)
brokerId                        broker_id                              0 (master)
brokerIP1                       broker_ip1                             127.0.0.1 (2)
listenPort                      listen_port                            10911
namesrvAddr                     namesrv_addresses (";"-separated)      () (none)
storePathRootDir                store_path_root_dir                    ~/store
brokerRole                      broker_role                            ASYNC_MASTER
flushDiskType                   flush_disk_type                        ASYNC_FLUSH
brokerPermission                broker_permission                      6 (read + write)
autoCreateTopicEnable           auto_create_topic_enable               true
autoCreateSubscriptionGroup     auto_create_subscription_group         true
defaultTopicQueueNums           default_topic_queue_nums               8
clusterTopicEnable              cluster_topic_enable                   true
brokerTopicEnable               broker_topic_enable                    true
traceTopicEnable                trace_topic_enable                     false
msgTraceTopicName               msg_trace_topic_name                   RMQ_SYS_TRACE_TOPIC
traceOnBrokerEnable             trace_on_broker_enable                 false (Bolide: broker trace)
messageDelayLevel               message_delay_levels_ms                1s 5s ... 2h (18)
fileReservedTime                file_reserved_time_hours               72
deleteWhen                      delete_when_hours (";"-separated)      04
diskMaxUsedSpaceRatio           disk_max_used_space_ratio_percent      75
diskSpaceCleanForciblyRatio     disk_space_clean_forcibly_ratio_percent 85
cleanFileForciblyEnable         clean_file_forcibly_enable             true
maxMessageSize                  max_message_size_bytes                 4 MiB
mapedFileSizeCommitLog          commit_log_segment_bytes               1 GiB
mapedFileSizeConsumeQueue       consume_queue_file_bytes               300000 * 20
flushIntervalCommitLog          flush_interval_commit_log_ms           500
flushIntervalConsumeQueue       flush_interval_consume_queue_ms        1000
syncFlushTimeout                sync_flush_timeout_ms                  5000
flushConsumerOffsetInterval     flush_consumer_offset_interval_ms      5000
flushDelayOffsetInterval        flush_delay_offset_interval_ms         10000
timerMaxDelaySec                timer_max_delay_seconds                259200 (3 days)
registerNameServerPeriod        register_name_server_period_ms         30000
longPollingEnable               long_polling_enable                    true
shortPollingTimeMills           short_polling_time_ms                  1000
notifyConsumerIdsChangedEnable  notify_consumer_ids_changed_enable     true
regionId                        region_id                              DefaultRegion
traceOn                         trace_on                               true
enablePropertyFilter            enable_property_filter                 false
rejectTransactionMessage        reject_transaction_message             false
transactionCheckInterval        transaction_check_interval_ms          60000
transactionTimeOut              transaction_timeout_ms                 6000
transactionCheckMax             transaction_check_max_count            15
aclEnable                       acl_enable                             false
aclFile (4)                     acl_file                               <data-dir>/conf/plain_acl.yml
innerClientAuthentication-      inner_client_credentials               none
Credentials (5)
authenticationEnabled (10)      authentication_enabled                 false
authorizationEnabled (10)       authorization_enabled                  false
initAuthenticationUser (10)     init_authentication_user               none
authStoreFile (10)              auth_store_file                        <data-dir>/conf/auth.json
migrateAuthFromV1Enabled (10)   migrate_auth_from_v1_enabled           false
authenticationWhitelist (10)    authentication_whitelist               none (codes, 5.x names)
authorizationWhitelist (10)     authorization_whitelist                none (codes, 5.x names)
tls.server.mode                 tls_server_mode                        disabled
tls.server.certPath             tls_server_cert_path                   none
tls.server.keyPath              tls_server_key_path                    none
tls.server.trustCertPath        tls_server_trust_cert_path             none
tls.server.need.client.auth     tls_server_need_client_auth            none
tls.server.keyPassword          tls_server_key_password                none (key not encrypted)
tls.enable (6)                  tls_enable                             false
tls.client.trustCertPath        tls_client_trust_cert_path             none (system CAs)
tls.client.certPath             tls_client_cert_path                   none
tls.client.keyPath              tls_client_key_path                    none
tls.client.authServer           tls_client_auth_server                 true (7)
rocketmq.broker.rebalance.      rebalance_lock_max_live_ms             60000
lockMaxLiveTime (3)
haListenPort                    ha_listen_port                         listenPort + 1
haMasterAddress                 ha_master_address                      "" (from name server)
slaveReadEnable                 slave_read_enable                      false
accessMessageInMemoryMaxRatio   access_message_in_memory_max_ratio_... 40 (percent of RAM)
vipChannelEnabled (4)           vip_channel_enabled                    true
newGroupStartRule (5)           new_group_start                        MEMORY
enableRetryTopicV2              enable_retry_topic_v2                  false (11)
retrieveMessageFromPop-         retrieve_message_from_pop_retry_       true (11)
RetryTopicV1                    topic_v1
metricsExporterType             metrics_exporter_type                  DISABLE (6)
metricsPromExporterHost         metrics_prom_exporter_host             "" (the bind host)
metricsPromExporterPort         metrics_prom_exporter_port             5557 (0: any)
maxTransferCountOnMessage-      max_transfer_count_on_message_in_      32 (8)
InMemory                        memory
maxTransferBytesOnMessage-      max_transfer_bytes_on_message_in_      256 KiB (8)
InMemory                        memory
maxTransferCountOnMessage-      max_transfer_count_on_message_in_disk  8 (9)
InDisk
maxTransferBytesOnMessage-      max_transfer_bytes_on_message_in_disk  64 KiB (9)
InDisk
=============================== ====================================== ===================

(1) Java defaults brokerName to the host name; Bolide uses "broker-a", the name RocketMQ's
sample configurations use, so a default broker has the same name on every machine.
(2) Java picks a local interface address; Bolide defaults to loopback, so a broker reachable
from other machines must set brokerIP1 (clients use it to reach the broker, docs/protocol.md §4.5).
(3) A Java system property in RocketMQ (``-Drocketmq.broker.rebalance.lockMaxLiveTime``), a
broker.conf key here: how long an orderly consumer's queue lock lives without renewal.
(4) The VIP channel: a second listener on listenPort - 2 with every handler but the pulls, as
RocketMQ brokers open (clients up to 4.4.0 send there by default). RocketMQ has no switch for
it; Bolide's turns it off (``bolide broker --no-vip``). With listenPort 0 it is opened on the
real port - 2 when that port is free.
(5) Where a consumer group without a committed offset starts a queue: MEMORY (RocketMQ's
rule: at 0 while the queue's first message is still in the broker's memory window, else
where the client's consumeFromWhere says), QUEUE_START (at 0 while the queue still starts at
0) or CONSUME_FROM (always the client's consumeFromWhere). ``bolide group progress`` shows,
for each queue without a committed offset, where the group will start.
(6) PROM serves Prometheus' /metrics (docs/operations.md); OTLP_GRPC and LOG are RocketMQ 5
exporters Bolide does not have: the broker warns and serves no metrics.

:class:`ConfigFileWriter` persists the broker's JSON config files (topics.json and its
siblings under ``<storePathRootDir>/config``) atomically, with ``.bak``, off the event loop.

(4) Bolide's key: the RocketMQ plain_acl.yml accounts file (docs/security.md); the default is
beside the store, ``<storePathRootDir>/../conf/plain_acl.yml``.
(5) RocketMQ 5's key, JSON ``{"accessKey": "...", "secretKey": "..."}``: the account the
broker signs its own requests to name servers with (a name server with ACL on needs it).
(6) RocketMQ's client-side switch: the broker reaches name servers over TLS.
(7) RocketMQ defaults to false (any server certificate is accepted); Bolide checks it.
(8) The most messages and bytes one pull (PULL_MESSAGE, and the admin's message reads)
answers with; the first message is sent whatever its size. A consumer asking for more
(pullBatchSize) gets this many. Raise them for large pulls (the Spark source's pullBatchSize).
(9) Read and range-checked but not acted on: RocketMQ applies this smaller pair when the
pulled message lies past the page-cache window; Bolide answers every pull with the
InMemory pair (listed in :data:`NOT_HONOURED_KEYS`).

(10) ACL 2.0 (RocketMQ 5.3, docs/security.md): users and policies in ``authStoreFile``
(Bolide's key; JSON), a Super user ``{"username": ..., "password": ...}`` created on first
start; exclusive with ``aclEnable``. ``migrateAuthFromV1Enabled``: at start the accounts of
``aclFile`` become users and policies (:mod:`bolide.acl.migration`); the whitelists are
RPCs that skip authentication / authorization: remoting request codes, and the 5.x
proxy's request names (``apache.rocketmq.v2.QueryRouteRequest``), as RocketMQ 5.3 names them.

(11) POP retry topics (RocketMQ 5): expired POP messages come back through
``%RETRY%<group>_<topic>``, or ``%RETRY%<group>+<topic>`` with ``enableRetryTopicV2``; with it on,
``retrieveMessageFromPopRetryTopicV1`` keeps reading what the V1 topic still holds.

Keys Bolide does not know are kept in :attr:`BrokerConfig.extra_properties`; the broker
names them, with the known keys in :data:`NOT_HONOURED_KEYS`, in one warning when it starts
(:mod:`bolide.broker.security`), as a typo in a key or a setting carried over from a Java
broker would otherwise silently leave a default in force.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from bolide.base import limits
from bolide.base.errors import ConfigError
from bolide.broker.config_choices import (
    DEFAULT_METRICS_PORT,
    BrokerRole,
    MetricsExporterType,
    NewGroupStart,
)
from bolide.broker.config_values import (
    DEFAULT_MESSAGE_DELAY_LEVEL,
    bad,
    enum_parser,
    lower_enum_parser,
    parse_addresses,
    parse_any_str,
    parse_bool,
    parse_broker_conf,
    parse_delay_level_key,
    parse_delay_levels,
    parse_hours,
    parse_int,
    parse_optional_credentials,
    parse_optional_path,
    parse_optional_secret,
    parse_optional_user,
    parse_path,
    parse_rpc_list,
    parse_str,
    read_broker_conf,
    render_addresses,
    render_credentials,
    render_delay_levels,
    render_hours,
    render_optional,
    render_plain,
    render_rpc_list,
    render_secret,
    render_user,
)
from bolide.broker.config_writer import ConfigFileWriter, VersionedDocument
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC
from bolide.remoting.tls import ClientAuth, TlsMode
from bolide.store import config_files
from bolide.store.config import FlushDiskType, StoreConfig
from bolide.store.config_files import MetadataFile

__all__ = [
    "DEFAULT_MESSAGE_DELAY_LEVEL",
    "DEFAULT_METRICS_PORT",
    "NOT_HONOURED_KEYS",
    "BrokerConfig",
    "BrokerRole",
    "ConfigFileWriter",
    "FlushDiskType",
    "MetricsExporterType",
    "NewGroupStart",
    "VersionedDocument",
    "parse_broker_conf",
    "parse_delay_levels",
    "read_broker_conf",
]

_log = logging.getLogger("bolide.broker.config")


def _key(
    java_key: str,
    parse: Callable[[str, str], Any],
    render: Callable[[object], str] = render_plain,
) -> dict[str, Any]:
    """Field metadata: the broker.conf key, its parser and its renderer."""
    return {"key": java_key, "parse": parse, "render": render}


def _default_store_root() -> Path:
    return Path.home() / "store"


_ADDRESSES = (parse_addresses, render_addresses)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The broker's settings, RocketMQ defaults (see the module table for the key names).

    Construct with keywords for tests, or with :meth:`from_mapping` from broker.conf text.
    Raises :class:`ConfigError` (naming the RocketMQ key) when a value is out of range.
    """

    broker_cluster_name: str = field(
        default="DefaultCluster", metadata=_key("brokerClusterName", parse_str)
    )
    broker_name: str = field(default="broker-a", metadata=_key("brokerName", parse_str))
    broker_id: int = field(default=0, metadata=_key("brokerId", parse_int))
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1", parse_str))
    listen_port: int = field(default=10_911, metadata=_key("listenPort", parse_int))
    namesrv_addresses: tuple[str, ...] = field(
        default=(), metadata=_key("namesrvAddr", *_ADDRESSES)
    )
    store_path_root_dir: Path = field(
        default_factory=_default_store_root, metadata=_key("storePathRootDir", parse_path)
    )
    broker_role: BrokerRole = field(
        default=BrokerRole.ASYNC_MASTER, metadata=_key("brokerRole", enum_parser(BrokerRole))
    )
    flush_disk_type: FlushDiskType = field(
        default=FlushDiskType.ASYNC_FLUSH,
        metadata=_key("flushDiskType", enum_parser(FlushDiskType)),
    )
    broker_permission: int = field(default=6, metadata=_key("brokerPermission", parse_int))
    auto_create_topic_enable: bool = field(
        default=True, metadata=_key("autoCreateTopicEnable", parse_bool)
    )
    auto_create_subscription_group: bool = field(
        default=True, metadata=_key("autoCreateSubscriptionGroup", parse_bool)
    )
    default_topic_queue_nums: int = field(
        default=8, metadata=_key("defaultTopicQueueNums", parse_int)
    )
    cluster_topic_enable: bool = field(
        default=True, metadata=_key("clusterTopicEnable", parse_bool)
    )
    broker_topic_enable: bool = field(default=True, metadata=_key("brokerTopicEnable", parse_bool))
    trace_topic_enable: bool = field(default=False, metadata=_key("traceTopicEnable", parse_bool))
    msg_trace_topic_name: str = field(
        default=DEFAULT_TRACE_TOPIC, metadata=_key("msgTraceTopicName", parse_str)
    )
    trace_on_broker_enable: bool = field(
        default=False, metadata=_key("traceOnBrokerEnable", parse_bool)
    )
    message_delay_levels_ms: tuple[int, ...] = field(
        default=parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL),
        metadata=_key("messageDelayLevel", parse_delay_level_key, render_delay_levels),
    )
    file_reserved_time_hours: int = field(default=72, metadata=_key("fileReservedTime", parse_int))
    delete_when_hours: tuple[int, ...] = field(
        default=(4,), metadata=_key("deleteWhen", parse_hours, render_hours)
    )
    disk_max_used_space_ratio_percent: int = field(
        default=limits.DISK_MAX_USED_SPACE_RATIO_PERCENT,
        metadata=_key("diskMaxUsedSpaceRatio", parse_int),
    )
    disk_space_clean_forcibly_ratio_percent: int = field(
        default=limits.DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT,
        metadata=_key("diskSpaceCleanForciblyRatio", parse_int),
    )
    clean_file_forcibly_enable: bool = field(
        default=True, metadata=_key("cleanFileForciblyEnable", parse_bool)
    )
    max_message_size_bytes: int = field(
        default=limits.MESSAGE_BODY_MAX_BYTES, metadata=_key("maxMessageSize", parse_int)
    )
    commit_log_segment_bytes: int = field(
        default=limits.COMMIT_LOG_SEGMENT_BYTES, metadata=_key("mapedFileSizeCommitLog", parse_int)
    )
    consume_queue_file_bytes: int = field(
        default=limits.CONSUME_QUEUE_FILE_ENTRIES * limits.CONSUME_QUEUE_ENTRY_BYTES,
        metadata=_key("mapedFileSizeConsumeQueue", parse_int),
    )
    flush_interval_commit_log_ms: int = field(
        default=limits.FLUSH_INTERVAL_COMMIT_LOG_MS,
        metadata=_key("flushIntervalCommitLog", parse_int),
    )
    flush_interval_consume_queue_ms: int = field(
        default=limits.FLUSH_INTERVAL_CONSUME_QUEUE_MS,
        metadata=_key("flushIntervalConsumeQueue", parse_int),
    )
    sync_flush_timeout_ms: int = field(
        default=limits.SYNC_FLUSH_TIMEOUT_MS, metadata=_key("syncFlushTimeout", parse_int)
    )
    flush_consumer_offset_interval_ms: int = field(
        default=limits.CONSUMER_OFFSET_FLUSH_INTERVAL_MS,
        metadata=_key("flushConsumerOffsetInterval", parse_int),
    )
    flush_delay_offset_interval_ms: int = field(
        default=limits.DELAY_OFFSET_FLUSH_INTERVAL_MS,
        metadata=_key("flushDelayOffsetInterval", parse_int),
    )
    timer_max_delay_seconds: int = field(
        default=limits.TIMER_MAX_DELAY_MS // 1_000,
        metadata=_key("timerMaxDelaySec", parse_int),
    )
    register_name_server_period_ms: int = field(
        default=limits.BROKER_REGISTER_INTERVAL_MS,
        metadata=_key("registerNameServerPeriod", parse_int),
    )
    long_polling_enable: bool = field(default=True, metadata=_key("longPollingEnable", parse_bool))
    short_polling_time_ms: int = field(
        default=1_000, metadata=_key("shortPollingTimeMills", parse_int)
    )
    notify_consumer_ids_changed_enable: bool = field(
        default=True, metadata=_key("notifyConsumerIdsChangedEnable", parse_bool)
    )
    region_id: str = field(default="DefaultRegion", metadata=_key("regionId", parse_str))
    trace_on: bool = field(default=True, metadata=_key("traceOn", parse_bool))
    enable_property_filter: bool = field(
        default=False, metadata=_key("enablePropertyFilter", parse_bool)
    )
    reject_transaction_message: bool = field(
        default=False, metadata=_key("rejectTransactionMessage", parse_bool)
    )
    transaction_check_interval_ms: int = field(
        default=limits.TRANSACTION_CHECK_INTERVAL_MS,
        metadata=_key("transactionCheckInterval", parse_int),
    )
    transaction_timeout_ms: int = field(
        default=limits.TRANSACTION_TIMEOUT_MS, metadata=_key("transactionTimeOut", parse_int)
    )
    transaction_check_max_count: int = field(
        default=limits.TRANSACTION_CHECK_MAX_COUNT,
        metadata=_key("transactionCheckMax", parse_int),
    )
    acl_enable: bool = field(default=False, metadata=_key("aclEnable", parse_bool))
    acl_file: Path | None = field(
        default=None, metadata=_key("aclFile", parse_optional_path, render_optional)
    )
    inner_client_credentials: tuple[str, str] | None = field(
        default=None,
        repr=False,
        metadata=_key(
            "innerClientAuthenticationCredentials",
            parse_optional_credentials,
            render_credentials,
        ),
    )
    authentication_enabled: bool = field(
        default=False, metadata=_key("authenticationEnabled", parse_bool)
    )
    authorization_enabled: bool = field(
        default=False, metadata=_key("authorizationEnabled", parse_bool)
    )
    init_authentication_user: tuple[str, str] | None = field(
        default=None,
        repr=False,
        metadata=_key("initAuthenticationUser", parse_optional_user, render_user),
    )
    auth_store_file: Path | None = field(
        default=None, metadata=_key("authStoreFile", parse_optional_path, render_optional)
    )
    migrate_auth_from_v1_enabled: bool = field(
        default=False, metadata=_key("migrateAuthFromV1Enabled", parse_bool)
    )
    authentication_whitelist: frozenset[str] = field(
        default=frozenset(),
        metadata=_key("authenticationWhitelist", parse_rpc_list, render_rpc_list),
    )
    authorization_whitelist: frozenset[str] = field(
        default=frozenset(),
        metadata=_key("authorizationWhitelist", parse_rpc_list, render_rpc_list),
    )
    tls_server_mode: TlsMode = field(
        default=TlsMode.DISABLED, metadata=_key("tls.server.mode", lower_enum_parser(TlsMode))
    )
    tls_server_cert_path: Path | None = field(
        default=None, metadata=_key("tls.server.certPath", parse_optional_path, render_optional)
    )
    tls_server_key_path: Path | None = field(
        default=None, metadata=_key("tls.server.keyPath", parse_optional_path, render_optional)
    )
    tls_server_trust_cert_path: Path | None = field(
        default=None,
        metadata=_key("tls.server.trustCertPath", parse_optional_path, render_optional),
    )
    tls_server_need_client_auth: ClientAuth = field(
        default=ClientAuth.NONE,
        metadata=_key("tls.server.need.client.auth", lower_enum_parser(ClientAuth)),
    )
    tls_server_key_password: str | None = field(
        default=None,
        repr=False,
        metadata=_key("tls.server.keyPassword", parse_optional_secret, render_secret),
    )
    tls_enable: bool = field(default=False, metadata=_key("tls.enable", parse_bool))
    tls_client_trust_cert_path: Path | None = field(
        default=None,
        metadata=_key("tls.client.trustCertPath", parse_optional_path, render_optional),
    )
    tls_client_cert_path: Path | None = field(
        default=None, metadata=_key("tls.client.certPath", parse_optional_path, render_optional)
    )
    tls_client_key_path: Path | None = field(
        default=None, metadata=_key("tls.client.keyPath", parse_optional_path, render_optional)
    )
    tls_client_auth_server: bool = field(
        default=True, metadata=_key("tls.client.authServer", parse_bool)
    )
    rebalance_lock_max_live_ms: int = field(
        default=limits.REBALANCE_LOCK_MAX_LIVE_MS,
        metadata=_key("rocketmq.broker.rebalance.lockMaxLiveTime", parse_int),
    )
    ha_listen_port: int = field(default=-1, metadata=_key("haListenPort", parse_int))
    """-1 (the default): listenPort + 1, as Java's BrokerStartup sets it; 0 picks a free port."""
    ha_master_address: str = field(default="", metadata=_key("haMasterAddress", parse_any_str))
    slave_read_enable: bool = field(default=False, metadata=_key("slaveReadEnable", parse_bool))
    access_message_in_memory_max_ratio_percent: int = field(
        default=limits.HA_PULL_MEMORY_RATIO_PERCENT,
        metadata=_key("accessMessageInMemoryMaxRatio", parse_int),
    )
    """A consumer whose backlog exceeds this share of RAM is told to read from a slave."""
    metrics_exporter_type: MetricsExporterType = field(
        default=MetricsExporterType.DISABLE,
        metadata=_key("metricsExporterType", enum_parser(MetricsExporterType)),
    )
    metrics_prom_exporter_host: str = field(
        default="", metadata=_key("metricsPromExporterHost", parse_any_str)
    )
    metrics_prom_exporter_port: int = field(
        default=DEFAULT_METRICS_PORT, metadata=_key("metricsPromExporterPort", parse_int)
    )
    vip_channel_enabled: bool = field(default=True, metadata=_key("vipChannelEnabled", parse_bool))
    new_group_start: NewGroupStart = field(
        default=NewGroupStart.MEMORY,
        metadata=_key("newGroupStartRule", enum_parser(NewGroupStart)),
    )
    enable_retry_topic_v2: bool = field(
        default=False, metadata=_key("enableRetryTopicV2", parse_bool)
    )
    retrieve_message_from_pop_retry_topic_v1: bool = field(
        default=True, metadata=_key("retrieveMessageFromPopRetryTopicV1", parse_bool)
    )
    max_transfer_count_on_message_in_memory: int = field(
        default=limits.PULL_BATCH_MAX_MESSAGES,
        metadata=_key("maxTransferCountOnMessageInMemory", parse_int),
    )
    """The most messages one pull answers with."""
    max_transfer_bytes_on_message_in_memory: int = field(
        default=limits.PULL_BATCH_MAX_BYTES,
        metadata=_key("maxTransferBytesOnMessageInMemory", parse_int),
    )
    """The most bytes of messages one pull answers with (the first one is always sent)."""
    max_transfer_count_on_message_in_disk: int = field(
        default=limits.PULL_BATCH_IN_DISK_MAX_MESSAGES,
        metadata=_key("maxTransferCountOnMessageInDisk", parse_int),
    )
    """RocketMQ's limit for reads past the page cache; read, not acted on."""
    max_transfer_bytes_on_message_in_disk: int = field(
        default=limits.PULL_BATCH_IN_DISK_MAX_BYTES,
        metadata=_key("maxTransferBytesOnMessageInDisk", parse_int),
    )
    """RocketMQ's limit for reads past the page cache; read, not acted on."""
    extra_properties: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """broker.conf keys Bolide does not know, kept verbatim (GET_BROKER_CONFIG shows them)."""
    given_keys: frozenset[str] = field(default=frozenset(), compare=False)
    """The known keys the file or the command line set (for :meth:`unhonoured_keys`)."""

    def __post_init__(self) -> None:
        # controller mode assigns the id: RocketMQ's quick start writes brokerId=-1
        controller_mode = self.extra_properties.get("enableControllerMode", "") == "true"
        for name, low, high in _RANGES:
            value = getattr(self, name)
            if not low <= value <= high and not (controller_mode and name == "broker_id"):
                key = _JAVA_KEY_BY_FIELD[name]
                raise bad(key, render_plain(value), f"a value between {low} and {high}")
        if self.consume_queue_file_bytes % limits.CONSUME_QUEUE_ENTRY_BYTES:
            raise bad(
                "mapedFileSizeConsumeQueue",
                str(self.consume_queue_file_bytes),
                f"a multiple of {limits.CONSUME_QUEUE_ENTRY_BYTES} (one consume-queue entry)",
            )
        if not self.message_delay_levels_ms:
            raise bad("messageDelayLevel", "", "at least one delay level")
        if not self.delete_when_hours:
            raise bad("deleteWhen", "", "at least one hour of the day")
        if self.broker_role is BrokerRole.SLAVE and self.broker_id <= 0 and not controller_mode:
            raise bad("brokerId", str(self.broker_id), "an id >= 1 on a SLAVE (0 is the master)")

    @property
    def effective_ha_listen_port(self) -> int:
        """haListenPort, or listenPort + 1 when it is not set."""
        return self.listen_port + 1 if self.ha_listen_port < 0 else self.ha_listen_port

    @property
    def broker_address(self) -> str:
        """``brokerIP1:listenPort``: what the broker registers and stamps as STOREHOST."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def file_reserved_time_ms(self) -> int:
        """fileReservedTime in milliseconds."""
        return self.file_reserved_time_hours * 3_600_000

    @property
    def config_dir(self) -> Path:
        """``<storePathRootDir>/config``: where topics.json and its siblings live."""
        return config_files.config_dir(self.store_path_root_dir)

    def metadata_path(self, which: MetadataFile) -> Path:
        """``<storePathRootDir>/config/<file>``, e.g. ``metadata_path(MetadataFile.TOPICS)``."""
        return config_files.metadata_path(self.store_path_root_dir, which)

    def store_config(self) -> StoreConfig:
        """The message store's settings taken from this config (index sizes: store defaults)."""
        return StoreConfig(
            store_path_root_dir=self.store_path_root_dir,
            commit_log_segment_bytes=self.commit_log_segment_bytes,
            consume_queue_file_entries=(
                self.consume_queue_file_bytes // limits.CONSUME_QUEUE_ENTRY_BYTES
            ),
            flush_disk_type=self.flush_disk_type,
            flush_interval_commit_log_ms=self.flush_interval_commit_log_ms,
            flush_interval_consume_queue_ms=self.flush_interval_consume_queue_ms,
            sync_flush_timeout_ms=self.sync_flush_timeout_ms,
            file_reserved_time_ms=self.file_reserved_time_ms,
            delete_when_hours=frozenset(self.delete_when_hours),
            disk_max_used_space_ratio_percent=self.disk_max_used_space_ratio_percent,
            disk_space_clean_forcibly_ratio_percent=self.disk_space_clean_forcibly_ratio_percent,
            clean_file_forcibly_enable=self.clean_file_forcibly_enable,
            max_message_size_bytes=self.max_message_size_bytes,
            message_delay_levels_ms=self.message_delay_levels_ms,
        )

    @classmethod
    def from_mapping(
        cls,
        values: Mapping[str, str],
        overrides: Mapping[str, object] | None = None,
    ) -> BrokerConfig:
        """Build a config from broker.conf ``values``, then ``overrides`` on top.

        ``values`` are strings keyed by RocketMQ key (as :func:`parse_broker_conf` returns).
        ``overrides`` (from the command line) may be keyed by RocketMQ key or field name and
        hold strings or plain values (int, bool, Path, enum, tuple). Unknown keys are kept in
        ``extra_properties`` and logged as a warning. Raises :class:`ConfigError` naming the
        key and the value when a value does not parse or is out of range.
        """
        merged: dict[str, str] = dict(values)
        for name, value in (overrides or {}).items():
            key = _JAVA_KEY_BY_FIELD.get(name, name)
            merged[key] = _override_text(key, value)
        arguments: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, text in merged.items():
            spec = _FIELD_BY_JAVA_KEY.get(key)
            if spec is None:
                extra[key] = text
                continue
            arguments[spec.name] = spec.metadata["parse"](key, text.strip())
        given = frozenset(key for key in merged if key in _FIELD_BY_JAVA_KEY)
        return cls(**arguments, extra_properties=MappingProxyType(extra), given_keys=given)

    def to_properties(self) -> dict[str, str]:
        """Every setting as broker.conf text, keyed by RocketMQ key (GET_BROKER_CONFIG's body)."""
        rendered = {
            spec.metadata["key"]: spec.metadata["render"](getattr(self, spec.name))
            for spec in _KNOWN_FIELDS
        }
        rendered.update(self.extra_properties)
        return rendered

    def replace(self, **changes: Any) -> BrokerConfig:
        """A copy with ``changes`` (field names) applied and validated."""
        return dataclasses.replace(self, **changes)


NOT_HONOURED_KEYS: frozenset[str] = frozenset(
    {
        # Every pull is answered with the InMemory limits (no page-cache window is tracked).
        "maxTransferCountOnMessageInDisk",
        "maxTransferBytesOnMessageInDisk",
    }
)
"""Known broker.conf keys whose value Bolide reads but does not act on."""

_KNOWN_FIELDS = tuple(spec for spec in dataclasses.fields(BrokerConfig) if "key" in spec.metadata)
_FIELD_BY_JAVA_KEY = {spec.metadata["key"]: spec for spec in _KNOWN_FIELDS}
_JAVA_KEY_BY_FIELD = {spec.name: spec.metadata["key"] for spec in _KNOWN_FIELDS}

_JAVA_INT_MAX = 2**31 - 1
"""These settings are Java ints in RocketMQ; files written for it never hold more."""

# (field, lowest, highest) allowed; both ends inclusive.
_RANGES: tuple[tuple[str, int, int], ...] = (
    ("broker_id", 0, 2**63 - 1),
    # 0 asks the OS for a free port: tests and embedded brokers use it.
    ("listen_port", 0, 65_535),
    ("metrics_prom_exporter_port", 0, 65_535),
    ("broker_permission", 0, 0xF),
    ("default_topic_queue_nums", 1, limits.TOPIC_QUEUE_NUMS_MAX_COUNT),
    ("file_reserved_time_hours", 1, _JAVA_INT_MAX),
    # RocketMQ clamps diskMaxUsedSpaceRatio to 10..95; Bolide refuses instead of surprising.
    ("disk_max_used_space_ratio_percent", 10, 95),
    # RocketMQ clamps diskSpaceCleanForciblyRatio to 30..85; refused outside, as above.
    ("disk_space_clean_forcibly_ratio_percent", 30, 85),
    # A body larger than a frame could never arrive.
    ("max_message_size_bytes", 1, limits.FRAME_MAX_BYTES),
    ("commit_log_segment_bytes", limits.COMMIT_LOG_SEGMENT_MIN_BYTES, _JAVA_INT_MAX),
    # The store needs room for two entries in a consume-queue file.
    ("consume_queue_file_bytes", 2 * limits.CONSUME_QUEUE_ENTRY_BYTES, _JAVA_INT_MAX),
    ("flush_interval_commit_log_ms", 1, _JAVA_INT_MAX),
    ("flush_interval_consume_queue_ms", 1, _JAVA_INT_MAX),
    ("sync_flush_timeout_ms", 1, _JAVA_INT_MAX),
    ("flush_consumer_offset_interval_ms", 1, _JAVA_INT_MAX),
    ("flush_delay_offset_interval_ms", 1, _JAVA_INT_MAX),
    # A timer must be able to wait at least a second; RocketMQ 5 reads it as a Java int.
    ("timer_max_delay_seconds", 1, _JAVA_INT_MAX),
    # A broker must re-register before the name server forgets it.
    ("register_name_server_period_ms", 1, limits.BROKER_EXPIRY_MS - 1),
    ("short_polling_time_ms", 0, _JAVA_INT_MAX),
    ("rebalance_lock_max_live_ms", 1, _JAVA_INT_MAX),
    # A check round needs time to pass; a half message may be checked at once (0 ms).
    ("transaction_check_interval_ms", 1, _JAVA_INT_MAX),
    ("transaction_timeout_ms", 0, _JAVA_INT_MAX),
    ("transaction_check_max_count", 1, _JAVA_INT_MAX),
    ("ha_listen_port", -1, 65_535),
    ("access_message_in_memory_max_ratio_percent", 0, 100),
    ("max_transfer_count_on_message_in_memory", 1, limits.PULL_TRANSFER_MAX_MESSAGES),
    ("max_transfer_bytes_on_message_in_memory", 1, limits.PULL_TRANSFER_MAX_BYTES),
    ("max_transfer_count_on_message_in_disk", 1, limits.PULL_TRANSFER_MAX_MESSAGES),
    ("max_transfer_bytes_on_message_in_disk", 1, limits.PULL_TRANSFER_MAX_BYTES),
)


def _override_text(key: str, value: object) -> str:
    if isinstance(value, str):
        return value
    spec = _FIELD_BY_JAVA_KEY.get(key)
    if isinstance(value, bool | int | Path | enum.Enum):
        return render_plain(value)
    if spec is not None and isinstance(value, tuple | list):
        rendered: str = spec.metadata["render"](tuple(value))
        return rendered
    raise ConfigError(f"broker config override {key}={value!r}: unsupported value type")

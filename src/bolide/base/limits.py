"""Every bound in Bolide, with its unit (last in the name) and the reason for its value.

Defaults follow Apache RocketMQ 4.9 unless the comment says otherwise. Relations between the
bounds are checked once, at import (:func:`_check_relations`), so a bad edit fails loudly.
"""

from __future__ import annotations

from bolide.base.errors import invariant

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# --- wire ------------------------------------------------------------------------------------
FRAME_MAX_BYTES = 16 * MIB
"""Largest frame accepted (com.rocketmq.remoting.frameMaxLength); larger closes the connection."""
FRAME_LENGTH_FIELD_BYTES = 4
"""The int32 total-length prefix of every frame."""
FRAME_HEADER_LENGTH_MAX_BYTES = (1 << 24) - 1
"""The header length has 24 bits in the type-and-length word."""
MESSAGE_BODY_MAX_BYTES = 4 * MIB
"""Broker maxMessageSize: a larger body is MESSAGE_ILLEGAL."""
MESSAGE_PROPERTIES_MAX_BYTES = 32767
"""The properties string has an int16 length in the record layout."""
TOPIC_NAME_MAX_CHARS = 127
"""The topic has a one-byte signed length in the 4.x record layout."""
GROUP_NAME_MAX_CHARS = 255
"""RocketMQ's CHARACTER_MAX_LENGTH for group names."""
BATCH_MESSAGES_MAX_COUNT = 10_000
"""Inner messages in one batch body: bounds per-request work on the broker."""

# --- remoting --------------------------------------------------------------------------------
OPAQUE_TABLE_MAX_ENTRIES = 65_536
"""Requests outstanding on one connection; more answers BackpressureError instead of growing."""
REQUEST_TIMEOUT_DEFAULT_MS = 3_000
"""Default RPC timeout, as the Java client's sendMsgTimeout."""
CONNECT_TIMEOUT_MS = 3_000
"""TCP connect timeout (Java NettyClientConfig.connectTimeoutMillis)."""
RECONNECT_BACKOFF_INITIAL_MS = 100
"""First wait before reconnecting to an address that just failed."""
RECONNECT_BACKOFF_MAX_MS = 5_000
"""Cap of the exponential reconnect back-off."""
WRITE_BUFFER_HIGH_WATER_BYTES = 4 * MIB
"""Above this many unsent bytes a writer waits for the transport to drain."""
WRITE_BUFFER_LOW_WATER_BYTES = 1 * MIB
"""Writers resume when the transport's buffer falls to this size."""
HANDLER_CONCURRENCY_MAX_REQUESTS = 1_024
"""Requests of one family in flight on a server before it answers SYSTEM_BUSY."""
CHANNEL_IDLE_MAX_MS = 120_000
"""Server and Java client close a channel idle this long; heartbeats keep it alive."""

# --- storage ---------------------------------------------------------------------------------
COMMIT_LOG_SEGMENT_BYTES = 1 * GIB
"""Commit-log file size (mapedFileSizeCommitLog)."""
COMMIT_LOG_SEGMENT_MIN_BYTES = 4 * KIB
"""Smallest segment allowed (tests use tiny ones); must hold at least one small record."""
CONSUME_QUEUE_ENTRY_BYTES = 20
"""commit-log offset int64 + size int32 + tags code int64."""
CONSUME_QUEUE_FILE_ENTRIES = 300_000
"""Entries per consume-queue file (mapedFileSizeConsumeQueue / 20)."""
FLUSH_INTERVAL_COMMIT_LOG_MS = 500
"""ASYNC flush period (flushIntervalCommitLog)."""
FLUSH_INTERVAL_CONSUME_QUEUE_MS = 1_000
"""Consume-queue flush period (flushIntervalConsumeQueue)."""
SYNC_FLUSH_TIMEOUT_MS = 5_000
"""A SYNC put waits this long for its fsync before answering FLUSH_DISK_TIMEOUT."""
FILE_RESERVED_TIME_MS = 72 * 3_600_000
"""Commit-log segments older than this are deleted (fileReservedTime, 72 h)."""
DISK_MAX_USED_SPACE_RATIO_PERCENT = 75
"""Above this disk use the oldest segments are deleted at once (diskMaxUsedSpaceRatio)."""
INDEX_QUERY_MAX_MESSAGES = 64
"""Messages one key or unique-key query returns at most (defaultQueryMaxNum is 32, admin 64)."""
INDEX_HASH_SLOTS = 5_000_000
"""Hash slots per index file (maxHashSlotNum)."""
INDEX_FILE_MAX_ENTRIES = 20_000_000
"""Entries per index file (maxIndexNum)."""

# --- broker ----------------------------------------------------------------------------------
PULL_BATCH_MAX_MESSAGES = 32
"""Messages per pull when the data is in memory (maxTransferCountOnMessageInMemory)."""
PULL_BATCH_MAX_BYTES = 256 * KIB
"""Bytes per pull when the data is in memory (maxTransferBytesOnMessageInMemory)."""
PULL_SCAN_MIN_BYTES = 16_000
"""Consume-queue bytes scanned per pull at least: max(16000, maxMsgNums * 20)."""
LONG_POLL_MAX_PARKED_REQUESTS = 100_000
"""Parked pulls per broker; beyond it a pull is answered at once with PULL_NOT_FOUND."""
LONG_POLL_CHECK_INTERVAL_MS = 5_000
"""Parked pulls are re-checked at least this often even without arrivals."""
BROKER_REGISTER_INTERVAL_MS = 30_000
"""Broker re-registration with every name server (registerNameServerPeriod)."""
BROKER_EXPIRY_MS = 120_000
"""A name server forgets a broker silent this long."""
CLIENT_CHANNEL_EXPIRY_MS = 120_000
"""A broker forgets a client without heartbeat this long."""
CONSUMER_OFFSET_FLUSH_INTERVAL_MS = 5_000
"""consumerOffset.json is written this often (flushConsumerOffsetInterval)."""
DELAY_OFFSET_FLUSH_INTERVAL_MS = 10_000
"""delayOffset.json is written this often (flushDelayOffsetInterval)."""
REBALANCE_LOCK_MAX_LIVE_MS = 60_000
"""Broker-side queue lock lifetime without renewal."""

# --- client ----------------------------------------------------------------------------------
CLIENT_LOCK_MAX_LIVE_MS = 30_000
"""The client treats its queue lock as lost after this long without renewal."""
CLIENT_LOCK_RENEW_INTERVAL_MS = 20_000
"""lockAll period of an orderly consumer."""
REBALANCE_INTERVAL_MS = 20_000
"""Rebalance period when no change notification arrives."""
HEARTBEAT_INTERVAL_MS = 30_000
"""Heartbeat to every broker."""
ROUTE_POLL_INTERVAL_MS = 30_000
"""Route refresh from the name servers."""
CONSUMER_OFFSET_PERSIST_INTERVAL_MS = 5_000
"""Client offset store persistence."""
PULL_SUSPEND_TIMEOUT_MS = 15_000
"""Long-poll hold a push consumer asks for."""
PROCESS_QUEUE_MAX_MESSAGES = 1_000
"""Flow control: cached messages per queue (pullThresholdForQueue)."""
PROCESS_QUEUE_MAX_BYTES = 100 * MIB
"""Flow control: cached bytes per queue (pullThresholdSizeForQueue)."""
PROCESS_QUEUE_MAX_SPAN_OFFSETS = 2_000
"""Flow control: offset span of cached messages (consumeConcurrentlyMaxSpan)."""
COMPRESS_BODY_OVER_BYTES = 4 * KIB
"""Producer compresses bodies of at least this size (compressMsgBodyOverHowmuch)."""


def _check_relations() -> None:
    invariant(FRAME_MAX_BYTES > MESSAGE_BODY_MAX_BYTES, "a frame must carry a maximal body")
    invariant(FRAME_MAX_BYTES <= 2**31 - 1, "the frame length is a signed int32")
    invariant(
        COMMIT_LOG_SEGMENT_BYTES > MESSAGE_BODY_MAX_BYTES + MESSAGE_PROPERTIES_MAX_BYTES + KIB,
        "a default segment holds the largest record",
    )
    invariant(COMMIT_LOG_SEGMENT_MIN_BYTES <= COMMIT_LOG_SEGMENT_BYTES, "segment bounds order")
    invariant(WRITE_BUFFER_LOW_WATER_BYTES < WRITE_BUFFER_HIGH_WATER_BYTES, "water marks order")
    invariant(RECONNECT_BACKOFF_INITIAL_MS <= RECONNECT_BACKOFF_MAX_MS, "back-off order")
    invariant(PULL_SUSPEND_TIMEOUT_MS < 30_000, "long poll shorter than the client's pull RPC")
    invariant(CLIENT_LOCK_RENEW_INTERVAL_MS < CLIENT_LOCK_MAX_LIVE_MS, "renew before expiry")
    invariant(CLIENT_LOCK_MAX_LIVE_MS < REBALANCE_LOCK_MAX_LIVE_MS, "client lease inside broker's")
    invariant(HEARTBEAT_INTERVAL_MS < CLIENT_CHANNEL_EXPIRY_MS, "heartbeat before expiry")
    invariant(BROKER_REGISTER_INTERVAL_MS < BROKER_EXPIRY_MS, "register before expiry")
    invariant(0 < DISK_MAX_USED_SPACE_RATIO_PERCENT < 100, "a ratio in percent")


_check_relations()

"""Every bound in Bolide, with its unit (last in the name) and the reason for its value.

Defaults follow Apache RocketMQ 4.9 unless the comment says otherwise. Relations between the
bounds are checked once, at import (:func:`_check_relations`), so a bad edit fails loudly.
"""

from __future__ import annotations

from bolide.base.errors import invariant
from bolide.base.limits_controller import *  # noqa: F403 (re-exported: one import path for every bound)
from bolide.base.limits_trace import *  # noqa: F403 (re-exported: one import path for every bound)

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
JSON_BODY_MAX_DEPTH_LEVELS = 64
"""Nesting of arrays/objects the lenient (fastjson) body parser follows: real bodies nest < 10
deep, and a bound keeps a hostile body from exhausting the Python stack."""
RECORD_TOPIC_MAX_BYTES = 127
"""UTF-8 bytes of a topic in a stored record: its length is one signed byte in the 4.x layout."""
MESSAGE_BODY_DECOMPRESSED_MAX_BYTES = 64 * MIB
"""Largest body zlib may inflate to: bounds memory against compression bombs (Java producers
refuse bodies over 4 MiB before compressing, so real bodies stay far below)."""

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
WRITE_COALESCE_MAX_BYTES = 64 * KIB
"""Frames written in one loop turn are gathered into one system call up to this size; a
larger batch is handed to the transport at once, so a writer that never yields still meets
the high-water mark."""
HANDLER_CONCURRENCY_MAX_REQUESTS = 1_024
"""Requests of one family in flight on a server before it answers SYSTEM_BUSY."""
CHANNEL_IDLE_MAX_MS = 120_000
"""Server and Java client close a channel idle this long; heartbeats keep it alive."""
OPAQUE_SPACE_COUNT = 2**31
"""Distinct opaques, 0 .. 2**31 - 1, then the counter wraps: the binary header carries the
opaque as a signed int32."""
REMOTING_STOP_GRACE_MS = 3_000
"""Stopping a server or client pool: unsent data and running handlers get this long, then
connections are aborted and handlers cancelled."""

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
"""Above this disk use expired segments are deleted at any hour, not only at deleteWhen
(diskMaxUsedSpaceRatio)."""
DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT = 85
"""Above this disk use the oldest segments are deleted at once, whatever their age
(diskSpaceCleanForciblyRatio; RocketMQ caps it at 85 and floors it at 30)."""
INDEX_QUERY_MAX_MESSAGES = 64
"""Messages one key or unique-key query returns at most (defaultQueryMaxNum is 32, admin 64)."""
INDEX_HASH_SLOTS = 5_000_000
"""Hash slots per index file (maxHashSlotNum)."""
INDEX_FILE_MAX_ENTRIES = 20_000_000
"""Entries per index file (maxIndexNum)."""
INDEX_QUERY_SCAN_MAX_ENTRIES = 100_000
"""Index entries one query walks at most (hash collisions included): bounds query CPU."""
INDEX_PENDING_MAX_RECORDS = 1_024
"""Records whose index entries wait to be written in one batch (every index read writes
them first): bounds the memory they hold and the work of one batch (~1 ms)."""
COMMIT_LOG_BLANK_MIN_BYTES = 8
"""Room always kept at a segment's end for the blank marker (END_FILE_MIN_BLANK_LENGTH)."""
COMMIT_LOG_ALLOCATION_CHUNK_BYTES = 4 * MIB
"""Disk blocks reserved (fallocate) and pages pre-faulted (madvise) ahead of the commit-log
write position at once: mapped writes never fault on a hole (SIGBUS on a full disk), a full
disk shows up before a put writes, and the pre-fault (a few ms) is paid once per chunk."""
COMMIT_LOG_ALLOCATE_AHEAD_BYTES = 4 * MIB
"""The next commit-log chunk is reserved and pre-faulted once the writes come this close to the
end of the reserved blocks, so the prefault thread finishes it before the first write lands on
it (a write racing its own chunk's pre-fault takes the page faults itself)."""
CONSUME_QUEUE_ALLOCATION_CHUNK_BYTES = 64 * KIB
"""Disk blocks reserved ahead in a consume-queue or index file: thousands of queues must not
each pin a whole 5.7 MiB file on disk."""
STORE_QUEUE_IDS_MAX_COUNT = 65_536
"""Queue ids a put may use (0..65535): each queue id is a directory of files."""
STORE_FLUSH_THREAD_COUNT = 3
"""Threads that fsync the ASYNC commit-log flush, queues, index and checkpoint: fsync never
runs on the event loop, and at most this many run at once."""
SYNC_FLUSH_ROUNDS_MAX_COUNT = 2
"""SYNC_FLUSH fsync rounds running at once, each on its own flush thread: puts arriving during
one fsync start the next instead of waiting (ext4 merges concurrent fsyncs; measured ~2x
fsyncs/s with two; more, smaller rounds cost more CPU per put than they save)."""
SYNC_FLUSH_TIMEOUT_CHECK_INTERVAL_MS = 100
"""How often SYNC puts still waiting for their fsync are checked against their timeout."""
RETENTION_CHECK_INTERVAL_MS = 10_000
"""How often retention looks at segment ages and disk use (cleanResourceInterval)."""
STORE_NAME_CACHE_MAX_ENTRIES = 100_000
"""Encoded topic names and tags hash codes a store memoises each: bounds memory when clients
send endless distinct names."""
RETENTION_DELETE_SEGMENTS_MAX_COUNT = 10
"""Segments one retention run deletes at most (DELETE_FILES_BATCH_MAX): bounds one step."""
RECOVERY_CUT_SCAN_MAX_BYTES = 64 * MIB
"""How far past a cut recovery looks for non-zero bytes to report how much it discarded."""

# --- broker ----------------------------------------------------------------------------------
PULL_BATCH_MAX_MESSAGES = 32
"""Messages per pull when the data is in memory (maxTransferCountOnMessageInMemory)."""
PULL_BATCH_MAX_BYTES = 256 * KIB
"""Bytes per pull when the data is in memory (maxTransferBytesOnMessageInMemory)."""
PULL_BATCH_IN_DISK_MAX_MESSAGES = 8
"""RocketMQ's messages per pull past the page cache (maxTransferCountOnMessageInDisk)."""
PULL_BATCH_IN_DISK_MAX_BYTES = 64 * KIB
"""RocketMQ's bytes per pull past the page cache (maxTransferBytesOnMessageInDisk)."""
PULL_TRANSFER_MAX_MESSAGES = 65_536
"""Largest maxTransferCountOnMessage* accepted: one answer's records are read in one step on
the broker's loop (a consume-queue scan of 20 bytes each), so a pull stays short."""
PULL_TRANSFER_MAX_BYTES = FRAME_MAX_BYTES // 2
"""Largest maxTransferBytesOnMessage* accepted: an answer (these bytes plus a first message
over them, up to maxMessageSize) must fit in one frame."""
PULL_SCAN_MIN_BYTES = 16_000
"""Consume-queue bytes scanned per pull at least: max(16000, maxMsgNums * 20)."""
LONG_POLL_MAX_PARKED_REQUESTS = 100_000
"""Parked pulls per broker; beyond it a pull is answered at once with SYSTEM_BUSY, and the
client waits PULL_DELAY_ON_ERROR_MS before pulling again (no busy loop)."""
LONG_POLL_CHECK_INTERVAL_MS = 5_000
"""Parked pulls are re-checked at least this often even without arrivals."""
LONG_POLL_HEAP_COMPACT_MIN_ENTRIES = 1_024
"""Deadlines of pulls woken early are dropped from the heap once it holds this many entries
and twice the live ones: memory follows the live table at amortised O(1) cost."""
BROKER_REGISTER_INTERVAL_MS = 30_000
"""Broker re-registration with every name server (registerNameServerPeriod)."""
BROKER_EXPIRY_MS = 120_000
"""A name server forgets a broker silent this long."""
NAMESRV_SCAN_INTERVAL_MS = 10_000
"""How often a name server looks for silent brokers (scanNotActiveBroker period)."""
NAMESRV_LIVE_BROKERS_MAX_ENTRIES = 4_096
"""Live broker addresses one name server tracks; bounds memory against runaway registrants."""
NAMESRV_KV_CONFIG_MAX_ENTRIES = 10_000
"""KV config items (all namespaces) one name server keeps; PUT beyond it is refused."""
CLIENT_CHANNEL_EXPIRY_MS = 120_000
"""A broker forgets a client without heartbeat this long."""
CONSUMER_OFFSET_FLUSH_INTERVAL_MS = 5_000
"""consumerOffset.json is written this often (flushConsumerOffsetInterval)."""
CONSUMER_OFFSET_MAX_ENTRIES = 1_000_000
"""Committed (topic@group, queue) offsets one broker keeps: bounds memory (~200 B each) and the
consumerOffset.json written every 5 s; a commit for a new entry beyond it is refused."""
TOPICS_MAX_COUNT = 100_000
"""Topics one broker holds: each is a route entry in every 30 s registration body; creation
beyond it is refused (auto-create then answers TOPIC_NOT_EXIST)."""
SUBSCRIPTION_GROUPS_MAX_COUNT = 100_000
"""Subscription groups one broker holds; creation beyond it is refused."""
TOPIC_QUEUE_NUMS_MAX_COUNT = 1_024
"""Read or write queues of one topic on one broker: RocketMQ's largest built-in topic
(BenchmarkTest) has 1024; more only multiply consume-queue files and route size."""
DELAY_LEVELS_MAX_COUNT = 64
"""messageDelayLevel entries: one SCHEDULE_TOPIC_XXXX queue and one timer each
(RocketMQ has 18)."""
DELAY_OFFSET_FLUSH_INTERVAL_MS = 10_000
"""delayOffset.json is written this often (flushDelayOffsetInterval)."""
SCHEDULE_DELIVERY_BATCH_MAX_MESSAGES = 128
"""Due messages one delivery step of a delay level (or of the timer) re-puts before it yields:
bounds the time one step holds the event loop (~30 µs each) while keeping steps few."""
SCHEDULE_RETRY_AFTER_FAILURE_MS = 10_000
"""A delivery whose put failed (disk full, store unavailable) is tried again after this
(RocketMQ's DELAY_FOR_A_PERIOD); the message stays where it is meanwhile."""
SCHEDULE_IDLE_CHECK_INTERVAL_MS = 1_000
"""A caught-up delay level or timer looks again this often even without an arrival wake-up
(arrivals wake it at once; this only covers a missed wake-up, e.g. after recovery)."""
TIMER_MAX_DELAY_MS = 3 * 86_400_000
"""Default furthest delivery time a timer message may ask for (RocketMQ 5's timerMaxDelaySec,
3 days): bounds how long its record must outlive commit-log retention (72 h by default)."""
TIMER_LOAD_WINDOW_MS = 600_000
"""Timer messages due within this window are held in memory; later ones stay only in the
timer log and are loaded by a rescan when the window moves on: memory follows the next 10
minutes of timers, not three days of them."""
TIMER_LOG_SEGMENT_ENTRIES = 262_144
"""Entries (20 bytes each, 5 MiB) per timer-log file: whole files are deleted once every
entry in them has been delivered."""
TRANSACTION_CHECK_INTERVAL_MS = 60_000
"""transactionCheckInterval: how often the broker looks for undecided half messages
(RocketMQ 4.9.7; 5.x uses 30 s)."""
TRANSACTION_TIMEOUT_MS = 6_000
"""transactionTimeOut: a half message younger than this is not checked yet (its producer is
probably still running the local transaction)."""
TRANSACTION_CHECK_MAX_COUNT = 15
"""transactionCheckMax: checks sent for one half message before it is given up to
TRANS_CHECK_MAX_TIME_TOPIC."""
TRANSACTION_CHECK_ROUND_MAX_MESSAGES = 10_000
"""Half messages one check round re-appends and asks about; the rest wait for the next round
(RocketMQ bounds a round by 60 s per queue instead): keeps a round's burst of writes and
oneway requests bounded when a producer group was down for long."""
TRANSACTION_OP_TRACKED_MAX_COUNT = 1_000_000
"""Op records remembered to compute the op queue's consume offset (16 bytes each). Past it the
oldest are forgotten: after a restart their halves look undecided and are resolved again (a
commit by the index, a rollback by a new check), never delivered twice."""
TRANSACTION_RECOVERY_READ_BATCH_ENTRIES = 256
"""Consume-queue entries read per step while rebuilding the pending table at start."""
TRANSACTION_CHECK_SEND_TIMEOUT_MS = 10
"""CHECK_TRANSACTION_STATE is oneway; RocketMQ gives its write 10 ms."""
TRANSACTION_CHECKER_THREADS_MAX_COUNT = 4
"""Threads a TransactionProducer runs synchronous checkers on (RocketMQ's checkThreadPoolMin/
MaxSize are 1; a few let slow checks overlap without unbounded threads)."""
TRANSACTION_CHECK_QUEUE_MAX_REQUESTS = 2_000
"""Checks waiting for a checker thread (RocketMQ's checkRequestHoldMax); more are dropped with
a warning — the broker asks again next round."""
DELIVERY_MARKER_SCAN_MAX_BYTES = 1 * GIB
"""After a restart, the commit log written since the last durable delivery progress is scanned
for delivered messages (exactly-once delivery); a longer tail is not scanned (at-least-once)
so a broker whose progress file is very old still starts in bounded time."""
REBALANCE_LOCK_MAX_LIVE_MS = 60_000
"""Broker-side queue lock lifetime without renewal."""
REBALANCE_LOCK_TABLE_MAX_ENTRIES = 1_000_000
"""Queue locks (group, queue) one broker keeps: one per queue of every orderly group, ~250 B
each; past it expired entries are purged and a lock on a new queue is refused (not granted)."""
BROKER_REGISTER_TIMEOUT_MS = 6_000
"""One REGISTER_BROKER or UNREGISTER_BROKER exchange with a name server (Java: 6000 ms)."""
CLIENT_HOUSEKEEPING_INTERVAL_MS = 10_000
"""How often the broker drops client channels silent past CLIENT_CHANNEL_EXPIRY_MS
(ClientHousekeepingService's scan period)."""
PULL_SUSPEND_MAX_MS = 30_000
"""Longest hold of a suspended pull whatever its suspendTimeoutMillis asks: clients time a pull
out at 30 s, so a longer hold only pins the long-poll table; answering earlier is harmless."""
CONSUMER_NOTIFY_TIMEOUT_MS = 100
"""NOTIFY_CONSUMER_IDS_CHANGED waits this long at most for buffer space (Java: 10 ms); a
consumer too slow to take it rebalances on its own timer."""
QUERY_MESSAGE_UNIQUE_KEY_MAX_MESSAGES = 32
"""Messages a QUERY_MESSAGE by unique key returns at most (defaultQueryMaxNum)."""
SERVER_LOG_FILE_MAX_BYTES = 100 * MIB
"""A server's log file (<data-dir>/logs/bolide.log) is rotated at this size."""
SERVER_LOG_FILE_BACKUP_COUNT = 5
"""Rotated server log files kept: with SERVER_LOG_FILE_MAX_BYTES, logs use at most 600 MiB."""
# broker admin requests (issue 9)
BROKER_CALL_CONSUMER_TIMEOUT_MS = 10_000
"""GET_CONSUMER_RUNNING_INFO forwarded to a client waits this long for its answer, then the
admin gets CONSUME_MSG_TIMEOUT (the Java broker's callConsumer timeout)."""
RESET_OFFSET_NOTIFY_TIMEOUT_MS = 3_000
"""RESET_CONSUMER_CLIENT_OFFSET (oneway) to one consumer waits this long at most for buffer
space; a consumer too slow to take it picks the new offsets up from the broker on restart."""

# --- client ----------------------------------------------------------------------------------
CLIENT_LOCK_MAX_LIVE_MS = 30_000
"""The client treats its queue lock as lost after this long without renewal."""
CLIENT_LOCK_RENEW_INTERVAL_MS = 20_000
"""lockAll period of an orderly consumer."""
CLIENT_LOCK_RENEW_INITIAL_DELAY_MS = 1_000
"""First lockAll after an orderly consumer starts (Java: 1 s)."""
CLIENT_LOCK_REQUEST_TIMEOUT_MS = 1_000
"""One LOCK_BATCH_MQ / UNLOCK_BATCH_MQ exchange (Java and C++: 1 s): a lock that cannot be
had quickly is tried again later rather than holding up a rebalance."""
ORDERLY_CONSUME_CONTINUOUSLY_MAX_MS = 60_000
"""An orderly consume task gives its queue back to the scheduler after this long
(MAX_TIME_CONSUME_CONTINUOUSLY), so one busy queue cannot starve the others."""
ORDERLY_SUSPEND_DEFAULT_MS = 1_000
"""SUSPEND_CURRENT_QUEUE_A_MOMENT waits this long before consuming the queue again
(suspendCurrentQueueTimeMillis)."""
ORDERLY_SUSPEND_MIN_MS = 10
"""Shortest suspension a listener may ask for (Java clamps to 10 ms .. 30 s)."""
ORDERLY_SUSPEND_MAX_MS = 30_000
"""Longest suspension a listener may ask for."""
ORDERLY_RESUBMIT_DELAY_MS = 10
"""A consume task that yielded (time slice used up, lock just regained) runs again this soon."""
ORDERLY_RELOCK_FIRST_DELAY_MS = 100
"""A consume task that finds its queue unlocked asks the broker for the lock after this."""
ORDERLY_RELOCK_RETRY_DELAY_MS = 3_000
"""...and, when the broker refused, looks again this much later (Java: 3 s)."""
ORDERLY_PULL_DELAY_NOT_LOCKED_MS = 3_000
"""Pulls of a queue whose lock is not held wait this long before looking again (Java: 3 s):
messages cached without the lock could not be consumed anyway."""
ORDERLY_DROP_WAIT_MS = 1_000
"""A rebalance that takes a queue away waits this long for the batch being consumed before it
unlocks the queue; past it, the queue is kept (dropped) and the next rebalance tries again."""
ORDERLY_LOCK_RETRY_REBALANCE_DELAY_MS = 1_000
"""An assigned queue whose lock the broker refused (its previous owner still holds it) is
tried again by a rebalance this soon, not only at the next 20 s rebalance."""
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
CLIENT_API_TIMEOUT_MS = 3_000
"""Routes, heartbeats, offsets, unregister and other client calls (mqClientApiTimeout)."""
PRODUCER_SEND_TIMEOUT_MS = 3_000
"""One send, retries included (sendMsgTimeout)."""
PRODUCER_SEND_RETRY_COUNT = 2
"""Extra attempts of a sync send on another broker (retryTimesWhenSendFailed)."""
PRODUCER_DEFAULT_TOPIC_QUEUE_COUNT = 4
"""Queues of a topic auto-created through TBW102 (defaultTopicQueueNums)."""
PRODUCER_QUEUE_START_INDEX_SPAN_COUNT = 2**31
"""A producer's queue rotation starts at a random index below this (Java's ThreadLocalIndex
starts at a random non-negative int), so short-lived producers spread over the queues."""
SEND_LATENCY_LEVELS_MS = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
"""Send latencies that mark a broker slow; paired with SEND_NOT_AVAILABLE_DURATIONS_MS
(MQFaultStrategy latencyMax)."""
SEND_NOT_AVAILABLE_DURATIONS_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
"""How long a broker is avoided after a send reached the latency level at the same index
(MQFaultStrategy notAvailableDuration)."""
SEND_FAILURE_LATENCY_MS = 30_000
"""Latency charged to a broker whose send failed: it is then avoided for the matching duration."""
PULL_MAX_IDLE_MS = 120_000
"""A process queue not pulled for this long is dropped and re-created by the next rebalance."""
CONSUMER_OFFSET_PERSIST_INITIAL_DELAY_MS = 10_000
"""First offset persistence after the client starts (Java waits 10 s)."""
ROUTE_POLL_INITIAL_DELAY_MS = 10
"""First route refresh after the client starts (Java: 10 ms)."""
HEARTBEAT_INITIAL_DELAY_MS = 1_000
"""First periodic heartbeat after the client starts (Java: 1 s)."""
# client consumers (push, lite pull, consumption)
PULL_BATCH_SIZE_MESSAGES = 32
"""Messages a push consumer asks per pull (pullBatchSize); the broker caps a batch at 32."""
PULL_RPC_TIMEOUT_MS = 30_000
"""Client timeout of a long-polling pull (consumerTimeoutMillisWhenSuspend): above the hold."""
PULL_DELAY_ON_ERROR_MS = 3_000
"""Wait before pulling a queue again after a failed pull (pullTimeDelayMillsWhenException)."""
PULL_DELAY_ON_BROKER_FLOW_CONTROL_MS = 20
"""Wait after a FLOW_CONTROL answer (PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL)."""
PULL_DELAY_ON_FLOW_CONTROL_MS = 50
"""Wait before looking again at a queue whose cache is over a threshold (Java: 50 ms)."""
PULL_OFFSET_ILLEGAL_FIX_DELAY_MS = 10_000
"""After OFFSET_ILLEGAL the corrected offset is stored this much later (Java: 10 s), so
in-flight consumption of the dropped queue settles first."""
CONSUME_BATCH_MAX_MESSAGES = 1
"""Messages per listener call of a push consumer (consumeMessageBatchMaxSize)."""
CONSUME_THREAD_MAX_COUNT = 20
"""Concurrent listener calls of a push consumer (consumeThreadMin/Max: the pool stays at 20)."""
CONSUME_THREAD_LIMIT_COUNT = 1_000
"""Largest consume_thread_max accepted: each is a worker task and, for sync listeners, a thread."""
CONSUME_BATCH_LIMIT_MESSAGES = 1_024
"""Largest consume batch accepted (Java refuses more than 1024)."""
RECONSUME_DEFAULT_MAX_TIMES = 16
"""Deliveries through %RETRY% before %DLQ% (maxReconsumeTimes -1 = 16)."""
CONSUME_TIMEOUT_MS = 15 * 60_000
"""A listener call running longer has its oldest message sent back (consumeTimeout, 15 min)."""
CONSUME_TIMEOUT_SWEEP_MAX_MESSAGES = 16
"""Timed-out messages one sweep sends back per queue at most (Java: 16)."""
CONSUME_RETRY_LATER_DELAY_MS = 5_000
"""A message that could not be sent back is consumed again locally this much later (Java)."""
CONSUME_SHUTDOWN_GRACE_MS = 10_000
"""Shutdown waits this long for listener calls in progress before giving up on them."""
SEND_BACK_TIMEOUT_MS = 5_000
"""CONSUMER_SEND_MSG_BACK timeout (Java: 5 s)."""
CONSUME_TIMESTAMP_DEFAULT_AGO_MS = 30 * 60_000
"""CONSUME_FROM TIMESTAMP without a timestamp starts 30 min before the consumer (Java)."""
LITE_PULL_BATCH_SIZE_MESSAGES = 10
"""Messages per pull and per poll() of a lite pull consumer (pullBatchSize)."""
LITE_PULL_SUSPEND_TIMEOUT_MS = 20_000
"""Long-poll hold a lite pull consumer asks for (brokerSuspendMaxTimeMillis)."""
LITE_PULL_CACHE_MAX_MESSAGES = 10_000
"""Messages pulled but not yet polled, all queues together (pullThresholdForAll)."""
LITE_PULL_POLL_TIMEOUT_MS = 5_000
"""poll() waits this long for messages by default (pollTimeoutMillis)."""
LITE_PULL_AUTO_COMMIT_INTERVAL_MS = 5_000
"""Auto-commit of polled offsets into the offset store (autoCommitIntervalMillis)."""
RETRY_ROUTE_WAIT_INITIAL_MS = 100
"""A new group's %RETRY% topic appears in the routes only after the broker, told by the first
heartbeat, re-registers: the consumer looks again after this, doubling..."""
RETRY_ROUTE_WAIT_MAX_MS = 3_000
"""...up to this gap..."""
RETRY_ROUTE_WAIT_ATTEMPTS = 10
"""...this many times (≈ 20 s in all), then leaves it to the periodic route refresh."""
# admin client and command line (issue 9)
ADMIN_REQUEST_TIMEOUT_MS = 5_000
"""One admin request to a name server or broker (DefaultMQAdminExt's timeoutMillis)."""
ADMIN_RUNNING_INFO_TIMEOUT_MS = BROKER_CALL_CONSUMER_TIMEOUT_MS + 2_000
"""GET_CONSUMER_RUNNING_INFO through a broker: the broker's wait for the client plus margin,
so the admin sees the broker's CONSUME_MSG_TIMEOUT rather than its own timeout."""
ADMIN_IN_FLIGHT_MAX_REQUESTS = 16
"""Requests one admin operation keeps in flight when it fans out over brokers, groups or
clients: a cluster of hundreds of brokers is asked in waves, not all at once."""
ADMIN_QUERY_BY_TIME_MAX_MESSAGES = 2_000
"""Messages a query by time range returns at most (the RocketMQ dashboard's limit)."""
ADMIN_QUERY_BY_KEY_MAX_MESSAGES = INDEX_QUERY_MAX_MESSAGES
"""Messages a query by key returns at most, over all brokers."""
ADMIN_RESEND_MAX_MESSAGES = ADMIN_QUERY_BY_TIME_MAX_MESSAGES
"""Dead letters one resend moves at most: bounds the work of one command."""
ADMIN_TAIL_BUFFER_MAX_MESSAGES = 1_024
"""Messages a tail has pulled but not yet handed out; pulls wait when it is full."""
# bolide bench (issue 10; the warm-up and drain bounds are bench/peers/README.md's contract)
BENCH_BROKER_START_TIMEOUT_MS = 60_000
"""Longest wait for the bench's own ``bolide standalone`` to print its ready line: imports
and store creation take seconds on a loaded 2-core machine."""
BENCH_BROKER_STOP_TIMEOUT_MS = 15_000
"""SIGTERM, then this long for the bench's broker to stop cleanly, then SIGKILL."""
BENCH_WARM_UP_MESSAGES = 5_000
"""Messages sent and read back, untimed, before the measured phase."""
BENCH_WARM_UP_MAX_MS = 1_000
"""Bound of each half (send, read back) of the warm-up."""
BENCH_E2E_DRAIN_MAX_MS = 5_000
"""After the last e2e send, how long the consumers may take to receive the rest."""
BENCH_LATENCY_SAMPLES_MAX_COUNT = 5_000_000
"""Latency samples one run keeps (40 MB of int64): more than a bounded run makes; later ones
are counted as dropped and left out of the percentiles."""
BENCH_PROGRESS_INTERVAL_MS = 200
"""How often the progress display is redrawn."""
BENCH_CLOSE_TIMEOUT_MS = 10_000
"""Bound on shutting one bench producer or consumer down."""
BENCH_RAW_PULL_SUSPEND_MS = 1_000
"""Long-poll hold of the raw mode's pulls: short, so that a stopping run is not held up."""
BENCH_BACKLOG_BATCH_MESSAGES = 32
"""Messages per send of the untimed consume backlog (batched: loading is not measured)."""
BENCH_SIGNAL_STOP_TIMEOUT_MS = 40_000
"""After SIGINT/SIGTERM, how long the run may take to stop its clients (two groups, each
``BENCH_CLOSE_TIMEOUT_MS``) and its broker (``BENCH_BROKER_STOP_TIMEOUT_MS``); past it the
bench SIGKILLs its children by pid and exits (issue 30: a stuck stop never leaves an orphan)."""
# child processes (issue 30: a child never outlives its parent)
CHILD_PARENT_WATCH_INTERVAL_MS = 1_000
"""Where prctl(PR_SET_PDEATHSIG) is missing, how often a child looks whether its parent died."""
SERVER_SIGNAL_STOP_TIMEOUT_MS = 120_000
"""After SIGINT/SIGTERM, how long ``bolide standalone|broker|namesrv|proxy`` may take to stop
cleanly (flush, checkpoint, unregister) before it exits anyway with code 1: a hung stop must
not keep the process (and its mapped store) alive forever."""


# --- spark (bolide.spark: the PySpark data source) --------------------------------------------
SPARK_PULL_BATCH_DEFAULT_MESSAGES = 256
"""Messages one pull of the Spark source asks for (pullBatchSize): a broker allowed larger
pulls (maxTransferCountOnMessageInMemory) sends up to this many; a default one sends 32 and
the source then asks for 32 (spark/queues.py)."""
SPARK_PULL_BATCH_MAX_MESSAGES = 1_024
"""Largest pullBatchSize accepted (Java refuses pullBatchSize above 1024)."""
SPARK_PULL_WINDOW_REQUESTS = 8
"""Pulls of consecutive offset ranges one input partition keeps in flight: the broker prepares
the next answers while the task decodes (4 already reach the single-connection rate here),
while buffering at most 8 x 256 KiB per task."""
SPARK_PULL_ATTEMPTS_MAX_COUNT = 5
"""Pulls of one offset range that may fail (transport error, or no progress below the planned
end) before the task fails; Spark then retries or fails the query."""
SPARK_PULL_RETRY_DELAY_MS = 200
"""Wait between those attempts: long enough for a reconnect, short against a task's life."""
SPARK_ARROW_BATCH_MAX_MESSAGES = 8_192
"""Rows per Arrow record batch a read yields: amortises the per-batch cost of Spark's Arrow
path, while 8192 x 1 KiB keeps one batch near 8 MiB."""
SPARK_ARROW_BATCH_MAX_BYTES = 64 * MIB
"""Body bytes per record batch a read yields: large bodies close a batch early (a binary column
holds at most 2 GiB, and Spark's Arrow path copies each batch)."""
SPARK_PLAN_WINDOW_REQUESTS = 64
"""Min/max offset or timestamp look-ups the driver keeps in flight while planning a batch."""
SPARK_WRITE_WINDOW_REQUESTS = 8
"""Send requests one sink partition keeps in flight (the bounded window of async sends): 8 x 256
rows keeps a broker busy while the task encodes, and bounds the queue a request waits behind at
the broker (more in flight only adds latency: a busy broker then times sends out)."""
SPARK_WRITE_BATCH_MAX_MESSAGES = 256
"""Rows packed into one batch send request by the sink (rows without delay or sharding key):
the sink's cost per request (≈ 60 µs of client CPU) spread over many rows."""
SPARK_WRITE_BATCH_MAX_BYTES = 1 * MIB
"""Body bytes packed into one batch send: well under the 4 MiB a broker accepts per request."""
SPARK_MAX_TRIGGER_DELAY_DEFAULT_MS = 15 * 60_000
"""With minMessagesPerTrigger, a trigger waits at most this long for enough messages (Kafka's
maxTriggerDelay default, 15 min), then reads what there is."""
SPARK_GROUP_COMMIT_TIMEOUT_MS = 3_000
"""Recording a query's progress as a group's offsets is best effort: this long, then a warning."""
SPARK_POP_BATCH_DEFAULT_MESSAGES = 1_000
"""consumeMode=pop: messages popped per micro-batch without maxMessagesPerTrigger (they travel
to the executors inside the batch's input partition, so a batch is kept modest)."""
SPARK_POP_INVISIBLE_DEFAULT_MS = 60_000
"""consumeMode=pop: a popped message's invisible time without the invisibleTime option (a
micro-batch must commit within it, or the message is delivered again)."""
SPARK_POP_INVISIBLE_MIN_MS = 1_000
"""consumeMode=pop: the shortest invisibleTime accepted (a shorter one re-delivers messages
while their micro-batch still runs)."""
SPARK_POP_POLL_MS = 1_000
"""consumeMode=pop: how long a broker holds a pop that finds nothing (one trigger's wait)."""

# --- ACL and TLS ---------------------------------------------------------------------------------
ACL_FILE_MAX_BYTES = 4 * MIB
"""plain_acl.yml larger than this is refused: thousands of accounts fit in far less, and the
file is parsed whole on every change."""
ACL_FILE_CHECK_INTERVAL_MS = 500
"""How often the ACL file's modification time and size are checked: a change takes effect
within about this long (RocketMQ's file watcher also looks every 500 ms)."""
ACL_KEY_MIN_CHARS = 7
"""accessKey and secretKey are longer than 6 characters (RocketMQ's rule, which its admin
tools enforce too)."""
ACL_DENIAL_LOG_INTERVAL_MS = 10_000
"""ACL refusals are logged at WARNING at most once per this interval (with a count of the rest):
a peer sending bad requests in a loop must not flood the broker's log."""
ACL_EXT_FIELD_MAX_CHARS = 64 * KIB
"""An AccessKey or Signature longer than this is refused before any lookup or HMAC."""
TLS_SNIFF_TIMEOUT_MS = 10_000
"""In permissive TLS mode a new connection's first byte tells TLS from plain remoting; a peer
that sends nothing for this long is disconnected."""
TLS_HANDSHAKE_TIMEOUT_MS = 10_000
"""A TLS handshake (either side) that takes longer fails."""
LISTEN_BACKLOG_COUNT = 100
"""Pending connections a listener Bolide binds itself (the permissive TLS listener, the 5.x
proxy, the dashboard) lets the kernel queue (asyncio's default)."""
ACCEPT_ERROR_BACKOFF_MS = 100
"""After a failed accept (out of file descriptors...) the permissive listener waits this long
before the next, instead of spinning on the same error."""
# --- master/slave replication (RocketMQ 4.x HA; round2-facts.md §4) ---------------------------

HA_TRANSFER_BATCH_BYTES = 32 * KIB
"""haTransferBatchSize: at most this many commit-log bytes in one master -> slave frame."""
HA_HEARTBEAT_INTERVAL_MS = 5_000
"""haSendHeartbeatInterval: an idle master sends a header-only frame, and a slave reports its
offset, at least this often."""
HA_HOUSEKEEPING_INTERVAL_MS = 20_000
"""haHousekeepingInterval: a peer silent this long is dropped (master) or left (slave)."""
HA_SLAVE_FALL_BEHIND_MAX_BYTES = 256 * MIB
"""haSlaveFallbehindMax: a SYNC_MASTER counts its slave in sync only within this many bytes;
beyond, sends answer SLAVE_NOT_AVAILABLE at once instead of waiting."""
HA_SYNC_SLAVE_TIMEOUT_MS = 3_000
"""syncFlushTimeout's twin for replication (GroupCommitRequest of 3 s in CommitLog): a
SYNC_MASTER send waits this long for the slave's ack, then answers FLUSH_SLAVE_TIMEOUT."""
HA_RECONNECT_INTERVAL_MS = 1_000
"""A slave retries a lost master this often (Java waits 5 s; a shorter wait narrows the
window in which a SYNC_MASTER answers SLAVE_NOT_AVAILABLE after a slave restart)."""
HA_READ_BUFFER_BYTES = 64 * KIB
"""One socket read of the HA stream (two transfer frames)."""
HA_SLAVE_CONNECTIONS_MAX_COUNT = 16
"""Slaves one master serves at once; more are refused (each costs a transfer task)."""
HA_SYNC_WAITERS_MAX_COUNT = 100_000
"""SYNC_MASTER sends waiting for an ack at once; beyond, sends answer FLUSH_SLAVE_TIMEOUT."""
HA_SLAVE_SYNC_INTERVAL_MS = 10_000
"""SlaveSynchronize: a slave copies topics, groups, consumer and delay offsets this often."""
HA_SLAVE_SYNC_INITIAL_DELAY_MS = 3_000
"""... the first copy 3 s after the slave starts (BrokerController)."""
HA_PULL_MEMORY_RATIO_PERCENT = 40
"""accessMessageInMemoryMaxRatio: a consumer whose unread backlog exceeds this share of RAM is
told to read from a slave (suggestWhichBrokerId) when slaveReadEnable is on."""
EPOCH_ENTRIES_MAX_COUNT = 100_000
"""Entries an epoch file (or an AutoSwitch master handshake) may hold: one per election, so a
larger count is damage or garbage, refused before allocating (12 B each on the wire)."""
ROUTE_REFRESH_MIN_INTERVAL_MS = 1_000
"""After a connection error or a not-master answer the client refreshes the topic's route at
once, but at most once per this interval per topic (a dead broker must not flood the name
server); well under the 30 s poll so failover converges in about a second."""
PULL_BROKER_DOWN_BACKOFF_MS = 10_000
"""A client that could not reach a broker address pulls from another address of the same
broker name (a slave) for this long before trying it again."""


ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT = 40
"""Share of physical memory, in percent, counted back from the commit log's end, that a
broker treats as in memory (RocketMQ's accessMessageInMemoryMaxRatio): a new consumer group
starts a queue at 0 only while its first message lies in that window (newGroupStartRule)."""

# controller mode bounds: base/limits_controller.py
HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS = 15_000
"""haMaxTimeSlaveNotCatchup: a replica not caught up this long leaves the SyncStateSet."""

# --- metrics, broker statistics and the dashboard (issue 18) ---------------------------------
STATS_MINUTE_SAMPLE_INTERVAL_MS = 10_000
"""The stats cells are sampled this often (RocketMQ's minute window: every 10 s)."""
STATS_MINUTE_SAMPLES_COUNT = 7
"""Minute-window samples kept: 7 samples 10 s apart span one minute, as in RocketMQ."""
STATS_HOUR_SAMPLE_INTERVAL_MS = 10 * 60_000
"""Hour-window sampling interval (RocketMQ: every 10 min)."""
STATS_HOUR_SAMPLES_COUNT = 7
"""Hour-window samples kept (7 x 10 min = one hour)."""
STATS_DAY_SAMPLE_INTERVAL_MS = 60 * 60_000
"""Day-window sampling interval (RocketMQ: every hour)."""
STATS_DAY_SAMPLES_COUNT = 25
"""Day-window samples kept (25 x 1 h = one day)."""
STATS_HISTORY_INTERVAL_MS = 60_000
"""The broker's own stats history (issue 28's charts) takes one point a minute."""
STATS_HISTORY_POINTS_COUNT = 60
"""History points kept per broker: one hour of minutes (the dashboard's charts span)."""
STATS_HISTORY_FILE_MAX_BYTES = 8 * MIB
"""The stats history file (kept across restarts) is at most this big: the oldest minutes are
left out first, so a broker with very many topic@group pairs still writes the newest."""
METRICS_REQUEST_HEAD_MAX_BYTES = 16 * KIB
"""A /metrics request line plus headers larger than this is refused (431): scrapers send
a few hundred bytes."""
METRICS_REQUEST_READ_TIMEOUT_MS = 10_000
"""A scraper that does not finish sending its request head within this is disconnected."""
METRICS_CONNECTIONS_MAX_COUNT = 64
"""Concurrent /metrics connections; more are closed at once (Prometheus uses one)."""
DASHBOARD_PAGE_DEADLINE_MS = 5_000
"""One deadline for all the admin calls behind one dashboard page; what has not answered by
then is shown as unavailable instead of holding the page (the N x 3 s complaint)."""
DASHBOARD_ADMIN_IN_FLIGHT_MAX_REQUESTS = 64
"""Admin requests one dashboard page keeps in flight at once (batched, never one per group
in sequence, never unbounded)."""
DASHBOARD_QUERY_MAX_MESSAGES = 64
"""Messages one message or dead-letter query shows (and resends or exports at once)."""
DASHBOARD_FORM_MAX_BYTES = 64 * KIB
"""A dashboard form (a test message body included) larger than this is refused."""
DASHBOARD_SESSION_MAX_AGE_MS = 8 * 3_600_000
"""A dashboard login lasts a working day."""
DASHBOARD_ACCOUNT_CLIENTS_MAX_COUNT = 64
"""Admin clients the dashboard keeps, one per logged-in account (ACL on); past this one is
closed and made again on that account's next page."""
DASHBOARD_SESSIONS_MAX_COUNT = 10_000
"""Dashboard sessions kept in memory; past this the oldest is dropped (its user logs in
again)."""
DASHBOARD_CHART_POINTS_COUNT = 60
"""Points of the live TPS chart kept per broker in the browser (one per refresh)."""
DASHBOARD_REFRESH_MS = 5_000
"""Live figures (TPS, lag) refresh this often in the browser."""
CONSUME_DIRECTLY_TIMEOUT_MS = 10_000
"""CONSUME_MESSAGE_DIRECTLY forwarded to a client waits this long for the listener's
verdict (the listener runs user code)."""
CONSUME_STATS_WINDOW_MS = 60_000
"""A consumer's consume TPS and RT (GET_CONSUMER_RUNNING_INFO) are over the last minute."""
CLIENT_STATS_POLL_INTERVAL_MS = 60_000
"""With /metrics on, each online consumer is asked for its running info this often (the
``rocketmq_client_*`` family); rocketmq-exporter polls once a minute too."""
CLIENT_STATS_POLL_MAX_REQUESTS = 16
"""Consumers asked at once by that poll."""


SQL_FILTER_COMPILED_MAX_COUNT = 1_024
"""SQL92 filter expressions kept compiled per broker process (one per distinct subscription
expression; beyond it the least recently used is compiled again when next needed)."""


def _check_relations() -> None:
    invariant(FRAME_MAX_BYTES > MESSAGE_BODY_MAX_BYTES, "a frame must carry a maximal body")
    invariant(FRAME_MAX_BYTES <= 2**31 - 1, "the frame length is a signed int32")
    invariant(
        BENCH_SIGNAL_STOP_TIMEOUT_MS > 2 * BENCH_CLOSE_TIMEOUT_MS + BENCH_BROKER_STOP_TIMEOUT_MS,
        "a signalled bench gets the time of its own orderly stop before it kills its children",
    )
    invariant(
        COMMIT_LOG_SEGMENT_BYTES > MESSAGE_BODY_MAX_BYTES + MESSAGE_PROPERTIES_MAX_BYTES + KIB,
        "a default segment holds the largest record",
    )
    invariant(COMMIT_LOG_SEGMENT_MIN_BYTES <= COMMIT_LOG_SEGMENT_BYTES, "segment bounds order")
    invariant(WRITE_BUFFER_LOW_WATER_BYTES < WRITE_BUFFER_HIGH_WATER_BYTES, "water marks order")
    invariant(RECONNECT_BACKOFF_INITIAL_MS <= RECONNECT_BACKOFF_MAX_MS, "back-off order")
    invariant(PULL_SUSPEND_TIMEOUT_MS < 30_000, "long poll shorter than the client's pull RPC")
    invariant(PULL_SUSPEND_TIMEOUT_MS <= PULL_SUSPEND_MAX_MS, "the broker holds what clients ask")
    invariant(CLIENT_LOCK_RENEW_INTERVAL_MS < CLIENT_LOCK_MAX_LIVE_MS, "renew before expiry")
    invariant(CLIENT_LOCK_MAX_LIVE_MS < REBALANCE_LOCK_MAX_LIVE_MS, "client lease inside broker's")
    invariant(
        ORDERLY_SUSPEND_MIN_MS <= ORDERLY_SUSPEND_DEFAULT_MS <= ORDERLY_SUSPEND_MAX_MS, "order"
    )
    invariant(HEARTBEAT_INTERVAL_MS < CLIENT_CHANNEL_EXPIRY_MS, "heartbeat before expiry")
    invariant(BROKER_REGISTER_INTERVAL_MS < BROKER_EXPIRY_MS, "register before expiry")
    invariant(0 < DISK_MAX_USED_SPACE_RATIO_PERCENT < 100, "a ratio in percent")
    invariant(0 < DISK_SPACE_CLEAN_FORCIBLY_RATIO_PERCENT < 100, "a ratio in percent")


_check_relations()


# --- POP consumption and the 5.x gRPC proxy -----------------------------------------------------

POP_REVIVE_INTERVAL_MS = 1_000
"""The revive timer sleeps at most this long (it wakes earlier for the next deadline)."""
POP_FROM_RETRY_PROBABILITY_PERCENT = 20
"""A non-orderly pop reads the group's POP retry topic first this often (Java's
popFromRetryProbability); otherwise after the topic's queues, to top the batch up."""
POP_LONG_POLL_MAX_PARKED_REQUESTS = 10_000
"""Pops waiting for messages at once; beyond it a pop answers POLLING_FULL at once (Java's
maxPopPollingSize is 100k per broker; Bolide holds a future per waiter)."""
POP_LOG_COMPACT_BYTES = 64 * MIB
"""The POP checkpoint log is rewritten from a snapshot when it grows past this."""
POP_POLL_TIME_MAX_MS = 30_000
"""A pop waits at most this long for messages (the proxy asks for at most 20 s)."""
POP_BATCH_MAX_MESSAGES = 32
"""Messages one pop returns at most (the 5.x receive batch size default)."""
POP_INVISIBLE_TIME_MAX_MS = 12 * 3_600_000
"""Longest invisible time (Apache proxy maxInvisibleTimeMills, 12 h)."""
PROXY_MIN_INVISIBLE_TIME_FOR_RECEIVE_MS = 10_000
"""Shortest invisible time a receive may ask for (Apache minInvisibleTimeMillsForRecv)."""
PROXY_DEFAULT_INVISIBLE_TIME_MS = 60_000
"""Invisible time of a receive with auto renew (Apache defaultInvisibleTimeMills)."""
PROXY_LONG_POLLING_MAX_MS = 20_000
"""A receive waits at most this long for messages (Apache's long-polling maximum)."""
PROXY_MESSAGE_BODY_MAX_BYTES = 4 * MIB
"""Largest body a 5.x producer may send (Settings.publishing.max_body_size)."""
PROXY_ROUTE_CACHE_MS = 3_000
"""Topic routes, topic and group configs are cached this long by the proxy."""
PROXY_RPC_TIMEOUT_MS = 5_000
"""The proxy's remoting requests to brokers time out after this (plus any long poll)."""
PROXY_CLIENT_EXPIRY_MS = 120_000
"""A 5.x client silent this long (no heartbeat, no telemetry) is forgotten."""
PROXY_CONSUMER_CONNECTIONS_MAX_COUNT = 4_096
"""5.x consumers the proxy registers with the brokers over a connection of their own (so
each is a member of its group there); beyond it a consumer shares the proxy's connection
(warned), since each one costs a socket per broker."""
PROXY_PRODUCER_HEARTBEAT_INTERVAL_MS = 10_000
"""How often the proxy heartbeats brokers for the transactional producer groups it serves."""
PROXY_AUTO_RENEW_AHEAD_MS = 10_000
"""An auto-renewed message's invisible time is renewed this long before it ends (Apache
renewAheadTimeMillis)."""
PROXY_AUTO_RENEW_INTERVAL_MS = 3_000
"""How often the proxy looks for auto-renewed messages due for renewal."""
PROXY_AUTO_RENEW_MAX_MESSAGES = 100_000
"""Messages the proxy renews at once; beyond it a message just comes back after 60 s."""
TIMER_RECALLED_MAX_ENTRIES = 100_000
"""Recalled timer messages remembered between their marker and their own due time (1 ms)."""
PROXY_SETTINGS_LOOKUP_MS = 3_000
"""The Telemetry settings reply waits at most this long for the group's settings (push
consumers give up after 10 s), then answers with the defaults."""
PROXY_RECEIVE_ATTEMPT_CACHE_MAX_ENTRIES = 1_000
"""Orderly receives whose batch the proxy keeps for a retry with the same attempt id (at
most 32 messages each)."""
PROXY_GOAWAY_DRAIN_MAX_MS = 30_000
"""After a client's HTTP/2 GOAWAY the proxy finishes the calls already open on the
connection (as the reference gRPC server does) for this long at most, then closes it: a
stream the client never ends cannot hold the socket forever."""
PROXY_HTTP2_CLOSED_STREAMS_MAX_COUNT = 1_024
"""Closed streams each gRPC connection remembers (to tell a late frame on a reset stream from
one on a finished stream). h2 keeps 65,536 by default, about 8 MiB per connection at ~130 B
each, which a busy 5.x client fills in half an hour (the soak's heap growth, issue 30); a
peer's late frames come within a round trip, not a thousand calls later."""
PROXY_TRANSACTION_CHECK_QUEUE_MAX_ENTRIES = 1_000
"""Transaction checks waiting to be pushed over a Telemetry stream, per client."""
PRODUCER_AUTO_BATCH_MAX_MESSAGES = 256
"""Messages one natural batch of the producer (auto_batch) carries at most: bounds the time one
request holds the broker's put path and the failure blast radius of one request."""
PRODUCER_AUTO_BATCH_MAX_BYTES = 128 * KIB
"""Encoded bytes of one natural batch at most (RocketMQ 5's autoBatch batchMaxBytes is 32 KiB,
Kafka's batch.size 16 KiB; larger here because there is no linger and one request per broker
round trip carries what waited)."""
PRODUCER_CHECKED_TOPICS_MAX_ENTRIES = 4_096
"""Topic names a process remembers as valid so the producer checks each name once, not per
send: bounds the memory a program sending to ever-new topics can pin."""
SEGMENT_PREFAULT_INLINE_MAX_BYTES = 256 * KIB
"""Reserved ranges up to this size are pre-faulted on the caller's thread (~0.4 ms at most);
larger ones (commit-log chunks) on the prefault thread, off the event loop."""
PRODUCER_AUTO_BATCH_MAX_IN_FLIGHT_REQUESTS = 4
"""Single sends in flight at once for one topic without a chosen queue under auto_batch (a
chosen queue has one, for its order; Kafka's max.in.flight is 5): sparse sends do not wait
behind a slow answer. A batch goes alone: once sends come faster than answers, everything
waits for it and batches (measured at 4 x 32 in flight: 32 messages per request and 9 us of
client CPU per message, where two requests of any kind gave 16 per request and 12 us)."""
RECOVERY_QUEUE_RUN_MAX_ENTRIES = 1024
"""Consume-queue entries (20 bytes each) recovery collects for one queue before it writes
them in one run: fewer calls a record, at most 20 KiB held a queue (and at most
STORE_NAME_CACHE_MAX_ENTRIES queues collecting at once)."""
REPLY_PUSH_TIMEOUT_MS = 3_000
"""PUSH_REPLY_MESSAGE_TO_CLIENT waits this long for the requester's answer (Java's
ReplyMessageProcessor invokes it synchronously with 3 s)."""
REQUEST_REPLY_PENDING_MAX_COUNT = 100_000
"""Requests one client may have waiting for their reply at once (each holds a future)."""

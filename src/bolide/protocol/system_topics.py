"""The protocol's vocabulary of reserved names: system topics, their prefixes, system groups.

One home for every name a RocketMQ broker or client gives a special meaning (RocketMQ keeps
them in ``MixAll``, ``TopicValidator`` and the transaction and POP services). Brokers, clients,
the CLI and the dashboard import them from here; nothing else spells them out.

Topics

* ``%RETRY%<group>``: a consumer group's messages waiting to be consumed again;
  ``%DLQ%<group>``: its dead letters, after too many attempts (see docs/architecture.md,
  "Retry and dead letters").
* ``TBW102``: the template producers name as ``defaultTopic`` for auto-created topics.
* ``SCHEDULE_TOPIC_XXXX``: delayed messages by level (queue = level - 1);
  ``rmq_sys_wheel_timer``: messages with an arbitrary delivery time (timer wheel).
* ``RMQ_SYS_TRANS_HALF_TOPIC`` / ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: prepared transactional
  messages and their commit/rollback records; ``TRANS_CHECK_MAX_TIME_TOPIC``: half messages
  checked too often.
* ``rmq_sys_REVIVE_LOG_<cluster>``: the POP consumer's revive log.
* ``RMQ_SYS_TRACE_TOPIC``: the default message-trace topic.

Groups

* ``CID_RMQ_SYS_*``: system consumer groups, created on demand even without auto-creation;
* ``TOOLS_CONSUMER``, ``FILTERSRV_CONSUMER``, ``SELF_TEST_C_GROUP``, ``CID_ONS*``: groups every
  broker has for its own tools.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "BENCHMARK_TOPIC",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DEFAULT_TRACE_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "FILTERSRV_CONSUMER_GROUP",
    "OFFSET_MOVED_EVENT",
    "POP_RETRY_SEPARATOR_V2",
    "REGION_TRACE_TOPIC_PREFIX",
    "REPLY_TOPIC_SUFFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "REVIVE_LOG_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "SELF_TEST_CONSUMER_GROUP",
    "SELF_TEST_TOPIC",
    "SEND_FORBIDDEN_TOPICS",
    "SYSTEM_CONSUMER_GROUP_PREFIX",
    "SYSTEM_GROUPS",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIX",
    "TIMER_TOPIC",
    "TOOLS_CONSUMER_GROUP",
    "TRANS_CHECK_GROUP",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_HALF_TOPIC",
    "dlq_topic",
    "group_of_dlq_topic",
    "group_of_retry_topic",
    "is_dlq_topic",
    "is_pop_retry_topic_v2",
    "is_retry_topic",
    "is_send_forbidden_topic",
    "is_system_consumer_group",
    "is_system_group",
    "is_system_topic",
    "pop_retry_topic",
    "retry_topic",
    "revive_log_topic",
    "topic_kind",
]

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
"""Prefix of a group's retry topic."""
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
"""Prefix of a group's dead-letter topic."""
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
"""The template producers name as ``defaultTopic``; present only with autoCreateTopicEnable."""
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Delayed messages wait here, queue = delay level - 1."""
TIMER_TOPIC = "rmq_sys_wheel_timer"
"""Timer messages (TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC) wait here, queue 0."""
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
"""Prepared (half) transactional messages wait here until committed or rolled back."""
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
"""One record per commit or rollback of a half message."""
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
"""Half messages checked more than transactionCheckMax times end here."""
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
"""The default msgTraceTopicName."""
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
"""Any topic with this prefix belongs to the broker."""
REVIVE_LOG_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
"""The POP revive log is ``rmq_sys_REVIVE_LOG_<cluster>``."""
REGION_TRACE_TOPIC_PREFIX = "rmq_sys_TRACE_DATA_"
"""Per-region trace topics: the C++ 2.x client (and Java's CLOUD channel) write to
``rmq_sys_TRACE_DATA_<regionId>``."""
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"
"""``<cluster>_REPLY_TOPIC`` carries request-reply answers."""

SEND_FORBIDDEN_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""Producers may not send to these (the send path answers NO_PERMISSION)."""
SYSTEM_TOPICS = SEND_FORBIDDEN_TOPICS | {
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    DEFAULT_TRACE_TOPIC,
}
"""System topics whatever a broker's configuration (a broker adds its cluster, broker, reply
and trace topic names)."""

SYSTEM_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"
"""Groups with this prefix are created on demand even when auto-creation is off."""
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
"""The group admin tools pull with (built into every broker)."""
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
"""The group the transaction checker consumes the half topic with."""
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
"""A consumer's producer for messages sent back to the retry topic."""
_ONS_GROUP_PREFIX = "CID_ONS"

SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    TRANS_CHECK_GROUP,
)
"""Groups a RocketMQ broker always has (admin tools, self test, transactions)."""
_SYSTEM_GROUP_PREFIXES = (
    SYSTEM_CONSUMER_GROUP_PREFIX,
    _ONS_GROUP_PREFIX,
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a group's messages to reconsume wait."""
    return RETRY_GROUP_TOPIC_PREFIX + group


POP_RETRY_SEPARATOR_V2 = "+"
"""Between group and topic in a POP retry topic's V2 name (Java's KeyBuilder)."""


def pop_retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """``%RETRY%<group>_<topic>``: where a POP group's expired messages of ``topic`` come back
    (Java's V1 name, the default), or ``%RETRY%<group>+<topic>`` with ``v2`` (the broker's
    enableRetryTopicV2); a retry topic's own messages stay in it."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    separator = POP_RETRY_SEPARATOR_V2 if v2 else "_"
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{separator}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    """Whether ``topic`` is a POP retry topic's V2 name (Java's isPopRetryTopicV2)."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and POP_RETRY_SEPARATOR_V2 in topic


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where a group's messages go after too many retries."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def revive_log_topic(cluster: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: the POP revive log of a cluster."""
    return REVIVE_LOG_TOPIC_PREFIX + cluster


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str | None:
    """The group of ``%RETRY%<group>``, None for another topic."""
    return topic[len(RETRY_GROUP_TOPIC_PREFIX) :] if is_retry_topic(topic) else None


def group_of_dlq_topic(topic: str) -> str | None:
    """The group of ``%DLQ%<group>``, None for another topic."""
    return topic[len(DLQ_GROUP_TOPIC_PREFIX) :] if is_dlq_topic(topic) else None


def is_send_forbidden_topic(topic: str) -> bool:
    """True for the system topics producers may not send to (SCHEDULE_TOPIC_XXXX, ...)."""
    return topic in SEND_FORBIDDEN_TOPICS


def is_system_topic(topic: str) -> bool:
    """A topic the broker owns by name alone (a broker also owns its cluster/broker names)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def topic_kind(topic: str, system_names: Collection[str] = ()) -> str:
    """How the admin tools list ``topic``: ``retry``, ``dlq``, ``system`` (RocketMQ's system
    topics and ``system_names``: the cluster and broker names, which name servers list as
    topics) or ``normal``."""
    if is_retry_topic(topic):
        return "retry"
    if is_dlq_topic(topic):
        return "dlq"
    if is_system_topic(topic) or topic in system_names:
        return "system"
    return "normal"


def is_system_consumer_group(group: str) -> bool:
    """``CID_RMQ_SYS_*``: created on demand even when group auto-creation is off."""
    return group.startswith(SYSTEM_CONSUMER_GROUP_PREFIX)


def is_system_group(group: str) -> bool:
    """A group every broker has for its own tools (``group list`` hides them)."""
    return group in SYSTEM_GROUPS or group.startswith(_SYSTEM_GROUP_PREFIXES)

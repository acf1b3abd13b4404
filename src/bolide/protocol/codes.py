"""The one catalog of wire codes: request codes, response codes, language codes, and the table
that says which response codes are worth retrying.

Values are those of Apache RocketMQ 4.9 (RequestCode, ResponseCode, RemotingSysResponseCode,
LanguageCode). Code elsewhere compares against these enums, never against bare numbers.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from bolide.base.errors import RemoteError, invariant

__all__ = [
    "RESPONSE_CODE_RETRIABLE",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "is_retriable",
    "remote_error",
]


class LanguageCode(enum.IntEnum):
    """The peer's implementation language: the name travels in JSON headers, the byte in binary."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class RequestCode(enum.IntEnum):
    """Request codes of the 4.x remoting protocol (docs/protocol.md §2.0)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    RECALL_MESSAGE = 370
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    BROKER_HEARTBEAT = 904
    """5.x controller mode (round3-facts §1.3): a broker's oneway heartbeat to every controller."""
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    BOLIDE_QUERY_HALF_MESSAGES = 90_016
    """Bolide's own code (RocketMQ has no request listing pending transactions): the
    undecided half messages of a broker (:mod:`bolide.protocol.bodies.transaction`). Apache
    RocketMQ uses no code between 10 000 and its controller codes (200 001 and up)."""


class ResponseCode(enum.IntEnum):
    """Response codes (docs/protocol.md §2.1). PULL_* and QUERY_NOT_FOUND are statuses, not
    failures."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    """2000–2016: the 5.x controller's answers (round3-facts §1.3)."""
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


_R = ResponseCode
RESPONSE_CODE_RETRIABLE: Mapping[int, bool] = MappingProxyType(
    {
        # True: the same request may succeed later or elsewhere without the caller changing it.
        _R.SUCCESS: False,
        _R.SYSTEM_ERROR: True,  # the Java producer retries it on another broker
        _R.SYSTEM_BUSY: True,  # flow control: back off and retry
        _R.REQUEST_CODE_NOT_SUPPORTED: False,
        _R.TRANSACTION_FAILED: False,
        _R.FLUSH_DISK_TIMEOUT: True,  # stored but not yet flushed
        _R.SLAVE_NOT_AVAILABLE: True,
        _R.FLUSH_SLAVE_TIMEOUT: True,
        _R.MESSAGE_ILLEGAL: False,  # the message itself is bad
        _R.SERVICE_NOT_AVAILABLE: True,  # store starting, shutting down or full
        _R.VERSION_NOT_SUPPORTED: False,
        _R.NO_PERMISSION: True,  # the Java producer retries it (broker write perm wiped)
        _R.TOPIC_NOT_EXIST: True,  # routes converge after creation or registration
        _R.TOPIC_EXIST_ALREADY: False,
        _R.PULL_NOT_FOUND: True,
        _R.PULL_RETRY_IMMEDIATELY: True,
        _R.PULL_OFFSET_MOVED: False,  # the offset must change first
        _R.QUERY_NOT_FOUND: False,
        _R.SUBSCRIPTION_PARSE_FAILED: False,
        _R.SUBSCRIPTION_NOT_EXIST: True,  # the next heartbeat registers it
        _R.SUBSCRIPTION_NOT_LATEST: True,  # the next heartbeat updates it
        _R.SUBSCRIPTION_GROUP_NOT_EXIST: False,
        _R.FILTER_DATA_NOT_EXIST: False,
        _R.FILTER_DATA_NOT_LATEST: True,
        _R.TRANSACTION_SHOULD_COMMIT: False,
        _R.TRANSACTION_SHOULD_ROLLBACK: False,
        _R.TRANSACTION_STATE_UNKNOW: False,
        _R.TRANSACTION_STATE_GROUP_WRONG: False,
        _R.NO_BUYER_ID: True,  # in the Java producer's retry set
        _R.NOT_IN_CURRENT_UNIT: True,  # in the Java producer's retry set
        _R.CONSUMER_NOT_ONLINE: True,  # the consumer may come back
        _R.CONSUME_MSG_TIMEOUT: True,
        _R.NO_MESSAGE: False,
        _R.UPDATE_AND_CREATE_ACL_CONFIG_FAILED: False,
        _R.DELETE_ACL_CONFIG_FAILED: False,
        _R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: False,
        _R.FLOW_CONTROL: True,
        _R.CONTROLLER_FENCED_MASTER_EPOCH: False,  # the sender's view is stale: re-read first
        _R.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: False,
        _R.CONTROLLER_INVALID_MASTER: False,
        _R.CONTROLLER_INVALID_REPLICAS: False,
        _R.CONTROLLER_MASTER_NOT_AVAILABLE: True,  # a replica may come back
        _R.CONTROLLER_INVALID_REQUEST: False,
        _R.CONTROLLER_BROKER_NOT_ALIVE: True,
        _R.CONTROLLER_NOT_LEADER: True,  # ask the leader (1005 names it)
        _R.CONTROLLER_BROKER_METADATA_NOT_EXIST: False,  # register first
        _R.CONTROLLER_INVALID_CLEAN_BROKER_METADATA: False,
        _R.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: False,
        _R.CONTROLLER_MASTER_STILL_EXIST: False,
        _R.CONTROLLER_ELECT_MASTER_FAILED: True,  # a candidate may become alive
        _R.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: False,
        _R.CONTROLLER_BROKER_ID_INVALID: False,
        _R.CONTROLLER_JRAFT_INTERNAL_ERROR: True,
        _R.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: False,
    }
)
"""Response code -> whether retrying the same request may succeed. Unknown codes: not retriable."""


def is_retriable(code: int) -> bool:
    """Whether a response with ``code`` is worth retrying; unknown codes are not."""
    return RESPONSE_CODE_RETRIABLE.get(code, False)


def remote_error(code: int, remark: str | None) -> RemoteError:
    """Build the :class:`RemoteError` for a non-success response, retriability from the table."""
    return RemoteError(code, remark, retriable=is_retriable(code))


invariant(
    set(ResponseCode) <= set(RESPONSE_CODE_RETRIABLE), "every response code has a retriability"
)

"""One coroutine per request code the client sends. Each takes the :class:`ClientPool`, the
peer's address and a timeout, and turns response codes into typed errors through
:func:`bolide.protocol.codes.remote_error` (see :mod:`.call`)."""

from bolide.client.rpc.call import call, call_oneway, describe_code
from bolide.client.rpc.client import (
    check_client_config,
    get_consumer_list_by_group,
    heartbeat,
    lock_batch_mq,
    unlock_batch_mq,
    unregister_client,
)
from bolide.client.rpc.namesrv import get_route
from bolide.client.rpc.offsets import (
    get_earliest_store_time,
    get_max_offset,
    get_min_offset,
    query_consumer_offset,
    search_offset_by_timestamp,
    update_consumer_offset,
)
from bolide.client.rpc.pull import PullResult, PullStatus, filter_by_tags, pull_message
from bolide.client.rpc.query import query_message, view_message, view_message_by_id
from bolide.client.rpc.send import (
    recall_message,
    send_message,
    send_message_back,
    send_message_oneway,
)

__all__ = [
    "PullResult",
    "PullStatus",
    "call",
    "call_oneway",
    "check_client_config",
    "describe_code",
    "filter_by_tags",
    "get_consumer_list_by_group",
    "get_earliest_store_time",
    "get_max_offset",
    "get_min_offset",
    "get_route",
    "heartbeat",
    "lock_batch_mq",
    "pull_message",
    "query_consumer_offset",
    "query_message",
    "recall_message",
    "search_offset_by_timestamp",
    "send_message",
    "send_message_back",
    "send_message_oneway",
    "unlock_batch_mq",
    "unregister_client",
    "update_consumer_offset",
    "view_message",
    "view_message_by_id",
]

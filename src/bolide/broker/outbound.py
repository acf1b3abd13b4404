"""Every request the broker sends, built in one place (RocketMQ's ``BrokerOuterAPI`` for name
servers, master and controller, and ``Broker2Client`` for its clients).

Each function returns the command, ready for the caller's channel or pool; sending it, its
timeout and what a failure means stay with the caller, which knows why it asks. Oneway
requests are built with the oneway flag already set.

==========================  ================================  =================================
to                          request (code)                    caller
==========================  ================================  =================================
name servers                REGISTER_BROKER (103),            registration
                            UNREGISTER_BROKER (104)
its master (slave)          GET_ALL_TOPIC_CONFIG (21), ...    ha/metadata_sync
the controller              any controller code,              controller_mode/replicas_manager
                            BROKER_HEARTBEAT (904, oneway)
a producer                  CHECK_TRANSACTION_STATE (39,      transactions/service
                            oneway)
a consumer                  NOTIFY_CONSUMER_IDS_CHANGED (40,  broker
                            oneway), RESET_CONSUMER_CLIENT_   handlers/admin_consumers
                            OFFSET (220, oneway), GET_        handlers/admin_consumers
                            CONSUMER_STATUS_FROM_CLIENT
                            (221), GET_CONSUMER_RUNNING_INFO  handlers/admin_consumers,
                            (307), CONSUME_MESSAGE_DIRECTLY   metrics/client_stats
                            (309)
a requester (reply)         PUSH_REPLY_MESSAGE_TO_CLIENT      handlers/reply
                            (105)
==========================  ================================  =================================
"""

from __future__ import annotations

from collections.abc import Mapping

from bolide.protocol.bodies import MessageQueue, ResetOffsetBody, ResetOffsetBodyForC
from bolide.protocol.codes import LanguageCode, RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    RegisterBrokerRequestHeader,
    ResetOffsetRequestHeader,
    UnregisterBrokerRequestHeader,
)
from bolide.protocol.headers.controller import BrokerHeartbeatRequestHeader

__all__ = [
    "LIST_FORM_LANGUAGES",
    "broker_heartbeat_request",
    "check_transaction_state_request",
    "consume_message_directly_request",
    "consumer_running_info_request",
    "consumer_status_request",
    "controller_request",
    "master_metadata_request",
    "notify_consumer_ids_changed_request",
    "push_reply_request",
    "register_broker_request",
    "reset_offset_request",
    "unregister_broker_request",
]

LIST_FORM_LANGUAGES = frozenset({LanguageCode.CPP, LanguageCode.PYTHON})
"""Consumer languages sent the list form of the reset body (handlers/admin_consumers)."""


# --- name servers, master, controller ------------------------------------------------------------


def register_broker_request(header: RegisterBrokerRequestHeader, body: bytes) -> RemotingCommand:
    """REGISTER_BROKER (103): the broker's identity and its topics (a RegisterBrokerBody)."""
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)


def unregister_broker_request(header: UnregisterBrokerRequestHeader) -> RemotingCommand:
    """UNREGISTER_BROKER (104), sent on a clean stop."""
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields())


def master_metadata_request(code: RequestCode) -> RemotingCommand:
    """A slave's fetch of one of its master's tables (GET_ALL_TOPIC_CONFIG and the like: no
    header, no body)."""
    return RemotingCommand.request(code)


def controller_request(
    code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    """A request to a controller (its header's fields and JSON body made by the caller)."""
    return RemotingCommand.request(code, fields, body)


def broker_heartbeat_request(header: BrokerHeartbeatRequestHeader) -> RemotingCommand:
    """BROKER_HEARTBEAT (904) to a controller, oneway."""
    return RemotingCommand.request(
        RequestCode.BROKER_HEARTBEAT, header.to_ext_fields(), oneway=True
    )


# --- clients -------------------------------------------------------------------------------------


def check_transaction_state_request(fields: Mapping[str, str], record: bytes) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE (39) to a producer of the half's group, oneway: the header's
    fields and the half's stored record (transactions/checks.check_request makes both)."""
    return RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields, record, oneway=True)


def notify_consumer_ids_changed_request(group: str) -> RemotingCommand:
    """NOTIFY_CONSUMER_IDS_CHANGED (40) to a consumer of ``group``, oneway."""
    fields = NotifyConsumerIdsChangedRequestHeader(group).to_ext_fields()
    return RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, fields, oneway=True)


def reset_offset_request(
    header: ResetOffsetRequestHeader, offsets: dict[MessageQueue, int], language: LanguageCode
) -> RemotingCommand:
    """RESET_CONSUMER_CLIENT_OFFSET (220, oneway) for a consumer written in ``language``: the
    list form and atoi-readable ``isForce`` for C++ (and Python), the Java form otherwise."""
    if language in LIST_FORM_LANGUAGES:
        fields = header.to_cpp_ext_fields()
        body = ResetOffsetBodyForC(offsets).to_json()
    else:
        fields = header.to_ext_fields()
        body = ResetOffsetBody(offsets).to_json()
    return RemotingCommand.request(
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body, oneway=True
    )


def consumer_status_request(header: GetConsumerStatusRequestHeader) -> RemotingCommand:
    """GET_CONSUMER_STATUS_FROM_CLIENT (221): a consumer's committed offsets of a topic."""
    return RemotingCommand.request(
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, header.to_ext_fields()
    )


def consumer_running_info_request(header: GetConsumerRunningInfoRequestHeader) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307) to the consumer the header names."""
    return RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext_fields())


def consume_message_directly_request(
    header: ConsumeMessageDirectlyResultRequestHeader, record: bytes
) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (309): the stored ``record`` for the named consumer's
    listener."""
    return RemotingCommand.request(
        RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_ext_fields(), record
    )


def push_reply_request(fields: Mapping[str, str], body: bytes) -> RemotingCommand:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (105): a reply message for the requester that waits on it
    (the header's fields as handlers/reply builds them, the reply's body)."""
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body)

"""SendMessage, EndTransaction, and transaction checks pushed to 5.x producers.

* Send: each message must carry a message id, a body of at most 4 MiB, and a type the topic
  accepts (``message.type``); FIFO messages go to the queue their message group hashes to
  (Guava's consistent hash, as the Apache proxy), others round robin over writable queues.
  Each is a SEND_MESSAGE_V2 to the queue's broker.
* Transactions: the half message is sent with ``TRAN_MSG=true`` and ``PGROUP`` = the topic
  (the proxy's producer group for it). The transaction id the client gets names the broker,
  the half message's commit-log and queue offsets and the broker's transaction id, so an
  EndTransaction (from the client, or answering a check) becomes END_TRANSACTION (37, oneway,
  as the Java producer sends it) without any state in the proxy.
* The proxy heartbeats every broker as producer of each topic a live 5.x producer publishes,
  so a broker's CHECK_TRANSACTION_STATE (39) reaches it; it becomes a Telemetry
  ``recover_orphaned_transaction_command`` to one producer of that topic.
"""

from __future__ import annotations

import itertools
import logging
import time

from bolide.base import limits
from bolide.base.errors import BolideError, ProtocolError, RemoteError, TransportError
from bolide.client.rpc.send import recall_message, send_message_answer
from bolide.client.rpc.transactions import end_transaction
from bolide.protocol.bodies import PERM_WRITE
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    HeaderError,
    SendMessageRequestHeader,
)
from bolide.protocol.headers.recall import (
    RecallHandle,
    RecallMessageRequestHeader,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import decode_record, encode_properties
from bolide.protocol.system_topics import AUTO_CREATE_TOPIC_KEY_TOPIC
from bolide.proxy.brokers import BrokerDirectory, BrokerQueues
from bolide.proxy.clients import ClientRegistry
from bolide.proxy.messages import consistent_hash, properties_of, to_proto_message
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.routing import accepted_types
from bolide.proxy.status import ProxyError, code_of_error, code_of_response, status
from bolide.remoting import Connection

__all__ = ["Producing", "decode_transaction_id", "encode_transaction_id"]

_log = logging.getLogger("bolide.proxy")

_RESOLUTION = {pb.COMMIT: 8, pb.ROLLBACK: 12}
"""TransactionResolution -> END_TRANSACTION commitOrRollback (the sysFlag values)."""


def encode_transaction_id(
    broker_name: str, commit_log_offset: int, queue_offset: int, broker_transaction_id: str
) -> str:
    return f"{broker_name}:{commit_log_offset}:{queue_offset}:{broker_transaction_id}"


def decode_transaction_id(text: str) -> tuple[str, int, int, str]:
    parts = text.split(":", 3)
    try:
        if len(parts) != 4 or not parts[0]:
            raise ValueError(text)
        return parts[0], int(parts[1]), int(parts[2]), parts[3]
    except ValueError as error:
        raise ProxyError(
            pb.INVALID_TRANSACTION_ID, f"transaction id {text!r} is illegal"
        ) from error


class Producing:
    def __init__(
        self, directory: BrokerDirectory, clients: ClientRegistry, *, max_body_bytes: int
    ) -> None:
        self._directory = directory
        self._clients = clients
        self._max_body_bytes = max_body_bytes
        self._round_robin = itertools.count()
        self._broker_names: dict[str, str] = {}
        """broker address -> name, learnt from routes (to name the broker of a check)."""

    async def send(self, request: spb.SendMessageRequest) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(pb.BAD_REQUEST, "no message to send")
        response = spb.SendMessageResponse()
        codes: set[int] = set()
        for message in request.messages:
            try:
                entry = await self._send_one(message)
            except (ProxyError, BolideError, OSError) as error:
                entry = spb.SendResultEntry(
                    status=status(code_of_error(error), str(error)),
                    message_id=message.system_properties.message_id,
                )
            codes.add(entry.status.code)
            response.entries.append(entry)
        if codes == {pb.OK}:
            response.status.CopyFrom(status(pb.OK))
        elif len(codes) == 1:
            response.status.CopyFrom(response.entries[0].status)
        else:
            response.status.CopyFrom(status(pb.MULTIPLE_RESULTS, "some messages failed"))
        return response

    async def _send_one(self, message: pb.Message) -> spb.SendResultEntry:
        topic = message.topic.name
        system = message.system_properties
        if not topic:
            raise ProxyError(pb.ILLEGAL_TOPIC, "topic name is empty")
        if not system.message_id:
            raise ProxyError(pb.ILLEGAL_MESSAGE_ID, "message id is empty")
        if len(message.body) > self._max_body_bytes:
            raise ProxyError(
                pb.MESSAGE_BODY_TOO_LARGE,
                f"message body of {len(message.body)} bytes exceeds {self._max_body_bytes}",
            )
        born_timestamp_ms = _born_timestamp_ms(system)
        brokers = [b for b in await self._directory.brokers(topic) if b.perm & PERM_WRITE]
        if not brokers:
            raise ProxyError(pb.FORBIDDEN, f"topic {topic} has no writable queue")
        types = accepted_types(await self._directory.topic_config(topic))
        if system.message_type not in types:
            raise ProxyError(
                pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {topic} does not accept {_type_name(system.message_type)} "
                "messages (its message.type attribute)",
            )
        broker, queue_id = self._select(brokers, system)
        self._broker_names[broker.address] = broker.broker_name
        properties, sys_flag = properties_of(message, topic)
        header = SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_count=4,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp_ms=born_timestamp_ms,
            flag=0,
            properties=encode_properties(properties),
        )
        try:
            answer_code, fields = await send_message_answer(
                self._directory.pool,
                broker.address,
                header,
                message.body,
                limits.PROXY_RPC_TIMEOUT_MS,
            )
        except TransportError:
            self._directory.route_failed(topic)  # a dead master: the next send finds the new
            raise
        except RemoteError as refused:
            raise self._refused_send(topic, system, refused) from refused
        entry = spb.SendResultEntry(
            status=status(code_of_response(answer_code)),
            message_id=system.message_id,
            offset=fields.queue_offset,
        )
        deliver_ms = properties.get(PropertyKey.TIMER_DELIVER_MS)
        if deliver_ms is not None:
            entry.recall_handle = RecallHandle(
                topic, broker.broker_name, int(deliver_ms), system.message_id
            ).encode()
        # Apache's broker answers every send with transactionId = the message's unique id, and
        # its proxy passes it on; a transaction's id below is Bolide's own (it names the half).
        entry.transaction_id = fields.transaction_id or system.message_id
        if system.message_type == pb.TRANSACTION:
            commit_log_offset = _commit_log_offset(fields.msg_id)
            entry.transaction_id = encode_transaction_id(
                broker.broker_name,
                commit_log_offset,
                fields.queue_offset,
                fields.transaction_id or system.message_id,
            )
        return entry

    def _refused_send(
        self, topic: str, system: pb.SystemProperties, refused: RemoteError
    ) -> ProxyError:
        if refused.code == ResponseCode.SERVICE_NOT_AVAILABLE:
            self._directory.route_failed(topic)  # a slave now, or shutting down
        if refused.code == ResponseCode.TOPIC_NOT_EXIST:
            self._directory.forget(topic)
        code = code_of_response(refused.code)
        if refused.code == ResponseCode.MESSAGE_ILLEGAL and system.HasField("delivery_timestamp"):
            code = pb.ILLEGAL_DELIVERY_TIME  # the broker refused the timer
        return ProxyError(code, refused.remark or "send failed")

    def _select(
        self, brokers: list[BrokerQueues], system: pb.SystemProperties
    ) -> tuple[BrokerQueues, int]:
        queues = [(b, q) for b in brokers for q in range(b.write_queue_count)]
        if not queues:
            raise ProxyError(pb.FORBIDDEN, "no writable queue")
        if system.HasField("message_group") and system.message_group:
            return queues[consistent_hash(system.message_group, len(queues))]
        return queues[next(self._round_robin) % len(queues)]

    async def recall(self, request: spb.RecallMessageRequest) -> spb.RecallMessageResponse:
        """RecallMessage: RECALL_MESSAGE (370) to the broker the handle names."""
        topic = request.topic.name
        try:
            handle = RecallHandle.decode(request.recall_handle)
        except HeaderError as error:
            raise ProxyError(pb.BAD_REQUEST, f"recall handle is invalid: {error}") from error
        address = await self._directory.broker_address(topic, handle.broker_name)
        header = RecallMessageRequestHeader(topic, request.recall_handle)
        try:
            fields = await recall_message(
                self._directory.pool, address, header, limits.PROXY_RPC_TIMEOUT_MS
            )
        except RemoteError as refused:
            code = pb.BAD_REQUEST if refused.code == ResponseCode.MESSAGE_ILLEGAL else None
            raise ProxyError(
                code or code_of_response(refused.code), refused.remark or "recall failed"
            ) from refused
        return spb.RecallMessageResponse(status=status(pb.OK), message_id=fields.msg_id)

    async def end_transaction(
        self, request: spb.EndTransactionRequest
    ) -> spb.EndTransactionResponse:
        topic = request.topic.name
        resolution = _RESOLUTION.get(request.resolution)
        if resolution is None:
            raise ProxyError(pb.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        broker_name, commit_log_offset, queue_offset, broker_transaction_id = decode_transaction_id(
            request.transaction_id
        )
        address = await self._directory.broker_address(topic, broker_name)
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=resolution,
            msg_id=request.message_id,
            from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
            transaction_id=broker_transaction_id,
        )
        await end_transaction(self._directory.pool, address, header, limits.PROXY_RPC_TIMEOUT_MS)
        return spb.EndTransactionResponse(status=status(pb.OK))

    # --- checks from brokers ------------------------------------------------------------------

    async def check_transaction_state(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE (39) from a broker: ask one producer of the topic."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
            message, _ = decode_record(request.body)
        except (HeaderError, ProtocolError) as error:
            _log.warning(
                "bad CHECK_TRANSACTION_STATE from %s: %s", connection.remote_address, error
            )
            return None
        topic = message.properties.get(PropertyKey.REAL_TOPIC) or message.topic
        producers = self._clients.producers_of(topic)
        if not producers:
            _log.info("transaction check for topic %s: no 5.x producer connected", topic)
            return None
        broker_name = self._broker_names.get(connection.remote_address, "")
        if not broker_name:
            for broker in await self._directory.brokers(topic):
                self._broker_names[broker.address] = broker.broker_name
            broker_name = self._broker_names.get(connection.remote_address, "")
        command = spb.TelemetryCommand()
        check = command.recover_orphaned_transaction_command
        check.message.CopyFrom(to_proto_message(message, topic=topic))
        check.message.system_properties.message_type = pb.TRANSACTION
        check.transaction_id = encode_transaction_id(
            broker_name,
            header.commit_log_offset,
            header.tran_state_table_offset,
            header.transaction_id or header.msg_id or "",
        )
        producer = producers[next(self._round_robin) % len(producers)]
        if producer.outbox.full():
            _log.warning("transaction check for %s dropped: client %s is slow", topic, producer)
            return None
        producer.outbox.put_nowait(command)
        return None


def _commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset inside an offset message id (its last 16 hex digits)."""
    try:
        return int(offset_msg_id[-16:], 16)
    except ValueError as error:
        raise ProxyError(
            pb.INTERNAL_SERVER_ERROR, f"broker message id {offset_msg_id!r}"
        ) from error


def _type_name(message_type: int) -> str:
    """The enum name of ``message_type``, or its number when the enum has none (a client may
    send any int32: the answer must not fail on it; issue 30's gRPC fuzzer found this)."""
    try:
        return pb.MessageType.Name(message_type)
    except ValueError:
        return f"message type {message_type}"


def _born_timestamp_ms(system: pb.SystemProperties) -> int:
    """``born_timestamp`` in ms (unset: now). A Timestamp outside protobuf's range (years
    1–9999, found by fuzzing: it raised out of the handler, UNKNOWN "Internal Server Error")
    is BAD_REQUEST."""
    try:
        born_ms = system.born_timestamp.ToMilliseconds()
    except ValueError as error:
        raise ProxyError(
            pb.BAD_REQUEST, f"born_timestamp is not a valid timestamp: {error}"
        ) from None
    return born_ms or int(time.time() * 1000)

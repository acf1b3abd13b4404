"""``apache.rocketmq.v2.MessagingService`` on grpclib: request decoding, per-client state,
Telemetry, and the Status every answer carries.

Errors: a request body that is not the RPC's protobuf ends the call with gRPC status INTERNAL
"Invalid protobuf byte sequence" (what grpc-java, hence the Apache proxy, answers); an RPC the
proxy does not serve (PullMessage, UpdateOffset, GetOffset, QueryOffset,
SyncLiteSubscription, or any unknown name) is UNIMPLEMENTED; every other failure is gRPC OK
with the RocketMQ ``Code`` in the response's status, and the proxy keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.proxy.authorization import Authorizer, authorize_call
from bolide.proxy.brokers import BrokerDirectory
from bolide.proxy.clients import ClientRegistry, settings_reply
from bolide.proxy.consuming import Consuming
from bolide.proxy.producing import Producing
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.routing import query_assignment, query_route
from bolide.proxy.status import ProxyError, code_of_error, status

__all__ = ["MessagingService"]

_log = logging.getLogger("bolide.proxy")
_SERVICE = "/apache.rocketmq.v2.MessagingService/"
CLIENT_ID_HEADER = "x-mq-client-id"
AUTHORIZATION_HEADER = "authorization"
DATE_TIME_HEADER = "x-mq-date-time"

Authenticator = Callable[[str | None, str | None, str, str], object]
"""(authorization header, x-mq-date-time, peer "ip:port", the request message's full name)
-> anything; raises to refuse (an ACL validator's ``verify_grpc_authorization``)."""
TELEMETRY_RPC_NAME = "apache.rocketmq.v2.TelemetryCommand"
"""What the auth whitelists call the telemetry stream (RocketMQ 5.3 names an RPC by its
request message)."""

RequestT = TypeVar("RequestT", bound=Message)
ResponseT = TypeVar("ResponseT", bound=Message)


class MessagingService:
    """The handlers; ``producing`` and ``consuming`` do the work."""

    def __init__(
        self,
        directory: BrokerDirectory,
        clients: ClientRegistry,
        producing: Producing,
        consuming: Consuming,
        *,
        max_body_bytes: int,
        on_producer: Callable[[], None],
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.directory = directory
        self.clients = clients
        self.producing = producing
        self.consuming = consuming
        self._max_body_bytes = max_body_bytes
        self._on_producer = on_producer
        self._authenticator = authenticator
        self._authorizer = authorizer
        self.request_count = 0

    def __mapping__(self) -> dict[str, Handler]:
        unary = Cardinality.UNARY_UNARY
        return {
            _SERVICE + "QueryRoute": Handler(
                self.query_route, unary, spb.QueryRouteRequest, spb.QueryRouteResponse
            ),
            _SERVICE + "Heartbeat": Handler(
                self.heartbeat, unary, spb.HeartbeatRequest, spb.HeartbeatResponse
            ),
            _SERVICE + "SendMessage": Handler(
                self.send_message, unary, spb.SendMessageRequest, spb.SendMessageResponse
            ),
            _SERVICE + "QueryAssignment": Handler(
                self.query_assignment,
                unary,
                spb.QueryAssignmentRequest,
                spb.QueryAssignmentResponse,
            ),
            _SERVICE + "ReceiveMessage": Handler(
                self.receive_message,
                Cardinality.UNARY_STREAM,
                spb.ReceiveMessageRequest,
                spb.ReceiveMessageResponse,
            ),
            _SERVICE + "AckMessage": Handler(
                self.ack_message, unary, spb.AckMessageRequest, spb.AckMessageResponse
            ),
            _SERVICE + "ForwardMessageToDeadLetterQueue": Handler(
                self.forward_to_dead_letter_queue,
                unary,
                spb.ForwardMessageToDeadLetterQueueRequest,
                spb.ForwardMessageToDeadLetterQueueResponse,
            ),
            _SERVICE + "EndTransaction": Handler(
                self.end_transaction, unary, spb.EndTransactionRequest, spb.EndTransactionResponse
            ),
            _SERVICE + "Telemetry": Handler(
                self.telemetry,
                Cardinality.STREAM_STREAM,
                spb.TelemetryCommand,
                spb.TelemetryCommand,
            ),
            _SERVICE + "NotifyClientTermination": Handler(
                self.notify_client_termination,
                unary,
                spb.NotifyClientTerminationRequest,
                spb.NotifyClientTerminationResponse,
            ),
            _SERVICE + "ChangeInvisibleDuration": Handler(
                self.change_invisible_duration,
                unary,
                spb.ChangeInvisibleDurationRequest,
                spb.ChangeInvisibleDurationResponse,
            ),
            _SERVICE + "RecallMessage": Handler(
                self.recall_message, unary, spb.RecallMessageRequest, spb.RecallMessageResponse
            ),
        }

    # --- plumbing -------------------------------------------------------------------------

    async def _unary(
        self,
        stream: Stream[Any, Any],
        response_type: type[ResponseT],
        work: Callable[[Any], Awaitable[ResponseT]],
    ) -> None:
        request = await _receive(stream)
        self.request_count += 1
        client_id = _client_id(stream)
        if client_id:
            self.clients.get(client_id)
        try:
            self._check(stream, response_type.__name__.removesuffix("Response"), request)
            response = await work(request)
        except (ProxyError, BolideError, OSError) as error:
            response = response_type(status=status(code_of_error(error), str(error)))
        await stream.send_message(response)

    def _check(self, stream: Stream[Any, Any], method: str, request: Any) -> None:
        """Authenticate the call, then (with an authorizer) check the calling account holds
        the permissions the RPC ``method`` needs on the request's topics and group."""
        identity = self._authenticate(stream, request.DESCRIPTOR.full_name)
        if self._authenticator is not None and self._authorizer is not None:
            authorize_call(self._authorizer, identity, method, request)

    def _authenticate(self, stream: Stream[Any, Any], rpc_name: str) -> object:
        """Check the ``authorization`` header when the proxy has an authenticator (ACL on);
        returns what the authenticator returned (the account); raises
        ProxyError(UNAUTHORIZED) naming the reason."""
        if self._authenticator is None:
            return None
        metadata = stream.metadata
        authorization = metadata.get(AUTHORIZATION_HEADER) if metadata is not None else None
        date_time = metadata.get(DATE_TIME_HEADER) if metadata is not None else None
        peer = stream.peer.addr() if stream.peer is not None else None
        address = f"{peer[0]}:{peer[1]}" if peer else ""
        try:
            return self._authenticator(
                authorization if isinstance(authorization, str) else None,
                date_time if isinstance(date_time, str) else None,
                address,
                rpc_name,
            )
        except Exception as error:
            reason = getattr(error, "reason", None) or str(error)
            raise ProxyError(pb.UNAUTHORIZED, f"authentication failed: {reason}") from error

    # --- RPCs -------------------------------------------------------------------------------

    async def query_route(self, stream: Stream[Any, Any]) -> None:
        await self._unary(stream, spb.QueryRouteResponse, lambda r: query_route(self.directory, r))

    async def query_assignment(self, stream: Stream[Any, Any]) -> None:
        await self._unary(
            stream, spb.QueryAssignmentResponse, lambda r: query_assignment(self.directory, r)
        )

    async def heartbeat(self, stream: Stream[Any, Any]) -> None:
        client_id = _client_id(stream)

        async def work(request: spb.HeartbeatRequest) -> spb.HeartbeatResponse:
            if not client_id:
                raise ProxyError(pb.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
            session = self.clients.get(client_id)
            if session.settings is None and request.client_type == pb.CLIENT_TYPE_UNSPECIFIED:
                raise ProxyError(
                    pb.UNRECOGNIZED_CLIENT_TYPE, "no settings yet: send them over Telemetry"
                )
            if session.settings is not None:  # a consumer: its brokers learn it (issue 29)
                await self.consuming.registration.heartbeat(client_id, session.settings)
            return spb.HeartbeatResponse(status=status(pb.OK))

        await self._unary(stream, spb.HeartbeatResponse, work)

    async def send_message(self, stream: Stream[Any, Any]) -> None:
        await self._unary(stream, spb.SendMessageResponse, self.producing.send)

    async def ack_message(self, stream: Stream[Any, Any]) -> None:
        await self._unary(stream, spb.AckMessageResponse, self.consuming.ack)

    async def change_invisible_duration(self, stream: Stream[Any, Any]) -> None:
        await self._unary(
            stream, spb.ChangeInvisibleDurationResponse, self.consuming.change_invisible_duration
        )

    async def forward_to_dead_letter_queue(self, stream: Stream[Any, Any]) -> None:
        await self._unary(
            stream,
            spb.ForwardMessageToDeadLetterQueueResponse,
            self.consuming.forward_to_dead_letter_queue,
        )

    async def end_transaction(self, stream: Stream[Any, Any]) -> None:
        await self._unary(stream, spb.EndTransactionResponse, self.producing.end_transaction)

    async def recall_message(self, stream: Stream[Any, Any]) -> None:
        await self._unary(stream, spb.RecallMessageResponse, self.producing.recall)

    async def notify_client_termination(self, stream: Stream[Any, Any]) -> None:
        client_id = _client_id(stream)

        async def work(
            request: spb.NotifyClientTerminationRequest,
        ) -> spb.NotifyClientTerminationResponse:
            del request
            session = self.clients.find(client_id)
            if session is not None and session.settings is not None:
                await self.consuming.registration.unregister(client_id, session.settings)
            self.clients.remove(client_id)
            self.consuming.renewal.forget_client(client_id)
            return spb.NotifyClientTerminationResponse(status=status(pb.OK))

        await self._unary(stream, spb.NotifyClientTerminationResponse, work)

    async def receive_message(self, stream: Stream[Any, Any]) -> None:
        request: spb.ReceiveMessageRequest = await _receive(stream)
        self.request_count += 1
        deadline = stream.deadline
        left_s = deadline.time_remaining() if deadline is not None else None
        try:
            self._check(stream, "ReceiveMessage", request)
            outcome = await self.consuming.receive(request, left_s, _client_id(stream))
            answer, messages = outcome.status, outcome.messages
        except (ProxyError, BolideError, OSError) as error:
            answer, messages = status(code_of_error(error), str(error)), []
        try:
            await stream.send_message(spb.ReceiveMessageResponse(status=answer))
            for message in messages:
                await stream.send_message(spb.ReceiveMessageResponse(message=message))
            stamp = spb.ReceiveMessageResponse()
            stamp.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
            await stream.send_message(stamp)
        except BaseException:
            # The client is gone: do not keep its messages invisible by renewing them.
            for message in messages:
                self.consuming.renewal.forget(message.system_properties.receipt_handle)
            raise

    async def telemetry(self, stream: Stream[Any, Any]) -> None:
        """Settings in, merged settings out; afterwards the server's push channel."""
        client_id = _client_id(stream)
        if not client_id:
            raise GRPCError(Status.INVALID_ARGUMENT, "x-mq-client-id is required")
        try:
            self._authenticate(stream, TELEMETRY_RPC_NAME)
        except ProxyError as error:
            raise GRPCError(Status.UNAUTHENTICATED, error.message) from error
        session = self.clients.get(client_id)
        session.telemetry_open = True
        reader = asyncio.ensure_future(self._read_telemetry(stream, client_id))
        getter: asyncio.Future[spb.TelemetryCommand] | None = None
        try:
            while not reader.done():
                getter = asyncio.ensure_future(session.outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    await stream.send_message(getter.result())
                else:
                    getter.cancel()
            reader.result()  # surfaces a decode error as the call's status
        finally:
            reader.cancel()
            if getter is not None:
                # a call ended (reset, cancelled) while waiting for a push: its pending get
                # must not outlive it ("Task was destroyed but it is pending", issue 30)
                getter.cancel()
            session.telemetry_open = False

    async def _read_telemetry(self, stream: Stream[Any, Any], client_id: str) -> None:
        while True:
            command = await _receive(stream, end_ok=True)
            if command is None:
                return
            session = self.clients.get(client_id)
            if command.HasField("settings"):
                session.settings = command.settings
                reply = spb.TelemetryCommand(status=status(pb.OK))
                reply.settings.CopyFrom(await self._settings_reply(command.settings))
                session.outbox.put_nowait(reply)
                if command.settings.HasField("publishing"):
                    self._on_producer()
                else:  # a consumer's (new) subscriptions reach its brokers at once
                    await self.consuming.registration.heartbeat(client_id, command.settings)
            # thread stack traces and verify results are accepted and dropped

    async def _settings_reply(self, settings: pb.Settings) -> pb.Settings:
        """The merged Settings; the group's settings are looked up for at most
        PROXY_SETTINGS_LOOKUP_MS (a push consumer gives up after 10 s without a reply), the
        defaults answer otherwise."""
        group = None
        if settings.HasField("subscription"):
            with contextlib.suppress(TimeoutError):
                group = await asyncio.wait_for(
                    self._group_of(settings.subscription),
                    limits.PROXY_SETTINGS_LOOKUP_MS / 1000,
                )
        return settings_reply(settings, group, max_body_bytes=self._max_body_bytes)

    async def _group_of(self, subscription: pb.Subscription) -> SubscriptionGroupConfig | None:
        for entry in subscription.subscriptions:
            with contextlib.suppress(BolideError, OSError):
                group = await self.directory.group_config(entry.topic.name, subscription.group.name)
                if group is not None:
                    return group
        return None


async def _receive(stream: Stream[Any, Any], *, end_ok: bool = False) -> Any:
    try:
        message = await stream.recv_message()
    except DecodeError as error:
        raise GRPCError(Status.INTERNAL, "Invalid protobuf byte sequence") from error
    if message is None and not end_ok:
        raise GRPCError(Status.INTERNAL, "the request carries no message")
    return message


def _client_id(stream: Stream[Any, Any]) -> str:
    metadata = stream.metadata
    if metadata is None:
        return ""
    value = metadata.get(CLIENT_ID_HEADER, "")
    return value if isinstance(value, str) else ""

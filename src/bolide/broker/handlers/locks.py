"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): the queue locks of orderly consumers
(docs/protocol.md §2.9, RocketMQ's orderly consumption). The rules live in
:class:`~bolide.broker.locks.RebalanceLockManager`;
these handlers parse the body and answer.

==================  ===========================================================================
request             response
==================  ===========================================================================
LOCK_BATCH_MQ       SUCCESS, body ``{"lockOKMQSet":[...]}``: the requested queues the client now
                    holds (free, its own, or expired and taken over); the others are left out
UNLOCK_BATCH_MQ     SUCCESS, no body; only the caller's own locks are released (the C++ client
                    sends it at shutdown and when a rebalance took a queue away; Java oneway)
bad body            SYSTEM_ERROR naming the problem (the dispatcher's answer to a BodyError)
==================  ===========================================================================

Both bodies are ``{"clientId":…,"consumerGroup":…,"mqSet":[{"brokerName","queueId","topic"}]}``.
"""

from __future__ import annotations

import logging

from bolide.broker.locks import RebalanceLockManager
from bolide.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection, Dispatcher

__all__ = ["LockHandlers"]

_log = logging.getLogger("bolide.broker.locks")


class LockHandlers:
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ over one broker's lock table."""

    def __init__(self, locks: RebalanceLockManager) -> None:
        self._locks = locks

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 41 and 42 in the ``client`` family (Java: the admin processor)."""
        dispatcher.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch, family="client")
        dispatcher.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch, family="client")

    async def lock_batch(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        """Lock the body's queues for its client. Raises BodyError (SYSTEM_ERROR) for a body
        that does not parse."""
        del connection
        body = LockBatchRequestBody.from_json(request.body)
        locked = self._locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        if len(locked) < len(body.mq_set):
            _log.debug(
                "%s of %s: %d of %d queues locked",
                body.client_id,
                body.consumer_group,
                len(locked),
                len(body.mq_set),
            )
        response_body = LockBatchResponseBody(locked).to_json()
        return request.make_response(ResponseCode.SUCCESS, body=response_body)

    async def unlock_batch(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """Release the body's queues held by its client. Raises BodyError (SYSTEM_ERROR)."""
        del connection
        body = LockBatchRequestBody.from_json(request.body)
        self._locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.make_response(ResponseCode.SUCCESS)

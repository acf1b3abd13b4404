"""QueryRoute and QueryAssignment.

* QueryRoute lists one MessageQueue per queue of every master holding the topic. Clients
  reach brokers only through the proxy, so each queue's broker has the endpoints the client
  used. Queue ``i`` is READ_WRITE below both queue counts, READ or WRITE above one of them;
  ``accept_message_types`` come from the topic's ``message.type`` attribute (MIXED accepts
  all four).
* QueryAssignment gives a concurrent group one assignment per readable broker with queue id
  -1 (pop from the whole broker); an orderly (FIFO) group one per readable queue. No readable
  queue: FORBIDDEN.
"""

from __future__ import annotations

from bolide.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfig
from bolide.proxy.brokers import BrokerDirectory, BrokerQueues
from bolide.proxy.proto import definition_pb2 as pb
from bolide.proxy.proto import service_pb2 as spb
from bolide.proxy.status import ProxyError, status

__all__ = ["accepted_types", "query_assignment", "query_route"]

_TYPES = {
    "NORMAL": (pb.NORMAL,),
    "FIFO": (pb.FIFO,),
    "DELAY": (pb.DELAY,),
    "TRANSACTION": (pb.TRANSACTION,),
    "MIXED": (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION),
}


def accepted_types(config: TopicConfig | None) -> tuple[int, ...]:
    """The 5.x message types a topic accepts (NORMAL when it has no ``message.type``)."""
    if config is None:
        return (pb.NORMAL,)
    return tuple(int(each) for each in _TYPES.get(config.message_type, (pb.NORMAL,)))


def _permission(index: int, broker: BrokerQueues) -> int:
    readable = index < broker.read_queue_count and broker.perm & PERM_READ
    writable = index < broker.write_queue_count and broker.perm & PERM_WRITE
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


def _queue(
    topic: str, broker: BrokerQueues, queue_id: int, endpoints: pb.Endpoints, permission: int
) -> pb.MessageQueue:
    queue = pb.MessageQueue(id=queue_id, permission=permission)  # type: ignore[arg-type]
    queue.topic.name = topic
    queue.broker.name = broker.broker_name
    queue.broker.id = 0
    queue.broker.endpoints.CopyFrom(endpoints)
    return queue


async def query_route(
    directory: BrokerDirectory, request: spb.QueryRouteRequest
) -> spb.QueryRouteResponse:
    topic = request.topic.name
    if not topic:
        raise ProxyError(pb.ILLEGAL_TOPIC, "topic name is empty")
    brokers = await directory.brokers(topic)
    types = accepted_types(await directory.topic_config(topic))
    response = spb.QueryRouteResponse(status=status(pb.OK))
    for broker in brokers:
        count = max(broker.read_queue_count, broker.write_queue_count)
        for queue_id in range(count):
            queue = _queue(
                topic, broker, queue_id, request.endpoints, _permission(queue_id, broker)
            )
            queue.accept_message_types.extend(types)  # type: ignore[arg-type]
            response.message_queues.append(queue)
    return response


async def query_assignment(
    directory: BrokerDirectory, request: spb.QueryAssignmentRequest
) -> spb.QueryAssignmentResponse:
    topic, group = request.topic.name, request.group.name
    brokers = await directory.brokers(topic)
    config = await directory.group_config(topic, group)
    fifo = config is not None and config.consume_orderly_enable
    response = spb.QueryAssignmentResponse(status=status(pb.OK))
    for broker in brokers:
        if not broker.perm & PERM_READ or broker.read_queue_count <= 0:
            continue
        queue_ids = range(broker.read_queue_count) if fifo else (-1,)
        for queue_id in queue_ids:
            queue = _queue(topic, broker, queue_id, request.endpoints, pb.READ_WRITE)
            response.assignments.append(pb.Assignment(message_queue=queue))
    if not response.assignments:
        raise ProxyError(pb.FORBIDDEN, f"no readable queue of topic {topic} for group {group}")
    return response

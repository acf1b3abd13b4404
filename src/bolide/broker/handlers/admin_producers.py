"""GET_ALL_PRODUCER_INFO (328): every producer group this broker knows from heartbeats, with
each client's id, address, language, version and last heartbeat (epoch ms), as the body
Java's broker answers (:class:`~bolide.protocol.bodies.producer_table.ProducerTableInfo`);
``mqadmin producer`` reads it."""

from __future__ import annotations

from bolide.broker.context import BrokerContext
from bolide.protocol.bodies.producer_table import ProducerInfo, ProducerTableInfo
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection, Dispatcher

__all__ = ["AdminProducerHandlers", "producer_table"]


class AdminProducerHandlers:
    """Code 328 of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context

    def install(self, dispatcher: Dispatcher) -> None:
        """Register 328 in the ``admin`` family."""
        dispatcher.register(RequestCode.GET_ALL_PRODUCER_INFO, self.all_producers, family="admin")

    async def all_producers(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """SUCCESS with the producer table (empty groups are absent)."""
        del connection
        response = request.make_response(ResponseCode.SUCCESS)
        response.body = producer_table(self._context).to_json()
        return response


def producer_table(context: BrokerContext) -> ProducerTableInfo:
    """The producers of ``context``'s broker; heartbeat times moved from the monotonic clock
    the manager keeps to epoch ms."""
    clock = context.clock
    epoch_minus_monotonic_ms = clock.now_ms() - clock.monotonic_ms()
    producers = context.producers
    return ProducerTableInfo(
        {
            group: tuple(
                ProducerInfo(
                    info.client_id,
                    info.remote_address,
                    info.language,
                    info.version,
                    info.last_update_ms + epoch_minus_monotonic_ms,
                )
                for info in producers.producer_connections(group)
            )
            for group in producers.groups()
        }
    )

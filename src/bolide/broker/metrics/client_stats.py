"""The consumers' own figures for rocketmq-exporter's ``rocketmq_client_*`` family.

rocketmq-exporter asks every online consumer for GET_CONSUMER_RUNNING_INFO (307) and exports
its ConsumeStatus per topic (consume OK/failed TPS, consume RT, pull RT/TPS, failed messages).
A scrape must not wait on clients, so when the broker serves /metrics a background service
asks each online consumer once every CLIENT_STATS_POLL_INTERVAL_MS (at most
CLIENT_STATS_POLL_MAX_REQUESTS at a time, each bounded by BROKER_CALL_CONSUMER_TIMEOUT_MS) and
keeps the latest answers; the collector exports what is kept. A client that does not answer
keeps no figures (its series disappear rather than freeze).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.base.gathering import gather_bounded
from bolide.broker.context import BrokerContext
from bolide.broker.outbound import consumer_running_info_request
from bolide.protocol.bodies import ConsumerRunningInfo
from bolide.protocol.codes import ResponseCode
from bolide.protocol.headers import GetConsumerRunningInfoRequestHeader
from bolide.remoting import Connection

__all__ = ["ClientFigures", "ClientStatsPoller"]

_log = logging.getLogger("bolide.broker.metrics")


@dataclass(frozen=True, slots=True)
class ClientFigures:
    """One consumer's ConsumeStatus for one topic."""

    client_address: str
    client_id: str
    group: str
    topic: str
    status: dict[str, float]


class ClientStatsPoller:
    """Asks the online consumers for their running info; :attr:`figures` holds the answers."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self.figures: list[ClientFigures] = []

    async def poll_once(self) -> None:
        """Ask every online consumer now (the service's step)."""
        consumers = self._context.consumers
        targets: list[tuple[str, str, str, Connection]] = []
        for group in consumers.groups():
            info = consumers.get_consumer_group_info(group)
            if info is None:
                continue
            for channel in info.channels.values():
                if not channel.channel.is_closed:
                    targets.append(
                        (group, channel.client_id, channel.remote_address, channel.channel)
                    )
        starts = [functools.partial(_ask, *target) for target in targets]
        answers = await gather_bounded(starts, limits.CLIENT_STATS_POLL_MAX_REQUESTS)
        self.figures = [figure for answer in answers for figure in answer]


async def _ask(
    group: str, client_id: str, address: str, channel: Connection
) -> list[ClientFigures]:
    header = GetConsumerRunningInfoRequestHeader(group, client_id)
    request = consumer_running_info_request(header)
    try:
        answer = await channel.invoke(request, limits.BROKER_CALL_CONSUMER_TIMEOUT_MS)
        if answer.code != ResponseCode.SUCCESS:
            return []
        info = ConsumerRunningInfo.from_json(answer.body)
    except BolideError as error:  # BodyError included
        _log.debug("running info of %s (%s) not read: %s", client_id, group, error)
        return []
    return [
        ClientFigures(address, client_id, group, topic, _numbers(status))
        for topic, status in info.status_table.items()
    ]


def _numbers(status: dict[str, object]) -> dict[str, float]:
    numbers: dict[str, float] = {}
    for key, value in status.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            numbers[key] = float(value)
    return numbers

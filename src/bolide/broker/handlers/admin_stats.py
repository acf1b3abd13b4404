"""Broker statistics and configuration for the stock admin tools (mqadmin, the dashboard,
rocketmq-exporter):

* VIEW_BROKER_STATS_DATA (315): header ``statsName``, ``statsKey``; BrokerStatsData of the
  cell's minute/hour/day windows (:mod:`bolide.broker.metrics.stats_items`). An unknown name
  or a key without stats: SYSTEM_ERROR "The stats <name> <key> not exist", as in Java.
* GET_BROKER_CONFIG (26): every setting as broker.conf text; header ``version`` = the
  config's DataVersion as JSON (bumped by every UPDATE_BROKER_CONFIG).
* UPDATE_BROKER_CONFIG (25): body = broker.conf text. Keys the broker reads per request
  (:data:`LIVE_KEYS`) take effect at once (a brokerPermission change re-registers with the
  name servers); any other key is refused with SYSTEM_ERROR naming it, and nothing changes
  (Java takes every key and many only after a restart — silently). As in RocketMQ the change
  is written back to the config file the broker was started with (``Broker(config_file=)``,
  ``bolide broker -c``): the updated keys' lines are rewritten in place (comments and other
  lines kept) or appended, atomically, before the change applies; a file that cannot be
  written refuses the update. A broker started without a file warns that the change lasts
  until it stops.
* QUERY_CONSUME_TIME_SPAN (303): per queue of the topic, the store times of its oldest and
  newest messages and of the group's next one, and the delay (now - that time; 0 caught up).
* QUERY_CONSUME_QUEUE (321): ``count`` (at most :data:`QUERY_CONSUME_QUEUE_MAX_ENTRIES`)
  consume-queue entries from ``index``, the queue's min and max index, and the group's
  subscription of the topic when ``consumerGroup`` is given and online.
* Bolide's GET_STATS_HISTORY (90028): a topic's put rate, or a topic@group's lag and get rate,
  minute by minute over the last hour (:mod:`bolide.protocol.bodies.stats_history`). A topic
  the broker does not have: TOPIC_NOT_EXIST.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import orjson

from bolide.base import limits
from bolide.base.errors import BolideError, ConfigError
from bolide.base.fileio import atomic_write
from bolide.broker.config import BrokerConfig, parse_broker_conf
from bolide.broker.config_values import rewrite_broker_conf
from bolide.broker.context import BrokerContext
from bolide.broker.metrics.stats_items import StatsName
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.bodies.stats import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeQueueData,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
)
from bolide.protocol.bodies.stats_history import GetStatsHistoryRequestHeader, StatsHistory
from bolide.protocol.bodies.topic import DataVersion
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import HeaderError
from bolide.protocol.headers.stats import (
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from bolide.remoting import Connection, Dispatcher

__all__ = ["LIVE_KEYS", "QUERY_CONSUME_QUEUE_MAX_ENTRIES", "AdminStatsHandlers"]

_log = logging.getLogger("bolide.broker.admin")

LIVE_KEYS = frozenset(
    {
        "brokerPermission",
        "longPollingEnable",
        "shortPollingTimeMills",
        "enablePropertyFilter",
        "rejectTransactionMessage",
    }
)
"""broker.conf keys UPDATE_BROKER_CONFIG may change on a running broker: the handlers read
them from the live configuration on every request."""
QUERY_CONSUME_QUEUE_MAX_ENTRIES = 1_000
"""Entries one QUERY_CONSUME_QUEUE returns at most (mqadmin asks for 10 by default)."""


class AdminStatsHandlers:
    """Statistics windows, the broker configuration, consume time spans and queue entries."""

    def __init__(self, context: BrokerContext) -> None:
        self._context = context
        self._config_version = DataVersion(context.clock.now_ms(), 0)

    def install(self, dispatcher: Dispatcher) -> None:
        """Register codes 315, 26, 25, 303, 321 and 90028 in the ``admin`` family."""
        for code, handler in (
            (RequestCode.VIEW_BROKER_STATS_DATA, self.view_stats),
            (RequestCode.GET_BROKER_CONFIG, self.get_config),
            (RequestCode.UPDATE_BROKER_CONFIG, self.update_config),
            (RequestCode.QUERY_CONSUME_TIME_SPAN, self.consume_time_span),
            (RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue),
            (RequestCode.BOLIDE_GET_STATS_HISTORY, self.stats_history),
        ):
            dispatcher.register(code, handler, family="admin")

    async def view_stats(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        del connection
        header = ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        stats = self._context.stats
        try:
            name = StatsName(header.stats_name)
        except ValueError:
            cell = None
        else:
            if name in (StatsName.BROKER_PUT_NUMS, StatsName.BROKER_GET_NUMS):
                stats.refresh_broker_cells()
            cell = stats.table.find(name, header.stats_key)
        if cell is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{header.stats_name}> <{header.stats_key}> not exist",
            )
        now_ms = self._context.clock.now_ms()
        minute, hour, day = (
            cell.figures(window, now_ms) for window in (cell.minute, cell.hour, cell.day)
        )
        body = BrokerStatsData(
            *(BrokerStatsItem(w.sum, w.tps, w.avgpt) for w in (minute, hour, day))
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    async def stats_history(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = GetStatsHistoryRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        if header.topic not in context.topics.topic_config_table():
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic {header.topic} does not exist on {context.config.broker_name}",
            )
        history = context.stats.history
        points = (
            history.topic_points(header.topic)
            if header.group is None
            else history.group_points(header.topic, header.group)
        )
        body = StatsHistory(
            context.config.broker_name,
            header.topic,
            header.group,
            limits.STATS_HISTORY_INTERVAL_MS,
            points,
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    async def get_config(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        del connection
        properties = self._context.config.to_properties()
        text = "".join(f"{key}={value}\n" for key, value in sorted(properties.items()))
        version = DataVersion.to_object(self._config_version)
        fields = {"version": _json_text(version)}
        return request.make_response(ResponseCode.SUCCESS, None, fields, text.encode())

    async def update_config(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        context = self._context
        try:
            updates = parse_broker_conf(bytes(request.body).decode("utf-8"))
        except (UnicodeDecodeError, BolideError) as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad config text: {error}")
        if not updates:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "no setting to update")
        frozen = sorted(key for key in updates if key not in LIVE_KEYS)
        if frozen:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"{', '.join(frozen)} cannot change while the broker runs: set it in "
                f"broker.conf and restart (live keys: {', '.join(sorted(LIVE_KEYS))})",
            )
        current = context.config
        try:
            changed = BrokerConfig.from_mapping(current.to_properties(), updates)
        except ConfigError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        refusal = _persist(context.config_file, updates)
        if refusal is not None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, refusal)
        context.config = changed.replace(
            listen_port=current.listen_port, namesrv_addresses=current.namesrv_addresses
        )
        self._config_version = self._config_version.next(context.clock.now_ms())
        _log.warning(
            "broker config updated by %s: %s",
            connection.remote_address,
            ", ".join(f"{key}={value}" for key, value in sorted(updates.items())),
        )
        if "brokerPermission" in updates:
            context.register_soon()
        return request.make_response(ResponseCode.SUCCESS)

    async def consume_time_span(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        header = QueryConsumeTimeSpanRequestHeader.from_ext_fields(request.ext_fields)
        context = self._context
        config = context.topics.find(header.topic)
        if config is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist"
            )
        store, now_ms = context.store, context.clock.now_ms()
        committed = context.offsets.queue_offsets(header.group, header.topic)
        spans: list[QueueTimeSpan] = []
        for queue_id in range(config.write_queue_count):
            min_offset = store.min_offset(header.topic, queue_id)
            max_offset = store.max_offset(header.topic, queue_id)
            oldest = store.store_time_at(header.topic, queue_id, min_offset)
            newest = store.store_time_at(header.topic, queue_id, max_offset - 1)
            offset = max(min_offset, committed.get(queue_id, min_offset))
            if offset < max_offset:
                next_ms = store.store_time_at(header.topic, queue_id, offset)
                delay_ms = max(0, now_ms - next_ms)
            else:
                next_ms, delay_ms = max(0, newest), 0
            spans.append(
                QueueTimeSpan(
                    MessageQueue(header.topic, context.config.broker_name, queue_id),
                    max(0, oldest),
                    max(0, newest),
                    max(0, next_ms),
                    delay_ms,
                )
            )
        body = QueryConsumeTimeSpanBody(tuple(spans))
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())

    async def query_consume_queue(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del connection
        try:
            header = QueryConsumeQueueRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        context = self._context
        topic, queue_id = header.topic, header.queue_id
        config = context.topics.find(topic)
        if config is None or not 0 <= queue_id < config.read_queue_count:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"{topic}-{queue_id} cannot find consume queue"
            )
        store = context.store
        count = max(0, min(header.count, QUERY_CONSUME_QUEUE_MAX_ENTRIES))
        entries = store.consume_queue_entries(topic, queue_id, max(0, header.index), count)
        subscription = None
        if header.consumer_group is not None:
            found = context.consumers.find_subscription(header.consumer_group, topic)
            subscription = found.to_object() if found is not None else None
        body = QueryConsumeQueueResponseBody(
            tuple(ConsumeQueueData(offset, size, tags) for offset, size, tags in entries),
            store.min_offset(topic, queue_id),
            store.max_offset(topic, queue_id),
            subscription,
        )
        return request.make_response(ResponseCode.SUCCESS, body=body.to_json())


def _json_text(value: object) -> str:
    return orjson.dumps(value).decode()


def _persist(config_file: Path | None, updates: Mapping[str, str]) -> str | None:
    """Write ``updates`` into the broker's config file (atomically, other lines kept), so a
    change survives a restart as in RocketMQ. Returns the refusal remark when the file cannot
    be rewritten (the change is then not applied either); None on success or when the broker
    has no file (warned: the change lasts until it stops)."""
    if config_file is None:
        _log.warning(
            "broker config update not persisted: the broker was started without a config"
            " file; %s last until it stops",
            ", ".join(sorted(updates)),
        )
        return None
    try:
        text = config_file.read_text(encoding="utf-8") if config_file.exists() else ""
        atomic_write(config_file, rewrite_broker_conf(text, updates).encode("utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        _log.error("broker config update refused: cannot rewrite %s: %s", config_file, error)
        return f"not applied: cannot write the broker config file {config_file}: {error}"
    return None

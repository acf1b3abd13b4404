"""What each dashboard page shows, gathered through the admin client with one deadline per
page and batched requests: a page asks each broker once (GET_BROKER_CONSUME_STATS gives every
group's lag in one answer), never once per group in sequence — the rocketmq-dashboard
complaint of 3-4 s pages at 800 groups. Requests to several brokers run concurrently (at
most DASHBOARD_ADMIN_IN_FLIGHT_MAX_REQUESTS); a broker that does not answer shows as
unavailable instead of holding the page.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.base.gathering import gather_outcomes
from bolide.client import admin_stats
from bolide.client.admin import RESET_TO_EARLIEST, RESET_TO_LATEST, AdminClient
from bolide.client.admin.operations import is_system_group
from bolide.protocol.bodies import ConsumerRunningInfo, MessageQueue
from bolide.protocol.message import MessageExt
from bolide.protocol.system_topics import SCHEDULE_TOPIC

__all__ = [
    "BrokerRow",
    "ElectionRow",
    "GroupRow",
    "MemberRow",
    "PageError",
    "broker_rows",
    "gather",
    "group_rows",
    "last_elections",
    "member_rows",
    "parse_time_ms",
]

T = TypeVar("T")


class PageError(Exception):
    """A page cannot be shown: ``status`` (404, 400, 502, 504) and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def gather(calls: Sequence[Awaitable[T]]) -> list[T | BolideError]:
    """Run ``calls``, at most DASHBOARD_ADMIN_IN_FLIGHT_MAX_REQUESTS at a time; each result
    is the value or the operating error it raised."""
    return await gather_outcomes(calls, limits.DASHBOARD_ADMIN_IN_FLIGHT_MAX_REQUESTS)


_RELATIVE = re.compile(r"^(\d+)\s*(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time_ms(text: str, now_ms: int) -> int:
    """``earliest``, ``latest``, ``now``, epoch ms, ISO 8601 (local time unless it has an
    offset) or a duration ago (``10m``, ``2h``). Raises ValueError with a user message."""
    value = text.strip()
    lowered = value.lower()
    if lowered == "earliest":
        return RESET_TO_EARLIEST
    if lowered == "latest":
        return RESET_TO_LATEST
    if lowered == "now":
        return now_ms
    if value.isdigit() and len(value) >= 10:
        return int(value)
    relative = _RELATIVE.match(lowered)
    if relative is not None:
        return now_ms - int(relative.group(1)) * _UNIT_MS[relative.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use earliest, latest, now, epoch milliseconds, "
            "ISO 8601 (2024-05-01T12:00:00) or a duration ago (10m, 2h)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def format_time_ms(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000).isoformat(
        sep=" ", timespec="milliseconds"
    )


# --- cluster -------------------------------------------------------------------------------------


@dataclass(slots=True)
class BrokerRow:
    cluster: str
    name: str
    broker_id: int
    address: str
    info: dict[str, str] = field(default_factory=dict)
    error: str | None = None

    def figure(self, key: str, index: int = 0) -> str:
        parts = self.info.get(key, "").split()
        return parts[index] if len(parts) > index else "-"

    @property
    def put_tps(self) -> float:
        return _float(self.figure("putTps"))

    @property
    def get_tps(self) -> float:
        return _float(self.figure("getTransferedTps"))

    @property
    def controller_role(self) -> str | None:
        """``master``, ``slave`` or ``none`` as the controller assigned it (controller mode),
        None for a broker with a fixed role."""
        return self.info.get("controllerRole")

    @property
    def role(self) -> str:
        """The role the page shows: the controller's assignment in controller mode, else the
        name server's brokerId (0 is the master)."""
        assigned = self.controller_role
        if assigned is not None:
            return assigned
        return "master" if self.broker_id == 0 else "slave"


@dataclass(frozen=True, slots=True)
class ElectionRow:
    """The last election of one broker name, as its elected master reports it."""

    name: str
    broker_id: str
    address: str
    master_epoch: str
    at_ms: int


def last_elections(rows: list[BrokerRow]) -> list[ElectionRow]:
    """Per broker name in controller mode, the master of the highest epoch: which broker won,
    in which epoch, and when it took the role (``controllerRoleSince``)."""
    best: dict[str, ElectionRow] = {}
    for row in rows:
        since = row.info.get("controllerRoleSince", "")
        if row.controller_role != "master" or not since.isdigit():
            continue
        election = ElectionRow(
            row.name,
            row.info.get("controllerBrokerId", ""),
            row.address,
            row.info.get("controllerMasterEpoch", ""),
            int(since),
        )
        current = best.get(row.name)
        if current is None or _float(election.master_epoch) > _float(current.master_epoch):
            best[row.name] = election
    return [best[name] for name in sorted(best)]


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


async def broker_rows(admin: AdminClient) -> list[BrokerRow]:
    """Every broker with its runtime figures (one GET_BROKER_RUNTIME_INFO each, together)."""
    info = await admin.cluster_info()
    rows = [
        BrokerRow(cluster, name, broker_id, address)
        for cluster, names in sorted(info.cluster_addr_table.items())
        for name in sorted(names)
        if name in info.broker_addr_table
        for broker_id, address in sorted(info.broker_addr_table[name].broker_addrs.items())
    ]
    results = await gather([admin.broker_runtime_info(row.address) for row in rows])
    for row, result in zip(rows, results, strict=True):
        if isinstance(result, BolideError):
            row.error = str(result)
        else:
            row.info = result
    return rows


# --- groups --------------------------------------------------------------------------------------


@dataclass(slots=True)
class GroupRow:
    group: str
    brokers: list[str] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)
    lag: int = 0
    consume_tps: float = 0.0
    online: int = 0
    orderly: bool = False
    """consumeMessageOrderly: 5.x clients consume it as a FIFO group (Settings.fifo)."""


async def group_rows(admin: AdminClient, *, include_system: bool = False) -> list[GroupRow]:
    """Every subscription group with its lag, rate and online consumers: two requests per
    master broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_BROKER_CONSUME_STATS)."""
    masters = await admin.master_addresses()
    configs_task = admin.group_configs()
    listings = await gather(
        [admin_stats.broker_consume_stats(admin, address) for address in masters.values()]
    )
    configs = await configs_task
    rows: dict[str, GroupRow] = {}
    for group, by_broker in configs.items():
        row = rows.setdefault(group, GroupRow(group))
        row.brokers = sorted(by_broker)
        row.orderly = any(config.consume_orderly_enable for config in by_broker.values())
    for listing in listings:
        if isinstance(listing, BolideError):
            continue
        for group, stats in listing.entries:
            row = rows.setdefault(group, GroupRow(group))
            row.consume_tps += stats.consume_tps
            for queue, wrapper in stats.offset_table.items():
                row.topics.add(queue.topic)
                row.lag += max(0, wrapper.broker_offset - wrapper.consumer_offset)
        for group, count in listing.online_client_counts.items():
            rows.setdefault(group, GroupRow(group)).online += count
    return sorted(
        (row for row in rows.values() if include_system or not is_system_group(row.group)),
        key=lambda row: row.group,
    )


@dataclass(slots=True)
class MemberRow:
    client_id: str
    address: str
    language: str
    version: int
    subscriptions: dict[str, str] = field(default_factory=dict)
    ok_tps: float = 0.0
    rt_ms: float = 0.0
    blocked_queues: list[tuple[MessageQueue, int]] = field(default_factory=list)
    error: str | None = None


async def member_rows(admin: AdminClient, group: str) -> list[MemberRow]:
    """The group's online members, each with its own report (subscriptions, measured
    rates, orderly queues blocked), asked of every member at once."""
    connection = await admin.consumer_connections(group)
    if connection is None:
        return []
    members = [
        MemberRow(c.client_id, c.client_addr, c.language.name, c.version)
        for c in connection.connection_set
    ]
    reports = await gather([admin.consumer_running_info(group, m.client_id) for m in members])
    for member, report in zip(members, reports, strict=True):
        if isinstance(report, BolideError):
            member.error = str(report)
            continue
        _fill_member(member, report)
    return members


def _fill_member(member: MemberRow, report: ConsumerRunningInfo) -> None:
    member.subscriptions = {s.topic: s.sub_string for s in report.subscription_set}
    for status in report.status_table.values():
        member.ok_tps += float(status.get("consumeOKTPS", 0.0))
        member.rt_ms = max(member.rt_ms, float(status.get("consumeRT", 0.0)))
    for queue, info in report.mq_table.items():
        blocked_ms = int(info.get("orderlyBlockedMillis", 0) or 0)
        if blocked_ms > 0:
            member.blocked_queues.append((queue, blocked_ms))


def consistent(members: list[MemberRow]) -> bool:
    """Whether every member that answered subscribes the same topics with the same
    expressions (a mismatch makes rebalancing hand queues to members that filter their
    messages away)."""
    seen = [m.subscriptions for m in members if m.error is None]
    return all(s == seen[0] for s in seen[1:])


def message_view(message: MessageExt) -> dict[str, object]:
    """A message as the templates show it."""
    body = message.body
    try:
        text = body.decode("utf-8")
        printable = True
    except UnicodeDecodeError:
        text, printable = body.hex(" "), False
    return {
        "msg_id": message.msg_id,
        "offset_msg_id": message.offset_msg_id,
        "topic": message.topic,
        "tags": message.tags or "",
        "keys": message.keys or "",
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "store_time": format_time_ms(message.store_timestamp_ms),
        "born_time": format_time_ms(message.born_timestamp_ms),
        "born_host": f"{message.born_host[0]}:{message.born_host[1]}",
        "store_host": f"{message.store_host[0]}:{message.store_host[1]}",
        "reconsume_times": message.reconsume_times,
        "size": len(body),
        "body": text[: 64 * 1024],
        "printable": printable,
        "properties": dict(sorted(message.properties.items())),
    }


# --- delay backlog ---------------------------------------------------------------------------


@dataclass(slots=True)
class DelayLevel:
    level: int
    broker: str
    stored: int
    delivered: int
    last_store_ms: int

    @property
    def backlog(self) -> int:
        return max(0, self.stored - self.delivered)


async def delay_backlog(admin: AdminClient) -> list[DelayLevel]:
    """Per delay level and broker: messages stored in SCHEDULE_TOPIC_XXXX (queue = level -
    1) and the store time of the newest; the stored count minus what was delivered is the
    broker's ``bolide_delay_backlog_messages`` metric."""
    try:
        rows = await admin.topic_status(SCHEDULE_TOPIC)
    except BolideError:
        return []  # no delayed message was ever sent
    masters = await admin.master_addresses()
    names = sorted({row.queue.broker_name for row in rows if row.queue.broker_name in masters})
    progress = await gather([admin_stats.delay_offsets(admin, masters[name]) for name in names])
    delivered = {
        name: result
        for name, result in zip(names, progress, strict=True)
        if not isinstance(result, BolideError)
    }
    return [
        DelayLevel(
            row.queue.queue_id + 1,
            row.queue.broker_name,
            row.max_offset,
            delivered.get(row.queue.broker_name, {}).get(row.queue.queue_id + 1, 0),
            row.last_update_timestamp_ms,
        )
        for row in rows
    ]


@dataclass(slots=True)
class TimerRow:
    broker: str
    stored: str
    pending_in_memory: str
    delivered_up_to_ms: int


async def timer_rows(admin: AdminClient) -> list[TimerRow]:
    """Per master broker: timer messages stored, due soon (in memory), delivered up to."""
    masters = await admin.master_addresses()
    names = sorted(masters)
    infos = await gather([admin.broker_runtime_info(masters[name]) for name in names])
    rows: list[TimerRow] = []
    for name, info in zip(names, infos, strict=True):
        if isinstance(info, BolideError) or "timerMessagesStored" not in info:
            continue
        rows.append(
            TimerRow(
                name,
                info["timerMessagesStored"],
                info.get("timerPendingInMemory", "-"),
                int(info.get("timerDeliveredUpToMs", "0") or 0),
            )
        )
    return rows

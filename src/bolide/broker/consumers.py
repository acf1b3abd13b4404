"""Which connections consume for which group, what they subscribe, and when to tell them.

Every consumer heartbeats every broker of its topics (HEART_BEAT, every 30 s; docs/protocol.md
§2.5). :class:`ConsumerManager` keeps, per consumer group, a :class:`ConsumerGroupInfo`: the
group's channels (connections) and its subscription table. When a heartbeat *changes* the
group — a new channel, a newly subscribed topic, a dropped topic — every channel of the group
is told (NOTIFY_CONSUMER_IDS_CHANGED, §5.2) so the consumers rebalance at once instead of at
their next 20 s timer; the same happens to the remaining channels when a channel closes,
unregisters or expires.

The registry is pure: a channel is an opaque hashable key (the broker uses its
:class:`~bolide.remoting.connection.Connection`), time comes from the injected clock, and the
notification is an injected callback ``notify(group, channels)`` that the broker wires to
"send NOTIFY_CONSUMER_IDS_CHANGED (code 40, oneway, ext ``consumerGroup``) on each channel".
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import ProtocolError, invariant
from bolide.broker.channels import ChannelKey, ClientChannelInfo
from bolide.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

_log = logging.getLogger("bolide.broker.consumers")

NotifyConsumerIdsChanged = Callable[[str, list[ChannelKey]], None]
"""``notify(group, channels)``: tell each channel that the group's membership changed."""

_EnumT = TypeVar("_EnumT", bound=enum.IntEnum)


def coerce_enum(value: _EnumT | int | str, enum_type: type[_EnumT]) -> _EnumT:
    """``value`` as ``enum_type``, given as the enum, its ordinal (C++ heartbeats send
    ordinals, sometimes as text) or its name (Java). Raises :class:`ProtocolError` for an
    unknown name or ordinal."""
    try:
        if isinstance(value, str):
            text = value.strip()
            if text.lstrip("-").isdigit():
                return enum_type(int(text))
            return enum_type[text]
        return enum_type(value)
    except (KeyError, ValueError) as error:
        raise ProtocolError(f"not a {enum_type.__name__}: {value!r}") from error


class ConsumerGroupInfo(Generic[ChannelKey]):
    """One consumer group on this broker: its channels and its subscriptions.

    ``consume_type``, ``message_model`` and ``consume_from_where`` are those of the latest
    heartbeat. ``last_update_ms`` (monotonic clock) is the time of the latest change or
    refresh. Methods take ``now_ms`` so that the class stays free of clocks.
    """

    def __init__(
        self,
        group_name: str,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        now_ms: int = 0,
    ) -> None:
        self.group_name = group_name
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update_ms = now_ms
        self._channels: dict[ChannelKey, ClientChannelInfo[ChannelKey]] = {}
        self._subscriptions: dict[str, SubscriptionData] = {}

    @property
    def channels(self) -> Mapping[ChannelKey, ClientChannelInfo[ChannelKey]]:
        """Channel → record, read-only and live."""
        return MappingProxyType(self._channels)

    @property
    def subscriptions(self) -> Mapping[str, SubscriptionData]:
        """Topic → subscription, read-only and live."""
        return MappingProxyType(self._subscriptions)

    def update_channel(
        self,
        info: ClientChannelInfo[ChannelKey],
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        now_ms: int,
    ) -> bool:
        """Record a heartbeat from ``info.channel``; True when the channel is new.

        A known channel keeps its place and only refreshes: its record becomes ``info`` (the
        client id, language and version of the latest heartbeat) — a changed client id on the
        same connection is logged, as it points at a client bug, but is not a change.
        """
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        info.last_update_ms = now_ms
        self.last_update_ms = now_ms
        old = self._channels.get(info.channel)
        self._channels[info.channel] = info
        if old is None:
            _log.info(
                "new consumer %s of group %s from %s (%s, %s)",
                info.client_id,
                self.group_name,
                info.remote_address,
                consume_type.name,
                message_model.name,
            )
            return True
        if old.client_id != info.client_id:
            _log.warning(
                "channel of group %s changed client id from %s to %s",
                self.group_name,
                old.client_id,
                info.client_id,
            )
        return False

    def update_subscription(self, subscriptions: Iterable[SubscriptionData], now_ms: int) -> bool:
        """Merge a heartbeat's subscription set; True when a topic was added or removed.

        * a topic not yet subscribed is added: changed;
        * a subscribed topic is replaced only by a larger ``sub_version`` (an older or equal one
          is ignored); a replacement alone is not a change;
        * subscribed topics missing from ``subscriptions`` are removed: changed.
        """
        changed = False
        incoming_topics: set[str] = set()
        for subscription in subscriptions:
            incoming_topics.add(subscription.topic)
            old = self._subscriptions.get(subscription.topic)
            if old is None:
                self._subscriptions[subscription.topic] = subscription
                _log.info("group %s subscribes %s", self.group_name, subscription.topic)
                changed = True
            elif subscription.sub_version > old.sub_version:
                if self.consume_type is ConsumeType.CONSUME_PASSIVELY:
                    _log.info(
                        "group %s changes its subscription of %s from %r to %r",
                        self.group_name,
                        subscription.topic,
                        old.sub_string,
                        subscription.sub_string,
                    )
                self._subscriptions[subscription.topic] = subscription
        for topic in [topic for topic in self._subscriptions if topic not in incoming_topics]:
            _log.warning("group %s no longer subscribes %s", self.group_name, topic)
            del self._subscriptions[topic]
            changed = True
        self.last_update_ms = now_ms
        return changed

    def unregister_channel(self, channel: ChannelKey) -> ClientChannelInfo[ChannelKey] | None:
        """Forget ``channel``; returns its record, or None when it was not in the group."""
        return self._channels.pop(channel, None)

    def all_channels(self) -> list[ChannelKey]:
        """Every channel of the group, in registration order."""
        return list(self._channels)

    def all_client_ids(self) -> list[str]:
        """The client ids of the group, sorted and without duplicates (a client that
        reconnected may briefly hold two channels; allocation needs each id once)."""
        return sorted({info.client_id for info in self._channels.values()})

    def find_channel(self, client_id: str) -> ClientChannelInfo[ChannelKey] | None:
        """The most recently refreshed channel of ``client_id``, or None."""
        found: ClientChannelInfo[ChannelKey] | None = None
        for info in self._channels.values():
            if info.client_id == client_id and (
                found is None or info.last_update_ms >= found.last_update_ms
            ):
                found = info
        return found

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        """The group's subscription of ``topic``, or None."""
        return self._subscriptions.get(topic)

    def to_consumer_connection(self) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST body: connections sorted by client id, then address."""
        infos = sorted(self._channels.values(), key=lambda i: (i.client_id, i.remote_address))
        return ConsumerConnection(
            tuple(info.to_connection() for info in infos),
            dict(self._subscriptions),
            self.consume_type,
            self.message_model,
            self.consume_from_where,
        )


class ConsumerManager(Generic[ChannelKey]):
    """Consumer group name → :class:`ConsumerGroupInfo`, with change notification.

    ``notify(group, channels)`` is called after the registry changed (never with an empty
    list); an exception from it is logged and does not undo the change. ``channel_expiry_ms``
    (default ``CLIENT_CHANNEL_EXPIRY_MS``, 120 s) is how long a channel may stay without a
    heartbeat before :meth:`scan_not_active_channel` drops it.
    """

    def __init__(
        self,
        clock: Clock,
        notify: NotifyConsumerIdsChanged[ChannelKey],
        *,
        channel_expiry_ms: int = limits.CLIENT_CHANNEL_EXPIRY_MS,
    ) -> None:
        invariant(channel_expiry_ms > 0, "channel expiry is positive")
        self._clock = clock
        self._notify = notify
        self._channel_expiry_ms = channel_expiry_ms
        self._groups: dict[str, ConsumerGroupInfo[ChannelKey]] = {}

    def register_consumer(
        self,
        group: str,
        info: ClientChannelInfo[ChannelKey],
        consume_type: ConsumeType | int | str,
        message_model: MessageModel | int | str,
        consume_from_where: ConsumeFromWhere | int | str,
        subscriptions: Iterable[SubscriptionData],
        *,
        is_notify_enabled: bool = True,
    ) -> bool:
        """Apply one consumer group of a heartbeat; True when the group changed.

        The enums may be given by name or ordinal. Subscriptions are stored with their tag
        codes recomputed from the expression (a client's ``codeSet`` is never trusted: C++
        sends ``atoi(tag)``). Changed means a new channel, an added topic or a removed topic
        (see :meth:`ConsumerGroupInfo.update_subscription`); then, if ``is_notify_enabled``
        (the group's ``notifyConsumerIdsChangedEnable``), every channel of the group is
        notified. Raises :class:`ProtocolError` for an unknown enum value or an expression
        without a tag, before anything is changed.
        """
        typed_consume_type = coerce_enum(consume_type, ConsumeType)
        typed_message_model = coerce_enum(message_model, MessageModel)
        typed_consume_from = coerce_enum(consume_from_where, ConsumeFromWhere)
        trusted = [subscription.with_recomputed_codes() for subscription in subscriptions]
        now_ms = self._clock.monotonic_ms()
        group_info = self._groups.get(group)
        if group_info is None:
            group_info = ConsumerGroupInfo(
                group, typed_consume_type, typed_message_model, typed_consume_from, now_ms
            )
            self._groups[group] = group_info
        channel_changed = group_info.update_channel(
            info, typed_consume_type, typed_message_model, typed_consume_from, now_ms
        )
        subscription_changed = group_info.update_subscription(trusted, now_ms)
        changed = channel_changed or subscription_changed
        if changed and is_notify_enabled:
            self._notify_group(group, group_info.all_channels())
        return changed

    def unregister_consumer(
        self, group: str, channel: ChannelKey, *, is_notify_enabled: bool = True
    ) -> bool:
        """Remove ``channel`` from ``group`` (UNREGISTER_CLIENT); True when it was there.

        A group left without channels is removed. When ``is_notify_enabled``, the group's
        remaining channels are notified (even if ``channel`` was not in it, as Java does).
        """
        group_info = self._groups.get(group)
        if group_info is None:
            return False
        removed = group_info.unregister_channel(channel)
        if removed is not None:
            _log.info("consumer %s of group %s unregistered", removed.client_id, group)
        self._drop_if_empty(group_info)
        if is_notify_enabled:
            self._notify_group(group, group_info.all_channels())
        return removed is not None

    def do_channel_close(self, channel: ChannelKey) -> list[str]:
        """A connection closed: remove it from every group and notify each group's remaining
        channels. Returns the groups it was in (sorted); groups left empty are removed."""
        left: list[str] = []
        for group_info in list(self._groups.values()):
            removed = group_info.unregister_channel(channel)
            if removed is None:
                continue
            _log.info(
                "consumer %s of group %s disconnected (%s)",
                removed.client_id,
                group_info.group_name,
                removed.remote_address,
            )
            left.append(group_info.group_name)
            self._drop_if_empty(group_info)
            self._notify_group(group_info.group_name, group_info.all_channels())
        return sorted(left)

    def scan_not_active_channel(self) -> list[ChannelKey]:
        """Drop every channel without a heartbeat for ``channel_expiry_ms`` or longer.

        Groups left empty are removed; the remaining channels of every affected group are
        notified (the Java broker skips this, leaving the survivors to their 20 s rebalance).
        Returns the dropped channels, each once: the caller closes those connections (its
        later :meth:`do_channel_close` then finds nothing to do).
        """
        now_ms = self._clock.monotonic_ms()
        expired: dict[ChannelKey, None] = {}
        for group_info in list(self._groups.values()):
            stale = [
                info
                for info in group_info.channels.values()
                if info.is_expired(now_ms, self._channel_expiry_ms)
            ]
            for info in stale:
                _log.warning(
                    "consumer %s of group %s expired after %d ms without heartbeat",
                    info.client_id,
                    group_info.group_name,
                    now_ms - info.last_update_ms,
                )
                group_info.unregister_channel(info.channel)
                expired[info.channel] = None
            if stale:
                self._drop_if_empty(group_info)
                self._notify_group(group_info.group_name, group_info.all_channels())
        return list(expired)

    # --- queries ----------------------------------------------------------------------------

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo[ChannelKey] | None:
        """The group's registration, or None when no channel of it is registered."""
        return self._groups.get(group)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo[ChannelKey] | None:
        """The channel of ``client_id`` in ``group`` (for broker → client requests), or None."""
        group_info = self._groups.get(group)
        return None if group_info is None else group_info.find_channel(client_id)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        """The subscription ``group`` registered for ``topic`` by heartbeat, or None."""
        group_info = self._groups.get(group)
        return None if group_info is None else group_info.find_subscription(topic)

    def client_ids(self, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the group's client ids, sorted, without duplicates;
        empty for an unknown group."""
        group_info = self._groups.get(group)
        return [] if group_info is None else group_info.all_client_ids()

    def groups_by_topic(self, topic: str) -> list[str]:
        """The groups that subscribe ``topic``, sorted (QUERY_TOPIC_CONSUME_BY_WHO)."""
        return sorted(
            name for name, info in self._groups.items() if info.find_subscription(topic) is not None
        )

    def groups(self) -> list[str]:
        """Every registered consumer group, sorted."""
        return sorted(self._groups)

    # --- internals --------------------------------------------------------------------------

    def _drop_if_empty(self, group_info: ConsumerGroupInfo[ChannelKey]) -> None:
        if not group_info.channels and self._groups.get(group_info.group_name) is group_info:
            del self._groups[group_info.group_name]
            _log.info("consumer group %s has no channel left", group_info.group_name)

    def _notify_group(self, group: str, channels: list[ChannelKey]) -> None:
        if not channels:
            return
        try:
            self._notify(group, channels)
        except Exception:
            # The registry already changed; a failed notification only delays the
            # consumers' rebalance until their own timer.
            _log.exception("notifying %d channels of group %s failed", len(channels), group)

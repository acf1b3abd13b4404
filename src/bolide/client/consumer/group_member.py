"""What the push and the lite pull consumer do the same way as members of a group: settle
their constructor's common arguments (group and namespace, options, client instance, where
a new group starts, allocation strategy), choose their offset store, register on the
instance and refresh their topics' routes.

The two consumers differ in what they do with messages (a listener, or ``poll()``); these
steps are theirs alike, so they live here once rather than in one of them.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.errors import BolideError, ConfigError
from bolide.client.config import build_client_config
from bolide.client.consumer.allocate import AllocateAveragely, AllocateStrategy
from bolide.client.consumer.instance_ports import InstanceOffsetBroker
from bolide.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
    local_offsets_path,
)
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.instance import ClientInstance, InstanceConsumer
from bolide.client.namespace import check_namespace, with_namespace
from bolide.protocol.bodies import MessageModel
from bolide.remoting.tls import TlsClientSettings

__all__ = [
    "MemberSettings",
    "member_settings",
    "offset_store_for",
    "refresh_routes",
    "register_on",
    "require_started",
]

T = TypeVar("T")


def require_started(part: T | None, group: str, missing: str = "is not started") -> T:
    """``part`` of consumer ``group`` that exists only once started.

    Raises:
        ConfigError: ``part`` is None (``"consumer '<group>' <missing>"``).
    """
    if part is None:
        raise ConfigError(f"consumer {group!r} {missing}")
    return part


def _default_offset_base_directory() -> Path:
    """``~/.bolide``: where broadcasting consumers keep their progress unless the options
    name a directory (the one place that looks at the user's home)."""
    return Path.home() / ".bolide"


def _resolve_consume_timestamp_ms(
    consume_timestamp: int | datetime.datetime | None, now_ms: int
) -> int:
    """CONSUME_FROM TIMESTAMP's start: ms since the epoch, a datetime (naive = local time),
    or None for 30 minutes before ``now_ms`` (Java's default)."""
    if consume_timestamp is None:
        return now_ms - limits.CONSUME_TIMESTAMP_DEFAULT_AGO_MS
    if isinstance(consume_timestamp, datetime.datetime):
        return int(consume_timestamp.timestamp() * 1000)
    return int(consume_timestamp)


def _client_instance_for(
    namesrv: str | Iterable[str] | None,
    instance_name: str | None,
    instance: ClientInstance | None,
    clock: Clock | None,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: TlsClientSettings | bool | None = None,
) -> ClientInstance:
    """``instance`` when given (shared), else a new one for ``namesrv``.

    Raises:
        ConfigError: neither is given, or a bad name server list.
    """
    if instance is not None:
        return instance
    if namesrv is None:
        raise ConfigError("give the name server address (namesrv) or a client instance")
    config = build_client_config(
        namesrv, instance_name, access_key=access_key, secret_key=secret_key, tls=tls
    )
    return ClientInstance(config, clock=clock)


@dataclass(frozen=True, slots=True)
class MemberSettings:
    """What both consumers' constructors settle alike from their arguments."""

    group: str
    """The group as it goes out: ``<namespace>%<group>`` under a namespace."""
    namespace: str | None
    options: ConsumerOptions
    """The options given, or the defaults."""
    instance: ClientInstance
    consume_timestamp_ms: int
    """Where CONSUME_FROM TIMESTAMP starts, ms since the epoch."""
    allocate_strategy: AllocateStrategy
    """The options' strategy, or AllocateAveragely (Java's default)."""
    offset_base_directory: Path
    """Where broadcasting progress is kept: the options' directory, or ``~/.bolide``."""


def member_settings(
    group: str,
    namesrv: str | Iterable[str] | None,
    options: ConsumerOptions | None,
    unused: tuple[Collection[str], str],
    *,
    namespace: str | None,
    instance_name: str | None,
    instance: ClientInstance | None,
    clock: Clock | None,
    consume_timestamp: int | datetime.datetime | None,
    access_key: str | None,
    secret_key: str | None,
    tls: TlsClientSettings | bool | None,
) -> MemberSettings:
    """A consumer constructor's common arguments, checked and resolved. ``unused`` is the
    options this kind of consumer would ignore and its name for the error (``"a push
    consumer"``); the other arguments are the constructors' own.

    Raises:
        ConfigError: no group, a bad namespace, ``options`` setting an unused knob, neither
            ``namesrv`` nor ``instance``, or a bad name server list.
    """
    if not group:
        raise ConfigError("a consumer needs a group name")
    namespace = check_namespace(namespace)
    options = options or ConsumerOptions()
    options.refuse_unused(*unused)
    instance = _client_instance_for(
        namesrv,
        instance_name,
        instance,
        clock,
        access_key=access_key,
        secret_key=secret_key,
        tls=tls,
    )
    return MemberSettings(
        group=with_namespace(namespace, group),
        namespace=namespace,
        options=options,
        instance=instance,
        consume_timestamp_ms=_resolve_consume_timestamp_ms(
            consume_timestamp, instance.clock.now_ms()
        ),
        allocate_strategy=options.allocate_strategy or AllocateAveragely(),
        offset_base_directory=options.offset_base_directory or _default_offset_base_directory(),
    )


def offset_store_for(
    instance: ClientInstance, group: str, message_model: MessageModel, base_directory: Path
) -> OffsetStore:
    """Where ``group``'s progress is kept: on the broker in clustering mode, in this client's
    own file under ``base_directory`` in broadcasting mode (every member reads everything)."""
    if message_model is MessageModel.CLUSTERING:
        return RemoteOffsetStore(InstanceOffsetBroker(instance, group))
    path = local_offsets_path(base_directory, instance.client_id, group)
    return LocalFileOffsetStore(path)


async def register_on(instance: ClientInstance, consumer: InstanceConsumer) -> None:
    """Start using ``instance`` (the first user starts it) and register ``consumer`` there;
    a refused registration gives the instance back before raising.

    Raises:
        ConfigError: the consumer's group already runs on the instance.
    """
    await instance.acquire()
    try:
        instance.register_consumer(consumer)
    except ConfigError:
        await instance.release()
        raise


async def refresh_routes(
    instance: ClientInstance, group: str, topics: Iterable[str], log: logging.Logger
) -> None:
    """Fetch the route of each of ``topics`` now; a topic without a route yet is logged on
    ``log`` and left to the periodic refresh (its queues come at a later rebalance)."""
    for topic in topics:
        try:
            await instance.update_route(topic)
        except BolideError as error:
            log.warning("%s: no route for %s yet: %s", group, topic, error)

"""The shared core of the broker's versioned, persisted config tables.

:class:`ConfigTable` holds one immutable config per name (a topic in topics.json, a group in
subscriptionGroup.json) with the :class:`DataVersion` name servers compare (docs/protocol.md
§2.11, §4.4) and a change counter the :class:`ConfigFileWriter` uses to skip unchanged
writes. :class:`~bolide.broker.topics.TopicConfigManager` and
:class:`~bolide.broker.subscription_groups.SubscriptionGroupManager` add their own rules
(system entries, auto-creation, validation) on top. Use from the event loop thread only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Generic, TypeVar

from bolide.base.clock import Clock
from bolide.broker.config import ConfigFileWriter
from bolide.protocol.bodies.topic import DataVersion

__all__ = ["ConfigTable"]

ConfigT = TypeVar("ConfigT")


class ConfigTable(ABC, Generic[ConfigT]):
    """A name -> config table persisted to ``path``; ``clock`` stamps the data version.

    Subclasses provide ``encode()`` (the file's bytes) for the :class:`ConfigFileWriter`.
    """

    def __init__(self, path: Path, clock: Clock) -> None:
        self._clock = clock
        self._table: dict[str, ConfigT] = {}
        self._data_version = DataVersion(clock.now_ms(), 0)
        self._version = 0
        self.file = ConfigFileWriter(path, self)
        """Writes ``path``; every change awaits its :meth:`~ConfigFileWriter.flush`."""

    @abstractmethod
    def encode(self) -> bytes:
        """The file's bytes; each subclass defines its document."""

    # --- state and persistence ----------------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped by every change (the file writer skips unchanged tables)."""
        return self._version

    @property
    def data_version(self) -> DataVersion:
        """The version name servers compare to notice that the table changed."""
        return self._data_version

    @property
    def path(self) -> Path:
        return self.file.path

    async def persist(self) -> bool:
        """Write the file if the table changed since the last write; True if written."""
        return await self.file.flush()

    def _loaded(self, stored: tuple[Mapping[str, ConfigT], DataVersion] | None) -> None:
        """Take the table and data version read from the file (None: there was no file);
        the file writer then counts the file as holding the current version."""
        if stored is not None:
            self._table = dict(stored[0])
            self._data_version = stored[1]
        self._version += 1
        self.file.mark_written()

    def replace_from_master(self, table: Mapping[str, ConfigT], data_version: DataVersion) -> bool:
        """A slave takes its master's whole table and data version (SlaveSynchronize), when
        the version differs; True if it did (the caller persists)."""
        if data_version == self._data_version:
            return False
        self._table = dict(table)
        self._data_version = data_version
        self._version += 1
        return True

    def enter_epoch(self, master_epoch: int) -> None:
        """Controller mode: this broker changed role under ``master_epoch`` (Java's
        ``nextVersion(masterEpoch)``). Its registrations then carry ``stateVersion`` =
        ``master_epoch``, by which name servers fence a stale master (docs/replication.md)."""
        self._version += 1
        self._data_version = self._data_version.next_state(master_epoch, self._clock.now_ms())

    def _changed(self) -> None:
        """Count a change: the file writer and the name servers' data version move on."""
        self._version += 1
        self._data_version = self._data_version.next(self._clock.now_ms())

    # --- lookups ------------------------------------------------------------------------------

    def find(self, name: str) -> ConfigT | None:
        """The config named ``name``, or None (never creates one)."""
        return self._table.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __len__(self) -> int:
        return len(self._table)

"""Controller mode's epoch file and confirm offset, as the broker's parts use them.

* ``storePathEpochFile`` (default ``<storePathRootDir>/epochFileCheckpoint``) holds the
  ``<masterEpoch, startOffset>`` list; with it the HA stream is AutoSwitch's
  (docs/replication.md). Opening it drops entries that start past the commit log's end (the
  store's recovery already cut a torn tail there), so the list never names bytes the log
  does not hold.
* :class:`ConfirmOffset` gives the master's frames their confirmOffset: the least ack of the
  connected SyncStateSet replicas (:meth:`HaMaster.confirm_offset`), kept while one is away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from bolide.broker.ha.replication import Replication
from bolide.store.epoch_file import EpochFile
from bolide.store.file_store import FileMessageStore

__all__ = [
    "EPOCH_FILE_KEYS",
    "EPOCH_FILE_NAME",
    "ConfirmOffset",
    "epoch_file_path",
    "open_epoch_file",
]

EPOCH_FILE_NAME = "epochFileCheckpoint"
"""The epoch file's name under storePathRootDir (RocketMQ's default)."""

EPOCH_FILE_KEYS = frozenset(("storePathEpochFile",))
"""broker.conf keys read here (never reported as unknown)."""


def epoch_file_path(properties: Mapping[str, str], store_root: Path) -> Path:
    """``storePathEpochFile`` when given (non-empty), else ``store_root/epochFileCheckpoint``."""
    given = properties.get("storePathEpochFile", "").strip()
    return Path(given).expanduser() if given else store_root / EPOCH_FILE_NAME


def open_epoch_file(path: Path, log_end_offset: int) -> EpochFile:
    """Load the epoch list (empty when missing) and drop entries starting past
    ``log_end_offset`` (the commit log's end after recovery, bytes).

    Raises CorruptDataError when the file and its backup are both damaged.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    epochs = EpochFile(path)
    epochs.truncate_from(log_end_offset + 1)
    return epochs


class ConfirmOffset:
    """The master's confirmOffset over its SyncStateSet (a callable for HaMaster's frames).

    ``members`` gives the SyncStateSet's broker ids and ``own_id`` this broker's controller
    id (None before the controller gave one). Without a running HA master it is the log's end.
    """

    def __init__(
        self,
        replication: Replication,
        store: FileMessageStore,
        members: Callable[[], frozenset[int]],
        own_id: Callable[[], int | None],
    ) -> None:
        self._replication = replication
        self._store = store
        self._members = members
        self._own_id = own_id
        self.value = 0
        """The last confirmOffset given (bytes of commit log)."""

    def __call__(self) -> int:
        master = self._replication.master
        if master is None:
            self.value = self._store.commit_log_max_offset
            return self.value
        own = self._own_id()
        in_sync = {member for member in self._members() if member != own}
        self.value = master.confirm_offset(in_sync, self.value)
        return self.value

"""Local durable message storage: commit log, consume queues, index. No networking.

The broker uses :class:`MessageStore` (api.py) through :class:`FileMessageStore`; tests may use
:class:`MemoryMessageStore`, which follows the same contract.
"""

from bolide.store.api import (
    ArrivalListener,
    BatchPutRequest,
    GetResult,
    GetStatus,
    MessageStore,
    PutRequest,
    PutResult,
    PutStatus,
    RecoveryReport,
    StoreStats,
)
from bolide.store.config import FlushDiskType, StoreConfig, parse_delete_when
from bolide.store.file_store import FileMessageStore
from bolide.store.memory_store import MemoryMessageStore

__all__ = [
    "ArrivalListener",
    "BatchPutRequest",
    "FileMessageStore",
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MemoryMessageStore",
    "MessageStore",
    "PutRequest",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "StoreConfig",
    "StoreStats",
    "parse_delete_when",
]

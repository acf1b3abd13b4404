"""The admin client: the operations of mqadmin and the RocketMQ dashboard.

Layers, top to bottom (an import-linter contract keeps them so):

* :mod:`.blocking` — ``bolide.AdminClient``, the blocking facade;
* :mod:`.client` — :class:`AdminClient`, the async facade every caller uses;
* :mod:`.operations`, :mod:`.progress`, :mod:`.messages` — multi-step operations the facade
  delegates to; each takes the session layer below, never the facade;
* :mod:`.session` — connections, name-server fail-over, fan-out and single-request queries
  (requests through :mod:`bolide.client.rpc`);
* :mod:`.views` — the plain records the operations answer and the shared constants.
"""

from bolide.client.admin.client import AdminClient
from bolide.client.admin.session import ADMIN_PRODUCER_GROUP
from bolide.client.admin.views import (
    DEFAULT_QUEUE_COUNT,
    RESET_TO_EARLIEST,
    RESET_TO_LATEST,
    START_BY_CONSUME_FROM,
    BrokerSummary,
    GroupProgress,
    GroupSummary,
    ProgressCallback,
    QueueProgress,
    QueueStatus,
    ResendOutcome,
    ResetResult,
)

__all__ = [
    "ADMIN_PRODUCER_GROUP",
    "DEFAULT_QUEUE_COUNT",
    "RESET_TO_EARLIEST",
    "RESET_TO_LATEST",
    "START_BY_CONSUME_FROM",
    "AdminClient",
    "BrokerSummary",
    "GroupProgress",
    "GroupSummary",
    "ProgressCallback",
    "QueueProgress",
    "QueueStatus",
    "ResendOutcome",
    "ResetResult",
]

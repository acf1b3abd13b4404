"""``bolide.TransactionProducer``: the blocking facade of
:class:`bolide.client.producer.transaction.TransactionProducer`.

The half send and the END_TRANSACTION run on the facade's loop thread; ``execute`` runs on the
caller's thread, between them, as in Java. Checkers run as the async core runs them (plain
functions on its bounded thread pool).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from bolide.client.blocking.loop import ClientFacade
from bolide.client.message import Message, SendStatus
from bolide.client.producer.transaction import (
    LocalTransactionState,
    TransactionChecker,
    TransactionExecutor,
    TransactionSendResult,
    state_of,
    with_state,
)
from bolide.client.producer.transaction import TransactionProducer as AsyncTransactionProducer

__all__ = ["TransactionProducer"]

_log = logging.getLogger("bolide.client.producer.transaction")


class TransactionProducer(ClientFacade[AsyncTransactionProducer]):
    """``bolide.TransactionProducer("order-tx", namesrv="127.0.0.1:9876", checker=check)``.

    Same options and errors as :class:`bolide.aio.TransactionProducer`; ``execute`` and
    ``checker`` are plain functions returning a :class:`LocalTransactionState`.
    ``with TransactionProducer(...) as producer:`` starts and shuts it down.
    """

    def __init__(
        self,
        group: str,
        namesrv: str | Iterable[str] | None = None,
        *,
        checker: TransactionChecker,
        **options: Any,
    ) -> None:
        core = AsyncTransactionProducer(group, namesrv, checker=checker, **options)
        super().__init__(core, f"bolide-tx-producer-{group}")

    def send_in_transaction(
        self, message: Message, execute: TransactionExecutor, arg: Any = None
    ) -> TransactionSendResult:
        """Send ``message`` as a half, run ``execute(message, arg)`` here, end the
        transaction; see :meth:`bolide.aio.TransactionProducer.send_in_transaction`."""
        core = self._core
        result = self._run(core.send_half(message))
        state, error = LocalTransactionState.ROLLBACK_MESSAGE, None
        if result.status is SendStatus.SEND_OK:
            try:
                state = state_of(execute(message, arg))
            except Exception as failure:  # the user's code: any failure means "unknown"
                _log.warning(
                    "local transaction of %s failed: %r", message.topic, failure, exc_info=failure
                )
                state, error = LocalTransactionState.UNKNOW, failure
        self._run(core.end_transaction(result, state, error, message))
        return with_state(result, state)

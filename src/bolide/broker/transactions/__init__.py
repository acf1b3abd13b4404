"""Transactional messages: half store, op records, END_TRANSACTION, the check-back service."""

from bolide.broker.transactions.records import half_target, is_transaction_half
from bolide.broker.transactions.service import (
    EndOutcome,
    TransactionService,
    TransactionSettings,
)

__all__ = [
    "EndOutcome",
    "TransactionService",
    "TransactionSettings",
    "half_target",
    "is_transaction_half",
]

"""Transactional messages: half store, op records, END_TRANSACTION, the check-back service."""

from bolide.broker.transactions.records import half_target, is_transaction_half
from bolide.broker.transactions.service import (
    ALL_HALVES,
    EndOutcome,
    HalfFilter,
    TransactionService,
    TransactionSettings,
)

__all__ = [
    "ALL_HALVES",
    "EndOutcome",
    "HalfFilter",
    "TransactionService",
    "TransactionSettings",
    "half_target",
    "is_transaction_half",
]

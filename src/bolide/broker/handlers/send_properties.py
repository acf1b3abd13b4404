"""What the broker reads in a send's properties string, and the edits it makes to it.

The broker acts on a few properties (DELAY, the timer ones, CLUSTER, BOLIDE_DELIVERED_FROM,
TRAN_MSG; WAIT for a SYNC_MASTER): a string holding none of them is edited as a string (WAIT
dropped, CLUSTER appended, :mod:`bolide.protocol.record.properties`), any other is decoded.
Used by the send handlers of :mod:`bolide.broker.handlers.send` and their fast forms.
"""

from __future__ import annotations

from bolide.broker.context import RefusedError
from bolide.broker.delivery import DELIVERED_FROM
from bolide.broker.timer import TIMER_TRIGGER_PROPERTIES
from bolide.broker.transactions.records import TRAN_MSG, is_transaction_half
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    BatchEntry,
    decode_properties,
    edit_plain_properties,
    encode_properties,
    properties_are_plain,
    without_property,
)

__all__ = [
    "SLOW_MARKS",
    "clean_entry",
    "has_delay",
    "plain_properties",
    "waits_for_store",
    "without_wait",
]

# Properties the broker acts on: a string holding one of them (even as the end of a longer
# name) takes the decoding path; the others are edited as a string
# (bolide.protocol.record.properties).
SLOW_NAMES = (
    PropertyKey.DELAY,
    PropertyKey.CLUSTER,
    DELIVERED_FROM,
    *TIMER_TRIGGER_PROPERTIES,
    TRAN_MSG,
)


SLOW_MARKS = tuple(f"{name}{NAME_VALUE_SEPARATOR}" for name in SLOW_NAMES)


def plain_properties(text: str) -> bool:
    """Whether ``text`` is well formed and holds none of :data:`SLOW_NAMES`."""
    return properties_are_plain(text, SLOW_NAMES)


def without_wait(text: str) -> str:
    """``text`` without its WAIT property (``text`` itself when it has none)."""
    return without_property(text, PropertyKey.WAIT)


def has_delay(properties: dict[str, str]) -> bool:
    """A DELAY level above 0 or a timer property (batches may have neither)."""
    if any(name in properties for name in TIMER_TRIGGER_PROPERTIES):
        return True
    text = properties.get(PropertyKey.DELAY)
    if not text:
        return False
    try:
        return int(text) > 0
    except ValueError:
        return True  # not a number: refuse rather than guess


def clean_entry(entry: BatchEntry) -> BatchEntry:
    """The entry without WAIT; refuses (MESSAGE_ILLEGAL) an entry with a delay level."""
    # The common entry (none of SLOW_MARKS): WAIT dropped as a string, in one compiled call.
    text = edit_plain_properties(entry.properties, SLOW_MARKS, PropertyKey.WAIT, "")
    if text is not None:
        return entry if text == entry.properties else BatchEntry(entry.flag, entry.body, text)
    properties = decode_properties(entry.properties)
    if has_delay(properties):
        raise RefusedError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot hold delayed messages")
    if is_transaction_half(properties, 0):
        raise RefusedError(
            ResponseCode.MESSAGE_ILLEGAL, "a batch cannot hold transactional messages"
        )
    waited = properties.pop(PropertyKey.WAIT, None)
    forged = properties.pop(DELIVERED_FROM, None)
    if waited is None and forged is None:
        return entry
    return BatchEntry(entry.flag, entry.body, encode_properties(properties))


_WAIT_FALSE = f"{PropertyKey.WAIT}{NAME_VALUE_SEPARATOR}false"


def waits_for_store(properties: str | None) -> bool:
    """The WAIT property (waitStoreMsgOK): only WAIT=false skips the SYNC_MASTER wait."""
    if not properties or _WAIT_FALSE not in properties:
        return True
    return not any(pair == _WAIT_FALSE for pair in properties.split(PROPERTY_SEPARATOR))

"""What a consumer's listener receives and returns.

A concurrent listener is called with a batch of messages (at most
``consume_message_batch_max_size``, default 1) and returns a :class:`ConsumeResult`:

* ``SUCCESS`` — the whole batch is consumed, unless the listener lowered
  :attr:`ConsumeContext.ack_index`: then messages after that index are treated as failed;
* ``RECONSUME_LATER`` — every message of the batch failed. In clustering mode failed messages
  are sent back to the broker (``%RETRY%<group>``, delivered again after a delay); in
  broadcasting mode they are logged and dropped (RocketMQ's offset management,
  ``processConsumeResult``).

A listener takes either one argument (the messages) or two (the messages and a
:class:`ConsumeContext`); it is a plain function (run in the consumer's thread pool) or a
coroutine function (run as a task on the client's loop). Raising counts as
``RECONSUME_LATER``; returning anything but a :class:`ConsumeResult` does too (and is logged).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from bolide.protocol.bodies import MessageModel
from bolide.protocol.message import MessageExt

__all__ = [
    "AdaptedListener",
    "ConsumeContext",
    "ConsumeResult",
    "Listener",
    "MessageModel",
    "OrderlyResult",
    "adapt_listener",
]


class ConsumeResult(enum.Enum):
    """The outcome of a concurrent listener call (Java ConsumeConcurrentlyStatus)."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class OrderlyResult(enum.Enum):
    """The outcome of an orderly listener call (Java ConsumeOrderlyStatus); issue 7."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeContext:
    """Per-call context handed to a two-argument listener.

    ``ack_index``: with ``SUCCESS``, messages ``[0 .. ack_index]`` count as consumed and the
    rest as failed; it starts at ``len(messages) - 1`` (all consumed) and values past the
    end are clamped. ``delay_level_when_next_consume``: delay level asked for the failed
    messages when they are sent back (0, the default, lets the broker pick 3 + reconsume
    times; a negative value sends them straight to the dead-letter queue).
    ``topic``, ``broker_name`` and ``queue_id`` name the queue the batch came from.
    """

    topic: str
    broker_name: str
    queue_id: int
    ack_index: int
    delay_level_when_next_consume: int = 0


Listener: TypeAlias = (
    Callable[[list[MessageExt]], ConsumeResult]
    | Callable[[list[MessageExt], ConsumeContext], ConsumeResult]
    | Callable[[list[MessageExt]], Awaitable[ConsumeResult]]
    | Callable[[list[MessageExt], ConsumeContext], Awaitable[ConsumeResult]]
)
"""What ``register_listener`` accepts."""


@dataclass(frozen=True, slots=True)
class AdaptedListener:
    """A user listener with its calling convention worked out once, at registration."""

    call: Callable[[list[MessageExt], ConsumeContext], Any]
    is_async: bool


def adapt_listener(listener: Callable[..., Any]) -> AdaptedListener:
    """Work out whether ``listener`` wants the context and whether it is a coroutine function.

    Raises:
        TypeError: ``listener`` is not callable or takes neither one nor two positional
            arguments.
    """
    candidate: object = listener
    if not callable(candidate):
        raise TypeError(f"a listener must be callable, not {type(candidate).__name__}")
    wants_context = _positional_arity(listener) >= 2
    # A callable object with an ``async def __call__`` is a coroutine function too.
    is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
        type(listener).__call__
    )

    if wants_context:
        return AdaptedListener(listener, is_async)

    def call_without_context(messages: list[MessageExt], _context: ConsumeContext) -> Any:
        return listener(messages)

    return AdaptedListener(call_without_context, is_async)


def _positional_arity(listener: Callable[..., Any]) -> int:
    try:
        signature = inspect.signature(listener)
    except (TypeError, ValueError):
        return 1  # builtins without a signature: assume the one-argument form
    kinds = [parameter.kind for parameter in signature.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return 2
    positional = sum(
        1
        for kind in kinds
        if kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )
    if positional == 0:
        raise TypeError(f"a listener takes (messages) or (messages, context), not {signature}")
    return min(positional, 2)

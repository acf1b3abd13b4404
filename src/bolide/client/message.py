"""The message types of the client API: :class:`Message` (what producers send),
:class:`MessageExt` (what consumers receive), :class:`SendResult` and :class:`SendStatus`.

:class:`Message` extends the wire-level :class:`bolide.protocol.message.Message` with the
delivery-time settings and a guarded way to set user properties; :class:`MessageExt` is the
decoded record itself.

Delayed delivery, three ways (the broker decides what it honours):

* ``delay_level`` 1..18 — the DELAY property: RocketMQ 4.x's fixed levels (1s 5s 10s 30s 1m ...
  2h);
* ``deliver_at_ms`` — the TIMER_DELIVER_MS property: an absolute time, ms since the epoch;
* ``delay_ms`` — the TIMER_DELAY_MS property: a delay from when the broker stores it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bolide.base.errors import InvalidMessageError
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.codes import ResponseCode
from bolide.protocol.message import Message as WireMessage
from bolide.protocol.message import MessageExt, PropertyKey

__all__ = [
    "SYSTEM_PROPERTY_NAMES",
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
]

SYSTEM_PROPERTY_NAMES = frozenset(
    value for name, value in vars(PropertyKey).items() if name.isupper() and isinstance(value, str)
)
"""Property names that brokers and clients interpret; user properties may not use them."""


class Message(WireMessage):
    """A message to send: ``Message("orders", b'{"id": 17}', tags="paid", keys="order-17")``.

    ``keys`` may be a list (stored space-joined). See the module docstring for
    ``delay_level``, ``deliver_at_ms`` and ``delay_ms``. ``properties`` may hold user
    properties; :meth:`put_user_property` refuses the system names.
    """

    __slots__ = ()

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        flag: int = 0,
        properties: Mapping[str, str] | None = None,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        delay_level: int | None = None,
        deliver_at_ms: int | None = None,
        delay_ms: int | None = None,
    ) -> None:
        super().__init__(
            topic, body, flag, properties, tags=tags, keys=keys, delay_level=delay_level
        )
        if deliver_at_ms is not None:
            self.deliver_at_ms = deliver_at_ms
        if delay_ms is not None:
            self.delay_ms = delay_ms

    @property
    def deliver_at_ms(self) -> int | None:
        """Delivery time (TIMER_DELIVER_MS), ms since the epoch, or None."""
        return self._time_ms(PropertyKey.TIMER_DELIVER_MS)

    @deliver_at_ms.setter
    def deliver_at_ms(self, value: int | None) -> None:
        self._put_time_ms(PropertyKey.TIMER_DELIVER_MS, "deliver_at_ms", value)

    @property
    def delay_ms(self) -> int | None:
        """Delay after storing (TIMER_DELAY_MS), ms, or None."""
        return self._time_ms(PropertyKey.TIMER_DELAY_MS)

    @delay_ms.setter
    def delay_ms(self, value: int | None) -> None:
        self._put_time_ms(PropertyKey.TIMER_DELAY_MS, "delay_ms", value)

    def _time_ms(self, name: str) -> int | None:
        """The timer property ``name`` (ms); None when absent or not a count of ms."""
        text = self.properties.get(name)
        return int(text) if text and text.isdigit() else None

    def _put_time_ms(self, name: str, setting: str, value: int | None) -> None:
        """Set the timer property ``name`` to ``value`` ms, or remove it when None.

        Raises:
            InvalidMessageError: ``value`` is negative (``setting`` names it).
        """
        if value is not None and value < 0:
            raise InvalidMessageError(f"{setting} must not be negative, not {value}")
        self._put_or_remove(name, None if value is None else str(value))

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property.

        Raises:
            InvalidMessageError: ``name`` is empty or one of :data:`SYSTEM_PROPERTY_NAMES`.
        """
        if not name or name in SYSTEM_PROPERTY_NAMES:
            raise InvalidMessageError(f"{name!r} is a reserved property name")
        self.properties[name] = value


class SendStatus(enum.Enum):
    """How a send ended. Only SEND_OK means stored and flushed as the broker promises; the
    others mean stored, but not (yet) flushed or replicated."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"

    @classmethod
    def from_response_code(cls, code: int) -> SendStatus | None:
        """The status a send response code means, or None when the send failed."""
        return _STATUS_BY_CODE.get(code)


_STATUS_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a successful send returns.

    ``msg_id`` is the producer-made id (UNIQ_KEY) and ``offset_msg_id`` the broker's (store
    host + commit-log offset); for a batch both are the ids of every message joined by ``,``.
    ``queue_offset`` is the logical offset of the (first) stored message in ``queue``.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    recall_handle: str | None = None
    """For a delayed (timer) message, the handle :meth:`Producer.recall_message` takes."""

"""The one tree of operating errors.

Every error Bolide raises on purpose derives from :class:`BolideError` and says through
``retriable`` whether trying the same operation again may succeed: the one source every retry
loop reads (a class default, set per instance by :class:`RemoteError` from the response-code
table). :class:`TransportError` groups the failures where the peer never answered, which is
what fail-over between name servers waits for. Programmer errors are not in this tree: they
are :class:`InvariantViolationError`, raised by :func:`invariant`.
"""

from __future__ import annotations


class BolideError(Exception):
    """Base of every operating error."""

    retriable: bool = False
    """Whether trying the same operation again (later, or on another peer) may succeed."""


class ConfigError(BolideError):
    """A setting is missing, malformed or out of its allowed range."""


class ProtocolError(BolideError):
    """Bytes from a peer do not form a valid RocketMQ frame, header or body."""


class FrameTooLargeError(ProtocolError):
    """A frame announces a length above the configured maximum."""


class TransportError(BolideError):
    """The exchange did not complete: the peer never answered (retriable, maybe elsewhere)."""

    retriable = True


class ConnectionClosedError(TransportError):
    """The connection closed (or could not be opened) before the exchange completed."""


class RequestTimeoutError(TransportError):
    """No response arrived within the request's timeout."""


class BackpressureError(TransportError):
    """A bounded queue or table is full; the caller should slow down and retry."""


class RemoteError(BolideError):
    """A peer answered a request with a non-success response code; ``retriable`` comes from
    the response-code table (:func:`bolide.protocol.codes.remote_error`)."""

    def __init__(self, code: int, remark: str | None, *, retriable: bool = False) -> None:
        super().__init__(f"remote error code {code}: {remark or ''}".rstrip(": "))
        self.code = code
        self.remark = remark
        self.retriable = retriable


class StoreError(BolideError):
    """The message store could not complete an operation."""


class DiskFullError(StoreError):
    """The store refused a write because the disk is (nearly) full."""

    retriable = True


class StoreIOError(StoreError):
    """An I/O error hit a store file; the affected segment refuses writes until recovery."""


class CorruptDataError(StoreError):
    """Stored bytes failed a checksum or layout check."""


class ReplicaOffsetError(StoreError):
    """Replicated commit-log bytes do not start where the replica's log ends, or do not hold
    whole, sound records at the offsets they claim (HA stream out of step or garbage)."""


class NoRouteError(BolideError):
    """No name server gave a route with a writable (or readable) queue for the topic."""

    retriable = True


class TopicNotFoundError(NoRouteError):
    """The topic exists on no broker, and could not be created automatically."""


class NameServerUnavailableError(ConnectionClosedError):
    """None of the configured name servers answered within the timeout."""


class InvalidMessageError(BolideError):
    """A message fails the producer's checks (topic name, empty body, batch rules)."""


class MessageTooLargeError(InvalidMessageError):
    """A message body (or a batch) is larger than a broker accepts."""


class DataLossError(BolideError):
    """Messages a reader was to read are gone: retention deleted them before they were read,
    or their queue no longer exists (the Spark source's failOnDataLoss)."""


class NotFoundError(BolideError):
    """An admin operation names something no broker knows: a consumer group, a message, a
    broker (a missing topic is :class:`TopicNotFoundError`)."""


class GroupNotFoundError(NotFoundError):
    """No broker has the consumer group: no subscription group, no online consumer, no
    committed offset."""


class MessageNotFoundError(NotFoundError):
    """No broker holds a message with the given id or key."""


class ServiceCrashedError(BolideError):
    """A background service stopped because its step raised."""


class InvariantViolationError(AssertionError):
    """A condition the code relies on does not hold: a bug, never bad input."""


def invariant(condition: bool, message: str) -> None:
    """Raise :class:`InvariantViolationError` with ``message`` when ``condition`` is false.

    For programmer errors only; input from peers, files or users is checked with typed errors.
    """
    if not condition:
        raise InvariantViolationError(message)

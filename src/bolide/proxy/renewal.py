"""Automatic renewal of invisible times for clients that receive with ``auto_renew`` (the push
consumers), as the Apache proxy's ``enableProxyAutoRenew``.

Such a receive pops with the default invisible time (60 s). Until the client acks, changes
or forgets the message, the proxy changes its invisible time again shortly before it runs
out, for at most POP_INVISIBLE_TIME_MAX_MS in all. Each change gives the message a new
receipt handle the client never sees, so the client's handle is translated to the current one
when it acks, changes or dead-letters the message. When the client goes away (termination,
Telemetry closed) renewal stops and its messages come back after their invisible time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bolide.base import limits
from bolide.protocol.headers import HeaderError
from bolide.protocol.headers.pop import ReceiptHandle

__all__ = ["AutoRenewal", "Renewed"]

_log = logging.getLogger("bolide.proxy")

Change = Callable[[str, str, ReceiptHandle, int], Awaitable[ReceiptHandle | None]]
"""(topic, group, current handle, invisible ms) -> the new handle, None when stale."""


@dataclass(slots=True)
class Renewed:
    client_id: str
    topic: str
    group: str
    current: ReceiptHandle
    first_pop_time_ms: int


class AutoRenewal:
    def __init__(self, change: Change, *, invisible_time_ms: int, renew_ahead_ms: int) -> None:
        self._change = change
        self.invisible_time_ms = invisible_time_ms
        self._renew_ahead_ms = renew_ahead_ms
        self._entries: dict[str, Renewed] = {}
        """The client's handle text -> what is renewed for it."""

    def __len__(self) -> int:
        return len(self._entries)

    def track(self, client_id: str, topic: str, group: str, handle_text: str) -> None:
        if len(self._entries) >= limits.PROXY_AUTO_RENEW_MAX_MESSAGES:
            return  # beyond the bound a message simply comes back after its invisible time
        try:
            handle = ReceiptHandle.decode(handle_text)
        except HeaderError:
            return
        self._entries[handle_text] = Renewed(client_id, topic, group, handle, handle.pop_time_ms)

    def current(self, handle_text: str) -> str:
        """The handle to use for the client's ``handle_text`` (itself when not renewed)."""
        entry = self._entries.get(handle_text)
        return entry.current.encode() if entry is not None else handle_text

    def forget(self, handle_text: str) -> None:
        self._entries.pop(handle_text, None)

    def forget_client(self, client_id: str) -> int:
        gone = [key for key, entry in self._entries.items() if entry.client_id == client_id]
        for key in gone:
            del self._entries[key]
        return len(gone)

    async def renew_due(self, now_ms: int) -> int:
        """Renew every handle whose invisible time ends within the renew-ahead time; returns
        how many were renewed. Handles renewed for too long, or gone stale, are dropped."""
        renewed = 0
        for key, entry in list(self._entries.items()):
            if entry.current.deadline_ms() - now_ms > self._renew_ahead_ms:
                continue
            if now_ms - entry.first_pop_time_ms >= limits.POP_INVISIBLE_TIME_MAX_MS:
                self._entries.pop(key, None)
                continue
            try:
                new = await self._change(
                    entry.topic, entry.group, entry.current, self.invisible_time_ms
                )
            except Exception as error:
                _log.warning("auto renewal of a %s message failed: %s", entry.topic, error)
                continue
            if new is None:
                self._entries.pop(key, None)
            else:
                entry.current = new
                renewed += 1
        return renewed

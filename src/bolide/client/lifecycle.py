"""``async with`` for the async clients (producer, consumers, admin client).

Each client starts with ``start()`` and ends with its own closing method (``shutdown`` or
``close``); :class:`AsyncLifecycle` maps ``async with`` onto the pair once for all of them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncLifecycle"]


class AsyncLifecycle:
    """Mixin: ``async with client:`` awaits ``start()``, and ``_close()`` on the way out
    (whatever the block raised; the exception still propagates)."""

    async def start(self) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        """The client's closing method (``shutdown`` or ``close``)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._close()

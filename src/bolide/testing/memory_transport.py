"""A transport in memory: a real :class:`~bolide.remoting.Connection` over it, no socket.

The send path's differential test and ``bench/send_path.py`` feed request frames to a broker's
dispatcher through a real Connection (frame cut, command decode, dispatch, answer encoding)
and need the same peer address on every run and the answer bytes as written: a socket would
give a fresh client port each time and hide the frames in the kernel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["MemoryTransport"]


class MemoryTransport(asyncio.Transport):
    """Keeps every byte written (:attr:`written`); reports fixed socket addresses."""

    def __init__(self, peer: tuple[str, int] | str, local: tuple[str, int]) -> None:
        super().__init__()
        self._extra = {"peername": peer, "sockname": local}
        self.written = bytearray()
        self.write_calls = 0
        self._closing = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return self._extra.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.write_calls += 1
        self.written += data

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write_calls += 1
        for data in list_of_data:
            self.written += data

    def take(self) -> bytes:
        """What was written since the last call."""
        data = bytes(self.written)
        self.written.clear()
        return data

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True

    def abort(self) -> None:
        self._closing = True

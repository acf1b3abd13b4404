"""A raw socket peer for transport tests: writes exact bytes, reads frames with the real codec.

It plays the misbehaving or foreign side (garbage, half frames, C++-style flags) that a
Bolide client would never produce.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from bolide.protocol.command import RemotingCommand, decode_command, encode_command
from bolide.protocol.frame import FrameDecoder, RawFrame


class RawPeer:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._decoder = FrameDecoder()
        self._frames: list[RawFrame] = []

    @classmethod
    async def connect(cls, port: int, *, receive_buffer_bytes: int | None = None) -> RawPeer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer_bytes is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer)

    async def send(self, command: RemotingCommand) -> None:
        await self.send_bytes(encode_command(command))

    async def send_bytes(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> RawFrame:
        while not self._frames:
            data = await self.reader.read(65_536)
            if not data:
                raise EOFError("peer closed before a whole frame arrived")
            self._frames.extend(self._decoder.feed(data))
        return self._frames.pop(0)

    async def read_command(self) -> RemotingCommand:
        return decode_command(await self.read_frame())

    async def read_until_eof(self) -> int:
        """Read and discard everything until the other side closes; return the byte count."""
        total = 0
        while data := await self.reader.read(1 << 20):
            total += len(data)
        return total

    async def close(self) -> None:
        self.writer.close()
        # The server may already have reset the connection: that is what some tests check.
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()

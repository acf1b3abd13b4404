"""A minimal HTTP/1.1 GET over asyncio for the /metrics tests (no client library needed)."""

from __future__ import annotations

import asyncio
import gzip


async def http_get(
    address: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of one request to ``host:port``."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        writer.write(f"{method} {path} HTTP/1.1\r\nHost: {address}\r\n{extra}\r\n".encode())
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    parsed = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    if parsed.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return status, parsed, body

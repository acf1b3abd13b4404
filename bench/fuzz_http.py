"""HTTP fuzzing shared by the dashboard's and the metrics' fuzzers (issue 30).

Requests are written as raw HTTP/1.1 bytes (so anything can be sent): known paths and forms of
the listener, mutated — methods from the usual ones to garbage, paths made long (up to
~100 KB), percent-encoded garbage, ``..`` and NUL, query strings; headers with wrong or
negative Content-Length, odd content types, duplicated and oversized headers, a session
cookie and CSRF token taken from a real login page (kept, dropped or mangled); form bodies
with the real field names and mutated values; plus raw garbage and slow or cut writes. Every
request asks ``Connection: close``. An answer with status 500 or above counts as a server
fault (an exception escaped a handler).
"""

from __future__ import annotations

import asyncio
import random
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.fuzz_support import INTERESTING_INTS, Mutator, ServerUnderTest, exchange

__all__ = ["HttpTarget", "http_attack", "http_get", "status_of"]

CONCURRENT_EXCHANGES = 32
LONG_PATH_MAX_CHARS = 100_000
_STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3})")
_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT")


@dataclass
class HttpTarget:
    """What the fuzzer knows of one HTTP listener."""

    listener: str
    paths: Sequence[str]
    form_fields: Sequence[str] = ()
    cookie: str = ""
    csrf: str = ""
    faults: list[str] = field(default_factory=list)


def status_of(answer: bytes) -> int | None:
    match = _STATUS.match(answer)
    return int(match.group(1)) if match else None


async def http_get(server: ServerUnderTest, listener: str, path: str, headers: str = "") -> bytes:
    host, port = server.address(listener)
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}Connection: close\r\n\r\n"
    return await exchange((host, port), request.encode(), until=lambda data: False)


def _path(target: HttpTarget, mutator: Mutator) -> str:
    rng = mutator.rng
    path = rng.choice(list(target.paths))
    roll = rng.random()
    if roll < 0.15:
        path += "/" + "a" * rng.randint(1, LONG_PATH_MAX_CHARS)
    elif roll < 0.3:
        path += "?" + "&".join(
            f"{mutator.text('k')}={mutator.text('v')}" for _ in range(rng.randint(1, 8))
        )
    elif roll < 0.4:
        path += rng.choice(("/..", "/../../etc/passwd", "%00", "%zz", "%", "//", "/%2e%2e/"))
    elif roll < 0.5:
        path = "/" + urllib.parse.quote(mutator.text(path), safe="", errors="surrogatepass")
    elif roll < 0.55:
        path = mutator.text(path)
    path = "".join(c for c in path if c not in "\r\n ")
    return path or "/"


def _form(target: HttpTarget, mutator: Mutator) -> str:
    rng = mutator.rng
    values: list[tuple[str, str]] = []
    for name in target.form_fields:
        if rng.random() < 0.8:
            values.append((name, mutator.text(rng.choice(("G1", "T1", "0", "true")))))
    if target.csrf and rng.random() < 0.8:
        values.append(("csrf", target.csrf if rng.random() < 0.6 else mutator.text(target.csrf)))
    text = urllib.parse.urlencode(values, errors="surrogatepass")
    return text if rng.random() < 0.9 else mutator.text(text)


def _request(target: HttpTarget, host: str, mutator: Mutator) -> bytes:
    rng = mutator.rng
    method = rng.choice(_METHODS) if rng.random() < 0.9 else mutator.text("GET")[:32] or "X"
    method = "".join(c for c in method if c not in "\r\n ") or "X"
    body = _form(target, mutator).encode("utf-8", "surrogatepass") if rng.random() < 0.5 else b""
    headers = [f"Host: {host}", "Connection: close"]
    if body or rng.random() < 0.1:
        headers.append(
            "Content-Type: "
            + rng.choice(
                (
                    "application/x-www-form-urlencoded",
                    "multipart/form-data; boundary=x",
                    "text/plain",
                    "application/json",
                    mutator.text("a/b").replace("\r", "").replace("\n", ""),
                )
            )
        )
        length = len(body) if rng.random() < 0.8 else rng.choice(INTERESTING_INTS)
        headers.append(f"Content-Length: {length}")
    if target.cookie and rng.random() < 0.7:
        cookie = target.cookie if rng.random() < 0.7 else mutator.text(target.cookie)
        headers.append("Cookie: " + cookie.replace("\r", "").replace("\n", ""))
    if rng.random() < 0.1:
        headers.append("X-Long: " + "h" * rng.randint(1, 70_000))
    if rng.random() < 0.05:
        headers.append(mutator.text("Bad Header").replace("\r", "").replace("\n", ""))
    head = f"{method} {_path(target, mutator)} HTTP/1.1\r\n" + "\r\n".join(headers) + "\r\n\r\n"
    return head.encode("utf-8", "surrogatepass") + body


async def http_attack(
    target: HttpTarget, server: ServerUnderTest, rng: random.Random, budget: int
) -> int:
    mutator = Mutator(rng)
    gate = asyncio.Semaphore(CONCURRENT_EXCHANGES)
    host, port = server.address(target.listener)

    async def one() -> None:
        roll = rng.random()
        if roll < 0.8:
            payload, slow = _request(target, f"{host}:{port}", mutator), rng.random() < 0.05
        elif roll < 0.9:
            request = _request(target, f"{host}:{port}", mutator)
            payload, slow = request[: rng.randrange(len(request))], True
        else:
            payload, slow = mutator.garbage(), rng.random() < 0.3
        async with gate:
            answer = await exchange((host, port), payload, slow=slow, rng=rng)
        code = status_of(answer)
        if code is not None and code >= 500:
            target.faults.append(f"{code} for {payload[:120]!r}")

    await asyncio.gather(*(one() for _ in range(budget)))
    server.client_side_errors.extend(target.faults)
    target.faults.clear()
    return budget

"""A Python client for blocking callers: Spark's driver-side planner and executor tasks.

Spark calls the source and sink from plain threads (the planner worker's main thread, a task's
thread). :class:`BlockingClient` gives such a caller a :class:`ClientInstance` on a private
event loop that runs only inside its calls (``run_until_complete``): no extra thread competes
for the GIL while a task decodes rows, and nothing keeps running once the caller is done.
Responses that arrive between calls wait in the socket buffers.

Everything it opens is released by :meth:`BlockingClient.close`; Spark may never call a
reader's ``stop()``, so tasks close their client in ``finally`` and the driver's planner keeps
one for the life of its process.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.client.config import build_client_config
from bolide.client.instance import ClientInstance
from bolide.remoting.loop import new_event_loop
from bolide.spark.options import ClusterAccess

__all__ = ["BlockingClient"]

_log = logging.getLogger("bolide.spark")

T = TypeVar("T")


class BlockingClient:
    """A client instance for ``namesrv`` (``host:port``, ``;`` or ``,`` separated), driven by
    blocking calls. ``purpose`` names it in its client id. Not thread-safe: one caller thread.

    Raises ConfigError (bad name-server list) on construction.
    """

    def __init__(self, namesrv: str, purpose: str, access: ClusterAccess | None = None) -> None:
        instance_name = f"spark-{purpose}-{uuid.uuid4().hex[:12]}"
        options = (access or ClusterAccess()).client_options()
        self.instance = ClientInstance(build_client_config(namesrv, instance_name, **options))
        self._loop: asyncio.AbstractEventLoop | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = new_event_loop()
            self._loop.run_until_complete(self.instance.start())
        return self._loop

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the client's loop and return its result (or raise its error)."""
        return self._running_loop().run_until_complete(coroutine)

    def run_idempotent(self, action: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
        """Run ``action()``, again after a dropped connection or a timeout (idle connections
        may have been closed by the server between two calls), up to
        limits.SPARK_PULL_ATTEMPTS_MAX_COUNT times in all. Raises the last error."""
        attempts = limits.SPARK_PULL_ATTEMPTS_MAX_COUNT
        for attempt in range(1, attempts + 1):
            try:
                return self.run(action())
            except BolideError as error:
                if not error.retriable or attempt == attempts:
                    error.add_note(f"{what} failed {attempts} times")
                    raise
                _log.warning("%s failed (attempt %d of %d): %s", what, attempt, attempts, error)
                self.run(self.instance.clock.sleep_ms(limits.SPARK_PULL_RETRY_DELAY_MS))
        raise AssertionError("unreachable")  # pragma: no cover

    def iterate(self, generator: AsyncIterator[T]) -> Iterator[T]:
        """The items of an async generator, each fetched by running the loop; the generator is
        closed (on the loop) when iteration stops early or fails."""
        loop = self._running_loop()
        try:
            while True:
                try:
                    item = loop.run_until_complete(anext(generator))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            close = getattr(generator, "aclose", None)
            if close is not None and not loop.is_closed():
                loop.run_until_complete(close())

    def close(self) -> None:
        """Shut the instance down (connections closed) and close the loop. Idempotent; errors
        while shutting down are logged, not raised."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            loop.run_until_complete(self.instance.shutdown())
            loop.run_until_complete(loop.shutdown_asyncgens())
        except BolideError as error:
            _log.warning("closing the Spark client %s: %s", self.instance.client_id, error)
        finally:
            loop.close()

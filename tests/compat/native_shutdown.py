"""Shutting down a real C++ client (``rocketmq==0.4.4``, librocketmq 1.2.3) without tripping the
library's own abort.

librocketmq's client factory refreshes its routes on a timer thread (3 s after it starts, then
every 30 s). Applying a route that changed replaces the topic's ``TopicPublishInfo``, whose
destructor joins a boost thread. The factory's shutdown interrupts that timer thread
(``boost::thread::interrupt``); when the interrupt lands while the thread is inside that
destructor, the join throws ``boost::thread_interrupted`` out of a ``noexcept`` destructor and
the whole process aborts ("terminate called after throwing an instance of
'boost::thread_interrupted'"; core: ``~TopicPublishInfo`` ← ``addTopicInfoToTable`` ←
``updateTopicRouteInfoFromNameServer`` ← ``MQClientFactory::updateTopicRouteInfo``). CI lost a
test worker to it once; cycling pairs of C++ push consumers hit it twice in about 740 cycles
(``python -m bench.cpp_shutdown_stress --unguarded``; docs/benchmarks.md).

A route the factory does not receive is a route it does not apply. So while a C++ client of
this process shuts down, the in-process name servers answer C++ route queries with
SYSTEM_ERROR (librocketmq keeps the route it has, as for any failed refresh); Bolide's own
clients (language PYTHON) are answered as usual. :func:`native_shutdown` marks the window;
:func:`withhold_cpp_routes_while_shutting_down` installs the answer (tests/conftest.py does,
for the whole session). Tests whose name server is a process of its own shut their C++ clients
down after stopping it, for the same reason (test_cpp_controller_failover,
test_sdk5_interop_cpp).

What is left: a route answered just before the window opened and applied after the factory's
interrupt, which needs librocketmq's timer thread to stay descheduled for longer than the
shutdown's own round trips to the broker take.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from bolide.namesrv.handlers import NameServerHandlers
from bolide.protocol.codes import LanguageCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Connection

_lock = threading.Lock()
_shutting_down = 0
"""C++ clients of this process inside their native shutdown right now."""
_withheld = 0
"""C++ route queries answered SYSTEM_ERROR so far (read by bench/cpp_shutdown_stress.py)."""


@contextlib.contextmanager
def native_shutdown() -> Iterator[None]:
    """Mark a C++ client's native shutdown (any thread): C++ route queries are refused inside."""
    global _shutting_down
    with _lock:
        _shutting_down += 1
    try:
        yield
    finally:
        with _lock:
            _shutting_down -= 1


def routes_withheld() -> int:
    """How many C++ route queries this process's name servers refused so far."""
    return _withheld


def withhold_cpp_routes_while_shutting_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every in-process name server refuse C++ route queries during :func:`native_shutdown`."""
    answer_route = NameServerHandlers.get_route_info

    async def get_route_info(
        self: NameServerHandlers, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        if request.language == LanguageCode.CPP and _shutting_down:
            global _withheld
            _withheld += 1
            return request.make_response(
                ResponseCode.SYSTEM_ERROR,
                "route withheld from C++ clients while one of this test process shuts down",
            )
        return await answer_route(self, connection, request)

    monkeypatch.setattr(NameServerHandlers, "get_route_info", get_route_info)

"""ClientPool: shared connects, reconnect back-off on a manual clock, address parsing."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from bolide.base import limits
from bolide.base.clock import ManualClock
from bolide.base.errors import ConnectionClosedError
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool, Connection, Dispatcher, RemotingServer
from bolide.remoting.client_pool import reconnect_delay_ms, split_address
from bolide.testing.waiting import until

pytestmark = pytest.mark.timeout(30)

PING = 3001


async def pong(connection: Connection, request: RemotingCommand) -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, remark="pong")


def ping_dispatcher() -> Dispatcher:
    dispatcher = Dispatcher()
    dispatcher.register(PING, pong, family="ping")
    return dispatcher


@pytest.fixture
def refusing_socket() -> Iterator[socket.socket]:
    """A bound socket that does not listen: connects to its port are refused, and no other
    process can take the port while the test runs."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


def test_reconnect_delay_doubles_up_to_the_cap() -> None:
    initial = limits.RECONNECT_BACKOFF_INITIAL_MS
    assert [reconnect_delay_ms(n) for n in range(4)] == [0, initial, 2 * initial, 4 * initial]
    assert reconnect_delay_ms(1_000) == limits.RECONNECT_BACKOFF_MAX_MS
    delays = [reconnect_delay_ms(n) for n in range(1, 64)]
    assert delays == sorted(delays)
    assert max(delays) == limits.RECONNECT_BACKOFF_MAX_MS


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:10911", ("127.0.0.1", 10911)),
        ("broker-a.local:9876", ("broker-a.local", 9876)),
        ("[::1]:10911", ("::1", 10911)),
    ],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    assert split_address(address) == expected


@pytest.mark.parametrize("address", ["10911", ":10911", "host:", "host:port", "host:70000"])
def test_split_address_rejects_malformed(address: str) -> None:
    with pytest.raises(ValueError, match="address"):
        split_address(address)


async def test_concurrent_callers_share_one_connect() -> None:
    opened: list[Connection] = []
    server = RemotingServer(ping_dispatcher(), on_connection_open=opened.append)
    await server.start()
    pool = ClientPool()
    try:
        responses = await asyncio.gather(
            *(pool.invoke(server.address, RemotingCommand.request(PING)) for _ in range(20))
        )
        assert {r.remark for r in responses} == {"pong"}
        assert len(opened) == 1
        assert list(pool.connections) == [server.address]
    finally:
        await pool.close()
        await server.stop()


async def test_reconnect_backs_off_after_failures_and_resets_on_success(
    refusing_socket: socket.socket,
) -> None:
    clock = ManualClock()
    pool = ClientPool(clock=clock)
    port = refusing_socket.getsockname()[1]
    address = f"127.0.0.1:{port}"
    initial = limits.RECONNECT_BACKOFF_INITIAL_MS
    listener: asyncio.Server | None = None
    try:
        with pytest.raises(ConnectionClosedError) as caught:
            await pool.invoke(address, RemotingCommand.request(PING))
        assert isinstance(caught.value.__cause__, ConnectionRefusedError)
        assert pool.backoff_ms(address) == initial

        # A caller that cannot wait out the back-off fails at once, with the same cause.
        with pytest.raises(ConnectionClosedError) as caught:
            await pool.invoke(address, RemotingCommand.request(PING), timeout_ms=initial // 2)
        assert isinstance(caught.value.__cause__, ConnectionRefusedError)

        # A caller with time to spare waits for the clock, then tries (and fails) again.
        second = asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PING)))
        await until(lambda: clock.sleeper_count == 1)
        assert not second.done()
        clock.advance_ms(initial)
        with pytest.raises(ConnectionClosedError):
            await second
        assert pool.backoff_ms(address) == 2 * initial

        # The server comes up on that very port; after the back-off the connect succeeds.
        refusing_socket.listen()
        listener = await asyncio.get_running_loop().create_server(
            lambda: Connection(ping_dispatcher()), sock=refusing_socket
        )
        third = asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PING)))
        await until(lambda: clock.sleeper_count == 1)
        clock.advance_ms(2 * initial)
        assert (await third).remark == "pong"
        assert pool.backoff_ms(address) == 0
    finally:
        await pool.close()
        if listener is not None:
            listener.close()
            await listener.wait_closed()


async def test_pool_close_while_waiting_out_a_back_off(refusing_socket: socket.socket) -> None:
    clock = ManualClock()
    pool = ClientPool(clock=clock)
    address = f"127.0.0.1:{refusing_socket.getsockname()[1]}"
    with pytest.raises(ConnectionClosedError):
        await pool.invoke(address, RemotingCommand.request(PING))
    waiting = asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PING)))
    await until(lambda: clock.sleeper_count == 1)
    await pool.close()
    with pytest.raises(ConnectionClosedError, match="closed"):
        await waiting


async def test_connection_close_hook_reports_the_address() -> None:
    closed: list[tuple[str, Connection]] = []
    server = RemotingServer(ping_dispatcher())
    await server.start()
    pool = ClientPool(on_connection_close=lambda a, c: closed.append((a, c)))
    try:
        await pool.invoke(server.address, RemotingCommand.request(PING))
        (server_side,) = server.connections
        server_side.close()
        await until(lambda: len(closed) == 1)
        address, connection = closed[0]
        assert address == server.address
        assert isinstance(connection.close_reason, ConnectionClosedError | ConnectionError)
        assert pool.connections == {}
        again = await pool.invoke(server.address, RemotingCommand.request(PING))
        assert again.remark == "pong"
    finally:
        await pool.close()
        await server.stop()

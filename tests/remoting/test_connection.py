"""Connection details: addresses, write backpressure, zero-copy bodies, both event loops."""

from __future__ import annotations

import asyncio

import pytest

from bolide.base import limits
from bolide.base.errors import InvariantViolationError, RequestTimeoutError
from bolide.protocol.codes import ResponseCode
from bolide.protocol.command import FLAG_RESPONSE, RemotingCommand
from bolide.remoting import ClientPool, Connection, ConnectionSettings, Dispatcher, RemotingServer
from bolide.remoting import loop as remoting_loop
from bolide.remoting.connection import format_socket_address
from bolide.testing.waiting import until
from tests.remoting.peers import RawPeer

pytestmark = pytest.mark.timeout(30)

ECHO = 4001
PULL = 4002
KIB = 1024


@pytest.mark.parametrize(
    ("socket_address", "expected"),
    [
        (("127.0.0.1", 10911), "127.0.0.1:10911"),
        (("::ffff:10.0.0.5", 4242, 0, 0), "10.0.0.5:4242"),
        (("::1", 10911, 0, 0), "::1:10911"),
        ("/tmp/socket", "/tmp/socket"),
    ],
)
def test_format_socket_address(socket_address: object, expected: str) -> None:
    assert format_socket_address(socket_address) == expected


def test_connection_settings_reject_inverted_water_marks() -> None:
    with pytest.raises(InvariantViolationError):
        ConnectionSettings(write_buffer_high_water_bytes=KIB, write_buffer_low_water_bytes=KIB)


async def test_writers_wait_while_the_peer_does_not_read() -> None:
    handled: list[int] = []

    async def echo(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        handled.append(request.opaque)
        return request.make_response(ResponseCode.SUCCESS)

    dispatcher = Dispatcher()
    dispatcher.register(ECHO, echo, family="echo")
    settings = ConnectionSettings(
        write_buffer_high_water_bytes=64 * KIB, write_buffer_low_water_bytes=16 * KIB
    )
    server = RemotingServer(dispatcher, settings=settings)
    await server.start()
    peer = await RawPeer.connect(server.port, receive_buffer_bytes=4 * KIB)
    try:
        await until(lambda: len(server.connections) == 1)
        (channel,) = server.connections
        body = bytes(256 * KIB)
        sent = 0
        while not channel.write_paused and sent < 1_000:  # the kernel buffers fill first
            await channel.invoke_oneway(RemotingCommand.request(ECHO, body=body))
            sent += 1
        assert channel.write_paused
        assert channel.write_buffer_bytes > 64 * KIB

        blocked = asyncio.ensure_future(
            channel.invoke_oneway(RemotingCommand.request(ECHO, body=body), timeout_ms=10_000)
        )
        with pytest.raises(RequestTimeoutError):
            await channel.invoke_oneway(RemotingCommand.request(ECHO), timeout_ms=5)
        # While its answers cannot be written, the server does not read the peer's requests.
        await peer.send(RemotingCommand(ECHO, opaque=424_242))
        for _ in range(200):
            await asyncio.sleep(0)
        assert not blocked.done()
        assert handled == []

        for _ in range(sent):  # the peer catches up: the writer resumes
            assert len((await peer.read_frame()).body) == len(body)
        await blocked
        assert not channel.write_paused
        # Then come, in either order, the released oneway and the answer to the peer's request.
        last_two = [await peer.read_command() for _ in range(2)]
        big = [c for c in last_two if not c.flag & FLAG_RESPONSE]
        answers = [c for c in last_two if c.flag & FLAG_RESPONSE]
        assert [len(c.body) for c in big] == [len(body)]
        assert [a.opaque for a in answers] == [424_242]
        assert handled == [424_242]
    finally:
        await peer.close()
        await server.stop()


async def _pull_round_trip() -> bytes:
    segment = bytearray(b"0123456789" * 100)  # stands in for a mapped commit-log segment

    async def pull(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        view = memoryview(segment)
        return request.make_response(
            ResponseCode.SUCCESS, body_parts=(view[0:10], view[500:520], b"tail")
        )

    dispatcher = Dispatcher()
    dispatcher.register(PULL, pull, family="pull")
    server = RemotingServer(dispatcher)
    await server.start()
    pool = ClientPool()
    try:
        response = await pool.invoke(server.address, RemotingCommand.request(PULL))
        return response.body
    finally:
        await pool.close()
        await server.stop()


@pytest.mark.parametrize("use_uvloop", [False, True], ids=["asyncio", "uvloop"])
def test_body_parts_reach_the_peer_back_to_back(use_uvloop: bool) -> None:
    if use_uvloop and not remoting_loop.uvloop_available():
        pytest.skip("uvloop is not installed")
    factory = remoting_loop.new_event_loop if use_uvloop else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        body = runner.run(_pull_round_trip())
    assert body == b"0123456789" + b"0123456789" * 2 + b"tail"


def test_run_uses_uvloop_when_installed() -> None:
    async def loop_type_name() -> str:
        return type(asyncio.get_running_loop()).__module__

    module = remoting_loop.run(loop_type_name())
    assert module.startswith("uvloop") == remoting_loop.uvloop_available()


def test_install_event_loop_policy() -> None:
    previous = asyncio.get_event_loop_policy()
    try:
        installed = remoting_loop.install_event_loop_policy()
        assert installed == remoting_loop.uvloop_available()
        policy_module = type(asyncio.get_event_loop_policy()).__module__
        assert policy_module.startswith("uvloop") == installed
    finally:
        asyncio.set_event_loop_policy(previous)


async def test_opaques_wrap_within_int32_and_skip_ones_in_use() -> None:
    # Drive a connection to the wrap point through its public behaviour: opaques it assigns.
    release = asyncio.Event()

    async def park(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return request.make_response(ResponseCode.SUCCESS)

    dispatcher = Dispatcher()
    dispatcher.register(ECHO, park, family="park")
    server = RemotingServer(dispatcher)
    await server.start()
    pool = ClientPool()
    try:
        connection = await pool.connect(server.address)
        first = RemotingCommand.request(ECHO)
        parked = asyncio.ensure_future(connection.invoke(first))
        await until(lambda: connection.pending_requests == 1)
        assert first.opaque == 0
        connection._last_opaque = limits.OPAQUE_SPACE_COUNT - 2  # fast-forward the counter
        opaques = []
        for _ in range(3):
            oneway = RemotingCommand.request(ECHO)
            await connection.invoke_oneway(oneway)
            opaques.append(oneway.opaque)
        assert opaques == [limits.OPAQUE_SPACE_COUNT - 1, 1, 2]  # 0 is still waiting for its answer
        release.set()
        assert (await parked).code == ResponseCode.SUCCESS
    finally:
        release.set()
        await pool.close()
        await server.stop()


async def test_close_flushes_frames_queued_in_the_same_loop_turn() -> None:
    server = RemotingServer(Dispatcher())
    await server.start()
    peer = await RawPeer.connect(server.port)
    try:
        await until(lambda: len(server.connections) == 1)
        (channel,) = server.connections
        for index in range(3):  # gathered for one write at the end of the loop turn...
            await channel.invoke_oneway(RemotingCommand.request(ECHO, {"index": str(index)}))
        channel.close()  # ...which close() must not lose
        received = [(await peer.read_command()).ext_fields["index"] for _ in range(3)]
        assert received == ["0", "1", "2"]
        assert await peer.read_until_eof() == 0
    finally:
        await peer.close()
        await server.stop()

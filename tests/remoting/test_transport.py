"""Server and client pool over real sockets on 127.0.0.1, port 0."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from bolide.base.errors import (
    BackpressureError,
    ConnectionClosedError,
    FrameTooLargeError,
    ProtocolError,
    RequestTimeoutError,
)
from bolide.protocol.codes import LanguageCode, RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand, encode_command
from bolide.remoting import (
    ClientPool,
    Connection,
    ConnectionSettings,
    Dispatcher,
    RemotingServer,
)
from bolide.testing.waiting import until
from tests.remoting.peers import RawPeer

pytestmark = pytest.mark.timeout(30)

ECHO = 2001
PARK = 2002
RECORD = 2003
CLOSE_ME = 2004


class Broker:
    """A tiny server-side application: echo, park until released, record oneways."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.parked = 0
        self.recorded: list[RemotingCommand] = []
        self.opened: list[Connection] = []
        self.closed: list[Connection] = []
        self.dispatcher = Dispatcher()
        self.dispatcher.register(ECHO, self.echo, family="echo")
        self.dispatcher.register(PARK, self.park, family="park")
        self.dispatcher.register(RECORD, self.record, family="echo")
        self.dispatcher.register(CLOSE_ME, self.close_me, family="echo")
        self.server = RemotingServer(
            self.dispatcher,
            on_connection_open=self.opened.append,
            on_connection_close=self.closed.append,
        )

    async def echo(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        index = int(request.ext_fields.get("index", "0"))
        for _ in range(index % 4):  # finish out of arrival order
            await asyncio.sleep(0)
        return request.make_response(
            ResponseCode.SUCCESS, ext_fields={"index": str(index)}, body=request.body
        )

    async def park(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        self.parked += 1
        try:
            await self.release.wait()
        finally:
            self.parked -= 1
        return request.make_response(ResponseCode.SUCCESS, remark="released")

    async def record(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        self.recorded.append(request)
        return request.make_response(ResponseCode.SUCCESS)  # dropped when oneway

    async def close_me(self, connection: Connection, request: RemotingCommand) -> None:
        connection.close(abort=True)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    broker = Broker()
    await broker.server.start()
    yield broker
    broker.release.set()
    await broker.server.stop()


@pytest.fixture
async def pool() -> AsyncIterator[ClientPool]:
    pool = ClientPool()
    yield pool
    await pool.close()


def echo_request(index: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(ECHO, {"index": str(index)}, body)


async def test_one_thousand_concurrent_requests_are_matched_by_opaque(
    broker: Broker, pool: ClientPool
) -> None:
    requests = [echo_request(i, f"body-{i}".encode()) for i in range(1_000)]
    responses = await asyncio.gather(
        *(pool.invoke(broker.server.address, r, timeout_ms=10_000) for r in requests)
    )
    assert len({r.opaque for r in requests}) == 1_000
    for index, (sent, received) in enumerate(zip(requests, responses, strict=True)):
        assert received.opaque == sent.opaque
        assert received.ext_fields["index"] == str(index)
        assert received.body == f"body-{index}".encode()
        assert received.flag & FLAG_RESPONSE
    assert len(broker.opened) == 1  # every caller shared one connection
    assert pool.connections[broker.server.address].pending_requests == 0


async def test_oneway_request_is_delivered_and_not_answered(
    broker: Broker, pool: ClientPool
) -> None:
    address = broker.server.address
    request = RemotingCommand.request(RECORD, {"consumerGroup": "G"})
    await pool.invoke_oneway(address, request)
    await until(lambda: len(broker.recorded) == 1)
    assert broker.recorded[0].flag & FLAG_ONEWAY
    assert broker.recorded[0].ext_fields == {"consumerGroup": "G"}
    # The connection is still in order: an ordinary call right after works.
    assert (await pool.invoke(address, echo_request(5))).ext_fields["index"] == "5"


async def test_server_sends_requests_to_a_connected_client(broker: Broker) -> None:
    notified: list[RemotingCommand] = []

    async def on_notify(connection: Connection, request: RemotingCommand) -> None:
        notified.append(request)

    async def on_running_info(connection: Connection, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, body=b'{"properties":{}}')

    client_dispatcher = Dispatcher()
    client_dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify, family="c")
    client_dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, on_running_info, family="c")
    pool = ClientPool(client_dispatcher)
    try:
        await pool.invoke(broker.server.address, echo_request(1))  # like a heartbeat
        (channel,) = broker.server.connections
        notify = RemotingCommand.request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}
        )
        await channel.invoke_oneway(notify, timeout_ms=10)
        info = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"clientId": "c"})
        response = await channel.invoke(info, timeout_ms=5_000)
        assert (response.code, response.body) == (ResponseCode.SUCCESS, b'{"properties":{}}')
        await until(lambda: len(notified) == 1)
        assert notified[0].ext_fields == {"consumerGroup": "G"}
        assert notified[0].flag & FLAG_ONEWAY
        unknown = await channel.invoke(RemotingCommand.request(4242), timeout_ms=5_000)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        await pool.close()


async def test_server_matches_a_cpp_style_answer_with_flag_one(broker: Broker) -> None:
    peer = await RawPeer.connect(broker.server.port)
    try:
        cpp_request = RemotingCommand(ECHO, opaque=9, language=LanguageCode.CPP, version=63)
        await peer.send(cpp_request)
        assert (await peer.read_command()).opaque == 9
        (channel,) = broker.server.connections
        assert channel.remote_address.startswith("127.0.0.1:")
        asking = asyncio.ensure_future(
            channel.invoke(RemotingCommand.request(307), timeout_ms=5_000)
        )
        incoming = await peer.read_command()
        assert not incoming.flag & FLAG_RESPONSE
        await peer.send(RemotingCommand(0, opaque=incoming.opaque, flag=1, body=b"running"))
        assert (await asking).body == b"running"
    finally:
        await peer.close()


async def test_timeout_frees_the_opaque_and_a_late_answer_is_dropped(
    broker: Broker, pool: ClientPool
) -> None:
    address = broker.server.address
    with pytest.raises(RequestTimeoutError):
        await pool.invoke(address, RemotingCommand.request(PARK), timeout_ms=20)
    connection = pool.connections[address]
    assert connection.pending_requests == 0
    broker.release.set()  # the parked handler now answers; nobody waits for it
    await until(lambda: broker.parked == 0)
    response = await pool.invoke(address, echo_request(3))
    assert response.ext_fields["index"] == "3"
    assert not connection.is_closed


@pytest.mark.parametrize(
    ("garbage", "error_type"),
    [
        (b"\x7f\xff\xff\xff\x00\x00\x00\x10", FrameTooLargeError),  # 2 GiB frame announced
        (b"\x00\x00\x00\x02\x00\x00", ProtocolError),  # total length below 4
        (b"\x00\x00\x00\x10\x05\x00\x00\x04" + bytes(12), ProtocolError),  # serialize type 5
        (b"\x00\x00\x00\x08\x00\x00\x00\x04{}}}", ProtocolError),  # header is not JSON
    ],
)
async def test_garbage_closes_that_connection_and_the_server_keeps_serving(
    broker: Broker, pool: ClientPool, garbage: bytes, error_type: type[Exception]
) -> None:
    address = broker.server.address
    assert (await pool.invoke(address, echo_request(1))).code == ResponseCode.SUCCESS
    bad = await RawPeer.connect(broker.server.port)
    try:
        await bad.send_bytes(garbage)
        await bad.read_until_eof()  # the server hung up on it
    finally:
        await bad.close()
    await until(lambda: len(broker.closed) == 1)
    assert isinstance(broker.closed[0].close_reason, error_type)
    assert (await pool.invoke(address, echo_request(2))).code == ResponseCode.SUCCESS
    assert len(broker.server.connections) == 1


async def test_peer_disconnecting_mid_frame_is_forgotten(broker: Broker, pool: ClientPool) -> None:
    address = broker.server.address
    await pool.invoke(address, echo_request(1))
    frame = encode_command(echo_request(2, b"x" * 1_000))
    peer = await RawPeer.connect(broker.server.port)
    await until(lambda: len(broker.server.connections) == 2)
    await peer.send_bytes(frame[: len(frame) // 2])
    await peer.close()
    await until(lambda: len(broker.closed) == 1)
    assert isinstance(broker.closed[0].close_reason, ConnectionError | ConnectionClosedError)
    assert len(broker.server.connections) == 1
    assert (await pool.invoke(address, echo_request(3))).code == ResponseCode.SUCCESS


async def test_pending_calls_fail_with_the_cause_when_the_connection_dies(
    broker: Broker,
) -> None:
    address = broker.server.address
    closed: list[tuple[str, Connection]] = []
    pool = ClientPool(on_connection_close=lambda a, c: closed.append((a, c)))
    try:
        parked = [
            asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PARK)))
            for _ in range(5)
        ]
        await until(lambda: broker.parked == 5)
        await pool.invoke_oneway(address, RemotingCommand.request(CLOSE_ME))
        for call in parked:
            with pytest.raises(ConnectionClosedError) as caught:
                await call
            assert caught.value.__cause__ is closed[0][1].close_reason
            assert caught.value.__cause__ is not None
        assert [a for a, _ in closed] == [address]
        # The next call reconnects at once: a closed connection is not a connect failure.
        assert pool.backoff_ms(address) == 0
        assert (await pool.invoke(address, echo_request(4))).code == ResponseCode.SUCCESS
        assert len(broker.opened) == 2
    finally:
        await pool.close()


async def test_pending_call_fails_with_the_protocol_error_as_cause() -> None:
    finished = asyncio.Event()

    async def answer_with_garbage(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.read(1)
        writer.write(b"\x00\x00\x00\x01")  # total length 1: not a frame
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            await reader.read()  # until the client hangs up
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        finished.set()

    server = await asyncio.start_server(answer_with_garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ClientPool()
    try:
        with pytest.raises(ConnectionClosedError) as caught:
            await pool.invoke(f"127.0.0.1:{port}", echo_request(1))
        assert isinstance(caught.value.__cause__, ProtocolError)
    finally:
        await pool.close()
        server.close()
        await server.wait_closed()
    await finished.wait()


async def test_opaque_table_is_bounded(broker: Broker) -> None:
    pool = ClientPool(settings=ConnectionSettings(opaque_table_max_entries=2))
    address = broker.server.address
    try:
        parked = [
            asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PARK)))
            for _ in range(2)
        ]
        await until(lambda: broker.parked == 2)
        with pytest.raises(BackpressureError):
            await pool.invoke(address, echo_request(1))
        broker.release.set()
        assert [r.remark for r in await asyncio.gather(*parked)] == ["released", "released"]
        assert (await pool.invoke(address, echo_request(2))).code == ResponseCode.SUCCESS
    finally:
        await pool.close()


async def test_server_stop_fails_its_own_pending_invokes(broker: Broker) -> None:
    release_client = asyncio.Event()

    async def slow_client_handler(
        connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        await release_client.wait()
        return request.make_response(ResponseCode.SUCCESS)

    client_dispatcher = Dispatcher()
    client_dispatcher.register(307, slow_client_handler, family="c")
    pool = ClientPool(client_dispatcher)
    try:
        await pool.invoke(broker.server.address, echo_request(1))
        (channel,) = broker.server.connections
        asking = asyncio.ensure_future(channel.invoke(RemotingCommand.request(307)))
        await until(lambda: channel.pending_requests == 1)
        await broker.server.stop()
        with pytest.raises(ConnectionClosedError):
            await asking
        assert broker.server.connections == frozenset()
        assert broker.closed == [channel]
    finally:
        release_client.set()
        await pool.close()


async def test_pool_close_fails_pending_calls_and_refuses_new_ones(broker: Broker) -> None:
    pool = ClientPool()
    address = broker.server.address
    parked = asyncio.ensure_future(pool.invoke(address, RemotingCommand.request(PARK)))
    await until(lambda: broker.parked == 1)
    await pool.close()
    with pytest.raises(ConnectionClosedError):
        await parked
    with pytest.raises(ConnectionClosedError):
        await pool.invoke(address, echo_request(1))

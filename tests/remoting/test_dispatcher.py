"""Dispatcher rules, observed on the wire: a raw peer sends exact frames to a real server."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator

import pytest

from bolide.base.errors import BolideError, InvariantViolationError
from bolide.protocol.codes import LanguageCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand, encode_command
from bolide.protocol.frame import SerializeType
from bolide.remoting import Connection, Dispatcher, RemotingServer, RequestError
from bolide.testing.waiting import until
from tests.remoting.peers import RawPeer

pytestmark = pytest.mark.timeout(30)

ECHO = 1001
SLOW = 1002
FAST = 1003
BROKEN = 1004
REFUSE = 1005
SILENT = 1006
FAILING_OPERATION = 1007
CANCELLED = 1008
SHARED = 1009


class Handlers:
    """Handlers whose progress the tests control."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.seen: list[int] = []
        self.shared: asyncio.Future[None] | None = None

    async def wait_shared(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        # Every request awaits ONE future, as SYNC-flush puts await one group commit.
        if self.shared is None:
            self.shared = asyncio.get_running_loop().create_future()
        await self.shared
        return request.make_response(ResponseCode.SUCCESS)

    async def echo(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        self.seen.append(request.opaque)
        return request.make_response(ResponseCode.SUCCESS, body=request.body)

    async def slow(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        await self.release.wait()
        return request.make_response(ResponseCode.SUCCESS, remark="slow")

    async def broken(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("disk on fire")

    async def failing_operation(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        raise BolideError("store is read-only")

    async def refuse(self, connection: Connection, request: RemotingCommand) -> RemotingCommand:
        raise RequestError(ResponseCode.TOPIC_NOT_EXIST, "topic T not exist")

    async def silent(self, connection: Connection, request: RemotingCommand) -> None:
        self.seen.append(request.opaque)


def build_dispatcher(handlers: Handlers, *, eager: bool = True) -> Dispatcher:
    dispatcher = Dispatcher(family_limits={"slow": 2}, eager=eager)
    dispatcher.register(ECHO, handlers.echo, family="fast")
    dispatcher.register(FAST, handlers.echo, family="fast")
    dispatcher.register(SLOW, handlers.slow, family="slow")
    dispatcher.register(BROKEN, handlers.broken, family="fast")
    dispatcher.register(FAILING_OPERATION, handlers.failing_operation, family="fast")
    dispatcher.register(REFUSE, handlers.refuse, family="fast")
    dispatcher.register(SILENT, handlers.silent, family="fast")
    dispatcher.register(SHARED, handlers.wait_shared, family="fast")
    return dispatcher


@pytest.fixture(params=[True, False], ids=["eager", "task-per-request"])
def eager(request: pytest.FixtureRequest) -> bool:
    value: bool = request.param
    return value


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
async def server(handlers: Handlers, eager: bool) -> AsyncIterator[RemotingServer]:
    server = RemotingServer(build_dispatcher(handlers, eager=eager))
    await server.start()
    yield server
    handlers.release.set()
    await server.stop()


@pytest.fixture
async def peer(server: RemotingServer) -> AsyncIterator[RawPeer]:
    peer = await RawPeer.connect(server.port)
    yield peer
    await peer.close()


def request(code: int, opaque: int, *, flag: int = 0, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code, opaque=opaque, flag=flag, body=body)


async def test_unknown_code_answers_not_supported_like_java(peer: RawPeer) -> None:
    await peer.send(request(999, opaque=41))
    response = await peer.read_command()
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 999 not supported"
    assert response.opaque == 41
    assert response.flag & FLAG_RESPONSE


async def test_family_bound_answers_system_busy_without_blocking_other_families(
    server: RemotingServer, peer: RawPeer, handlers: Handlers
) -> None:
    for opaque in (1, 2, 3):
        await peer.send(request(SLOW, opaque))
    busy = await peer.read_command()
    assert (busy.opaque, busy.code) == (3, ResponseCode.SYSTEM_BUSY)
    assert server.dispatcher.in_flight("slow") == 2
    await peer.send(request(FAST, 4, body=b"other family"))
    fast = await peer.read_command()
    assert (fast.opaque, fast.code, fast.body) == (4, ResponseCode.SUCCESS, b"other family")
    handlers.release.set()
    released = {(r.opaque, r.code) for r in [await peer.read_command() for _ in range(2)]}
    assert released == {(1, ResponseCode.SUCCESS), (2, ResponseCode.SUCCESS)}
    assert server.dispatcher.in_flight("slow") == 0
    handlers.release.clear()
    await peer.send(request(SLOW, 5))  # the bound is free again
    await until(lambda: server.dispatcher.in_flight("slow") == 1)


@pytest.mark.parametrize(
    ("code", "expected_code", "expected_remark"),
    [
        (BROKEN, ResponseCode.SYSTEM_ERROR, "disk on fire"),
        (FAILING_OPERATION, ResponseCode.SYSTEM_ERROR, "store is read-only"),
        (REFUSE, ResponseCode.TOPIC_NOT_EXIST, "topic T not exist"),
    ],
)
async def test_handler_errors_become_responses(
    peer: RawPeer, code: int, expected_code: int, expected_remark: str
) -> None:
    await peer.send(request(code, opaque=7))
    response = await peer.read_command()
    assert (response.opaque, response.code, response.remark) == (7, expected_code, expected_remark)


async def test_oneway_requests_are_never_answered(peer: RawPeer, handlers: Handlers) -> None:
    # Whatever happens to a oneway request (answered, failed, unknown code), nothing comes
    # back: the first frame the peer reads answers the ordinary request sent after them.
    for opaque, code in ((10, ECHO), (11, BROKEN), (12, 999), (13, REFUSE)):
        await peer.send(request(code, opaque, flag=FLAG_ONEWAY))
    await peer.send(request(ECHO, 14))
    response = await peer.read_command()
    assert response.opaque == 14
    assert handlers.seen == [10, 14]


async def test_handler_returning_none_sends_nothing(peer: RawPeer, handlers: Handlers) -> None:
    await peer.send(request(SILENT, 20))
    await peer.send(request(ECHO, 21))
    assert (await peer.read_command()).opaque == 21
    assert handlers.seen == [20, 21]


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize("code", [ECHO, 999, BROKEN, REFUSE])
async def test_response_uses_the_serialize_type_of_the_request(
    peer: RawPeer, serialize_type: SerializeType, code: int
) -> None:
    command = request(code, 30, body=b"payload")
    command.serialize_type = serialize_type
    await peer.send(command)
    frame = await peer.read_frame()
    assert frame.serialize_type == serialize_type


async def test_parked_request_does_not_hold_back_later_ones(
    peer: RawPeer, handlers: Handlers, server: RemotingServer
) -> None:
    await peer.send(request(SLOW, 40))
    await peer.send(request(ECHO, 41))
    assert (await peer.read_command()).opaque == 41
    assert server.dispatcher.suspended_handlers == 1
    handlers.release.set()
    assert (await peer.read_command()).opaque == 40
    await until(lambda: server.dispatcher.suspended_handlers == 0)


async def test_handlers_awaiting_one_shared_future_all_complete(
    peer: RawPeer, handlers: Handlers
) -> None:
    # All frames in one write: every first step runs before any task has taken the future.
    await peer.send_bytes(b"".join(encode_command(request(SHARED, n)) for n in range(60, 68)))
    await until(lambda: handlers.shared is not None)
    shared = handlers.shared
    assert shared is not None
    await asyncio.sleep(0)
    shared.set_result(None)
    answers = [await peer.read_command() for _ in range(8)]
    assert {(a.opaque, a.code) for a in answers} == {
        (n, ResponseCode.SUCCESS) for n in range(60, 68)
    }


async def test_cancel_handlers_cancels_parked_ones_without_answering(
    peer: RawPeer, server: RemotingServer
) -> None:
    await peer.send(request(SLOW, 50))
    await until(lambda: server.dispatcher.in_flight("slow") == 1)
    await server.dispatcher.cancel_handlers(timeout_ms=1)
    assert server.dispatcher.in_flight("slow") == 0
    assert server.dispatcher.suspended_handlers == 0
    await peer.send(request(ECHO, 51))
    assert (await peer.read_command()).opaque == 51


async def test_handler_hit_by_cancellation_is_not_answered(server: RemotingServer) -> None:
    async def cancelled(connection: Connection, command: RemotingCommand) -> RemotingCommand:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
        return command.make_response(ResponseCode.SUCCESS)

    server.dispatcher.register(CANCELLED, cancelled, family="fast")
    peer = await RawPeer.connect(server.port)
    try:
        await peer.send(request(CANCELLED, 70))
        await peer.send(request(ECHO, 71))
        assert (await peer.read_command()).opaque == 71
        assert server.dispatcher.in_flight("fast") == 0
    finally:
        await peer.close()


async def test_records_language_and_version_of_the_last_request(server: RemotingServer) -> None:
    peer = await RawPeer.connect(server.port)
    try:
        command = request(ECHO, 60)
        command.language = LanguageCode.CPP
        command.version = 63
        await peer.send(command)
        await peer.read_command()
        (channel,) = server.connections
        assert (channel.language, channel.version) == (LanguageCode.CPP, 63)
        assert channel.remote_address == f"127.0.0.1:{peer.writer.get_extra_info('sockname')[1]}"
    finally:
        await peer.close()


def test_registering_a_code_twice_is_a_programmer_error(handlers: Handlers) -> None:
    dispatcher = Dispatcher()
    dispatcher.register(ECHO, handlers.echo, family="fast")
    with pytest.raises(InvariantViolationError):
        dispatcher.register(ECHO, handlers.echo, family="fast")


_request_tag: contextvars.ContextVar[str] = contextvars.ContextVar("request_tag", default="unset")


async def test_context_variables_stay_with_their_handler() -> None:
    release = asyncio.Event()
    observed: list[str] = []

    async def tagging(connection: Connection, command: RemotingCommand) -> RemotingCommand:
        _request_tag.set(command.ext_fields["tag"])
        await release.wait()
        observed.append(_request_tag.get())
        return command.make_response(ResponseCode.SUCCESS)

    async def reading(connection: Connection, command: RemotingCommand) -> RemotingCommand:
        return command.make_response(ResponseCode.SUCCESS, remark=_request_tag.get())

    dispatcher = Dispatcher()
    dispatcher.register(SLOW, tagging, family="a")
    dispatcher.register(ECHO, reading, family="a")
    server = RemotingServer(dispatcher)
    await server.start()
    peer = await RawPeer.connect(server.port)
    try:
        await peer.send(RemotingCommand(SLOW, opaque=1, ext_fields={"tag": "first"}))
        await peer.send(RemotingCommand(SLOW, opaque=2, ext_fields={"tag": "second"}))
        await peer.send(request(ECHO, 3))
        assert (await peer.read_command()).remark == "unset"  # no leak into later requests
        release.set()
        await peer.read_command()
        await peer.read_command()
        assert sorted(observed) == ["first", "second"]
    finally:
        await peer.close()
        await server.stop()


FAST_FORM = 1010


async def test_a_fast_form_answers_at_once_or_hands_over_to_the_handler() -> None:
    handlers = Handlers()
    dispatcher = Dispatcher(family_limits={"slow": 1})
    dispatcher.register(FAST_FORM, handlers.slow, family="slow")
    asked: list[int] = []

    def fast(connection: Connection, command: RemotingCommand) -> RemotingCommand | None:
        asked.append(command.opaque)
        if command.body == b"boom":
            raise ValueError("fast form broke")
        if command.body == b"fast":
            return command.make_response(ResponseCode.SUCCESS, remark="fast")
        return None  # the ordinary (slow) handler takes it

    dispatcher.register_fast(FAST_FORM, fast)
    server = RemotingServer(dispatcher)
    await server.start()
    peer = await RawPeer.connect(server.port)
    try:
        await peer.send(request(FAST_FORM, 1, body=b"fast"))
        assert (await peer.read_command()).remark == "fast"
        await peer.send(request(FAST_FORM, 2, body=b"boom"))
        broke = await peer.read_command()
        assert (broke.code, broke.remark, broke.opaque) == (
            ResponseCode.SYSTEM_ERROR,
            "fast form broke",
            2,
        )
        await peer.send(request(FAST_FORM, 3, body=b"general"))  # parks in the slow handler
        await until(lambda: dispatcher.in_flight("slow") == 1)
        await peer.send(request(FAST_FORM, 4, body=b"fast"))  # the family is full: busy
        busy = await peer.read_command()
        assert (busy.code, busy.opaque) == (ResponseCode.SYSTEM_BUSY, 4)
        dispatcher.fast_handlers_enabled = False
        handlers.release.set()
        assert (await peer.read_command()).remark == "slow"
        await peer.send(request(FAST_FORM, 5, body=b"fast"))  # fast forms off: the handler
        assert (await peer.read_command()).remark == "slow"
        assert asked == [1, 2, 3]
        assert dispatcher.fast_answer_count == 1
    finally:
        await peer.close()
        await server.stop()


def test_a_fast_form_needs_a_registered_handler() -> None:
    dispatcher = Dispatcher()
    with pytest.raises(InvariantViolationError):
        dispatcher.register_fast(FAST_FORM, lambda connection, command: None)

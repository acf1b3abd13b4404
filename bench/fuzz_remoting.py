"""Fuzz the remoting listeners: the name server, the broker and its VIP channel (issue 30).

Structure-aware: the valid requests that Bolide's own producer, consumer and admin client send
(recorded from a short workload against the server under test) are replayed with their header
fields dropped, added or replaced by edge values, their code replaced by any request code of
the protocol (so every served code gets headers it may not expect), their body mutated, their
header re-encoded in the ROCKETMQ binary form; plus byte-level mutations of whole frames, raw
garbage, pipelined bursts and slow or partial writes. The liveness check is a valid
GET_BROKER_RUNTIME_INFO to the broker and GET_BROKER_CLUSTER_INFO to the name server.

    .venv/bin/python bench/fuzz_remoting.py [--seconds 60] [--seed 1] [--requests N]
"""

from __future__ import annotations

import random
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, replace

from bench.fuzz_support import Fuzzer, Mutator, ServerUnderTest, main, remoting_round, run_bounded
from bolide.client.admin import AdminClient
from bolide.client.message import Message
from bolide.client.producer.producer import Producer
from bolide.protocol.bodies import SubscriptionGroupConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand
from bolide.protocol.frame import SerializeType
from bolide.remoting import ClientPool

__all__ = ["FUZZER", "attack", "liveness", "prepare"]

CONCURRENT_EXCHANGES = 256
"""Connections the fuzzer keeps busy at once."""
ROUND_EXCHANGES = 4_096
"""Exchanges between two liveness checks: a round waits for its slowest exchange (an
unanswered one waits READ_TIMEOUT_S), so short rounds leave the server idle."""
TOPIC = "FuzzRemoting"
CODES = tuple(int(code) for code in RequestCode)


@dataclass(frozen=True)
class Recorded:
    listener: str  # "namesrv" or "broker"
    command: RemotingCommand


_corpus: list[Recorded] = []
_field_names: set[str] = set()


async def prepare(server: ServerUnderTest) -> None:
    """Record what a producer and the admin client send (the corpus of valid requests)."""
    _corpus.clear()
    by_address = {server.listeners["namesrv"]: "namesrv", server.listeners["broker"]: "broker"}
    original = ClientPool.invoke

    def recording(
        self: ClientPool, address: str, request: RemotingCommand, timeout_ms: int = 3_000
    ) -> object:
        listener = by_address.get(address)
        if listener is not None:
            _corpus.append(
                Recorded(listener, replace(request, ext_fields=dict(request.ext_fields)))
            )
        return original(self, address, request, timeout_ms)

    ClientPool.invoke = recording  # type: ignore[assignment,method-assign]
    try:
        await _workload(server.listeners["namesrv"])
    finally:
        ClientPool.invoke = original  # type: ignore[method-assign]
    for recorded in _corpus:
        _field_names.update(recorded.command.ext_fields)


async def _workload(namesrv: str) -> None:
    async with AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, queue_count=4)
        await admin.list_brokers()
        await admin.topic_status(TOPIC)
        await admin.create_group(SubscriptionGroupConfig("FuzzGroup"))
        await admin.list_groups()
        await admin.group_progress("FuzzGroup")
        await admin.query_by_key(TOPIC, "k1")
    producer = Producer("FuzzProducers", namesrv)
    await producer.start()
    try:
        await producer.send(Message(TOPIC, b"hello", tags="T", keys="k1"))
        await producer.send_batch([Message(TOPIC, b"a"), Message(TOPIC, b"b")])
    finally:
        await producer.shutdown()


def _mutated_command(mutator: Mutator) -> tuple[str, RemotingCommand]:
    rng = mutator.rng
    recorded = rng.choice(_corpus)
    fields = dict(recorded.command.ext_fields)
    for key in list(fields):
        roll = rng.random()
        if roll < 0.1:
            del fields[key]
        elif roll < 0.4:
            fields[key] = mutator.text(fields[key])
    if _field_names and rng.random() < 0.3:
        fields[rng.choice(sorted(_field_names))] = mutator.text("0")
    body = recorded.command.body
    roll = rng.random()
    if roll < 0.2 and body:
        body = mutator.bytes(body)
    elif roll < 0.3:
        body = mutator.garbage(2048)
    command = RemotingCommand(
        code=rng.choice(CODES) if rng.random() < 0.3 else recorded.command.code,
        opaque=rng.randrange(2**31),
        flag=FLAG_ONEWAY if rng.random() < 0.05 else 0,
        remark=mutator.text("") if rng.random() < 0.1 else None,
        ext_fields=fields,
        body=body,
        serialize_type=SerializeType.ROCKETMQ if rng.random() < 0.2 else SerializeType.JSON,
    )
    return recorded.listener, command


def _address(server: ServerUnderTest, listener: str, rng: random.Random) -> tuple[str, int]:
    host, port = server.address(listener)
    if listener == "broker" and rng.random() < 0.2:
        return host, port - 2  # the VIP channel
    return host, port


async def attack(server: ServerUnderTest, rng: random.Random, budget: int) -> int:
    mutator = Mutator(rng)

    def one() -> Awaitable[int]:
        return remoting_round(
            rng,
            mutator,
            lambda: _mutated_command(mutator),
            lambda listener: _address(server, listener, rng),
            lambda: rng.choice(("namesrv", "broker")),
            streams=True,
        )

    return await run_bounded(budget, CONCURRENT_EXCHANGES, one)


LIVENESS_TOPIC = "FuzzLivenessProbe"
"""The topic the liveness check stores to: never in the corpus, so no fuzzed request names it
(a DELETE_TOPIC of the fuzz topic still queued on the server would race the check)."""


def _recorded(*codes: RequestCode) -> RemotingCommand:
    """The first broker request of the corpus with one of ``codes``, a fresh copy naming
    LIVENESS_TOPIC where the original named the fuzz topic."""
    for recorded in _corpus:
        if recorded.command.code in codes and recorded.listener == "broker":
            command = recorded.command
            fields = {
                key: LIVENESS_TOPIC if value == TOPIC else value
                for key, value in command.ext_fields.items()
            }
            return replace(command, ext_fields=fields)
    raise LookupError(f"the corpus has no request with code {codes}")


async def liveness(server: ServerUnderTest) -> bool:
    """The broker and the name server answer, and the broker still stores a message: the
    recorded UPDATE_AND_CREATE_TOPIC and SEND, for LIVENESS_TOPIC and sent straight to the
    broker, are both answered SUCCESS (a store that refuses writes answers everything else
    as usual)."""
    pool = ClientPool()
    broker_address = server.listeners["broker"]
    try:
        broker = await pool.invoke(
            broker_address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        namesrv = await pool.invoke(
            server.listeners["namesrv"],
            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO),
        )
        create = await pool.invoke(broker_address, _recorded(RequestCode.UPDATE_AND_CREATE_TOPIC))
        send = await pool.invoke(
            broker_address, _recorded(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
        )
    except Exception:  # any failure to answer means "not serving"; the report says so
        return False
    finally:
        await pool.close()
    codes = {broker.code, namesrv.code, create.code, send.code}
    return codes == {ResponseCode.SUCCESS}


FUZZER = Fuzzer("remoting", attack, liveness, prepare, round_exchanges=ROUND_EXCHANGES)
"""What ``python bench/fuzz_remoting.py`` and tests/fuzz/ run."""

if __name__ == "__main__":
    sys.exit(main(FUZZER))

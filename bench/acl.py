"""What the ACL costs per request: the broker's check and the client's signature.

Part 1, single thread, no I/O (microseconds per request, best of 3 rounds):

* ``check SEND_MESSAGE_V2 1 KiB``: the broker's check of a signed send as the Java producer
  shapes it (one-letter extFields, 1 KiB body): account lookup, HMAC-SHA1 over the sorted
  values and the body, constant-time compare, then the topic's PUB permission;
* ``check PULL_MESSAGE``: a signed pull (topic SUB + the group's retry topic SUB);
* ``check HEART_BEAT``: a signed heartbeat of one consumer group with two subscriptions
  (its JSON body parsed for the groups and topics it names);
* ``check refused (bad signature)``: the same send with a forged signature;
* ``sign SEND_MESSAGE_V2 1 KiB``: what the client adds to each send.

Part 2, over real sockets in one process: pipelined SEND_MESSAGE_V2 (1 KiB, ``--window`` in
flight) to an in-process name server and broker, with aclEnable=false and then true (the
client signing every request). Reported: sends per second and the process's CPU time per
send (client and broker together; the difference between the two rows is signing plus
checking).

    .venv/bin/python bench/acl.py [--seconds 2] [--messages 20000] [--window 64]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bolide.acl import AclValidator
from bolide.acl.rules import load_yaml_document, parse_rules
from bolide.base.errors import BolideError
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData, TopicConfig
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import SendMessageRequestHeader
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import encode_properties
from bolide.remoting import ClientPool
from bolide.remoting import loop as remoting_loop
from bolide.testing.cluster import Cluster

TOPIC = "BenchAcl"
GROUP = "bench-acl-consumers"
ACCOUNTS = f"""
accounts:
  - accessKey: benchUser1
    secretKey: bench-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [{TOPIC}=PUB|SUB, other=DENY]
"""
PEER = "127.0.0.1:40000"
BODY = b"x" * 1024


def _send_request(body: bytes = BODY) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="bench-acl-producers",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=1,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=0,
        properties=encode_properties(
            {PropertyKey.UNIQ_KEY: "7F0000010A8C18B4AAC27A3D1E2F0000", PropertyKey.WAIT: "true"}
        ),
        reconsume_times=0,
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body)


def _signed(request: RemotingCommand) -> RemotingCommand:
    sign_request(request, "benchUser1", "bench-secret")
    return request


def _micro_us(operation: Callable[[], None], seconds: float) -> float:
    """Best of three rounds of ``seconds`` / 3 of this thread's CPU time (other processes on
    the machine then disturb it far less than wall time): CPU microseconds per call."""
    best = float("inf")
    for _ in range(3):
        calls = 0
        start = time.thread_time()
        deadline = start + seconds / 3
        while time.thread_time() < deadline:
            for _ in range(100):
                operation()
            calls += 100
        best = min(best, (time.thread_time() - start) / calls * 1e6)
    return best


def micro(seconds: float) -> None:
    validator = AclValidator(parse_rules(load_yaml_document(ACCOUNTS, "bench"), "bench"))
    send = _signed(_send_request())
    pull_fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}
    pull = _signed(RemotingCommand.request(RequestCode.PULL_MESSAGE, pull_fields))
    consumer = ConsumerData(GROUP, subscription_data_set=(
        SubscriptionData.from_expression(TOPIC, "*", 0),
        SubscriptionData.from_expression("%RETRY%" + GROUP, "*", 0)))  # fmt: skip
    heartbeat_body = HeartbeatData("bench@1", (), (consumer,)).to_json()
    heartbeat = _signed(RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat_body))
    forged = _signed(_send_request())
    forged.ext_fields["Signature"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="

    def refused() -> None:
        try:
            validator.check(forged, PEER)
        except BolideError:
            return

    def sign() -> None:
        sign_request(send, "benchUser1", "bench-secret")

    print(f"{'operation (single thread, no I/O)':<40}{'CPU µs/request':>15}")
    for name, operation in (
        ("check SEND_MESSAGE_V2 1 KiB", lambda: validator.check(send, PEER)),
        ("check PULL_MESSAGE", lambda: validator.check(pull, PEER)),
        ("check HEART_BEAT (1 group, 2 topics)", lambda: validator.check(heartbeat, PEER)),
        ("check refused (bad signature)", refused),
        ("sign SEND_MESSAGE_V2 1 KiB", sign),
    ):
        print(f"{name:<40}{_micro_us(operation, seconds):>15.2f}")


async def _pipelined(address: str, messages: int, window: int, signed: bool) -> float:
    pool = ClientPool()
    try:
        semaphore = asyncio.Semaphore(window)
        failures = 0

        async def one() -> None:
            nonlocal failures
            async with semaphore:
                request = _send_request()
                if signed:
                    sign_request(request, "benchUser1", "bench-secret")
                response = await pool.invoke(address, request, 30_000)
                if response.code != ResponseCode.SUCCESS:
                    failures += 1

        warm_up = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        if signed:
            sign_request(warm_up, "benchUser1", "bench-secret")
        await pool.invoke(address, warm_up)  # connected before the clock starts
        cpu_start, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(messages)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        if failures:
            raise SystemExit(f"{failures} sends failed")
        print(f"{'ACL on' if signed else 'ACL off':<12}{messages:>10,}{messages / elapsed:>12,.0f}"
              f"{cpu / messages * 1e6:>16.1f}")  # fmt: skip
        return elapsed
    finally:
        await pool.close()


async def end_to_end(messages: int, window: int) -> None:
    print(
        f"\npipelined SEND_MESSAGE_V2 1 KiB, {window} in flight, client and broker in one process"
    )
    print(f"{'':<12}{'messages':>10}{'sends/s':>12}{'CPU µs/send':>16}")
    for acl in (False, True):
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory)
            settings: dict[str, object] = {}
            if acl:
                (root / "plain_acl.yml").write_text(ACCOUNTS)
                settings = {"aclEnable": "true", "aclFile": str(root / "plain_acl.yml")}
            async with Cluster(root / "cluster", settings=settings) as cluster:
                broker = cluster.brokers[0]
                await broker.context.topics.update_topic_config(TopicConfig(TOPIC, 4, 4))
                await _pipelined(broker.address, messages, window, acl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=64)
    options = parser.parse_args()
    print(f"command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    print(f"python {platform.python_version()} on {platform.machine()}")
    micro(options.seconds)
    remoting_loop.run(end_to_end(options.messages, options.window))


if __name__ == "__main__":
    main()

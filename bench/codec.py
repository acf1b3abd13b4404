"""Wire codec throughput, single thread, no I/O: commands encoded and decoded per second.

Workloads:

* ``send_v2``: a SEND_MESSAGE_V2 request as the Java producer sends it (JSON header, one-letter
  extFields, 1 KiB body). Encode = header object -> extFields -> frame pieces; decode = frames
  fed to a FrameDecoder in 64 KiB chunks -> RemotingCommand -> SendMessageRequestHeader.
* ``pull_response``: a PULL_MESSAGE SUCCESS response carrying 32 stored records of 1 KiB bodies
  as zero-copy body parts. Encode = header -> frame pieces; decode = frame -> command ->
  PullMessageResponseHeader (the records themselves are counted by ``records``).
* ``records``: stored message records with 1 KiB bodies decoded from one pull body
  (bolide.protocol.record.decode_records), in records per second.
* the same command workloads with the ROCKETMQ binary header;
* ``twins``: every function of the compiled wire codec (bolide.protocol.record._compiled) beside its
  pure-Python twin (bolide.protocol.record), per call: pull-body decode (32 x 1 KiB records,
  into MessageExt), recovery's record check, record header read, properties parse, record
  write into a mapping (one 1 KiB record). The command rows above use whichever twin the
  install chose (``BOLIDE_PURE_PYTHON=1`` forces the pure one).

    .venv/bin/python bench/codec.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable

from bolide.base import compiled
from bolide.protocol import record as door
from bolide.protocol.command import (
    RemotingCommand,
    decode_command,
    encode_command,
    encode_command_parts,
)
from bolide.protocol.frame import FrameDecoder, SerializeType
from bolide.protocol.headers import (
    PullMessageResponseHeader,
    SendMessageRequestHeader,
)
from bolide.protocol.message import PropertyKey
from bolide.protocol.record import (
    RowSink,
    body_crc,
    decode_records,
    encode_properties,
    encode_record,
)

BODY_BYTES = 1024
PULL_BATCH_MESSAGES = 32
CHUNK_BYTES = 64 * 1024
FRAMES_PER_STREAM = 256


def _send_header() -> SendMessageRequestHeader:
    properties = encode_properties(
        {
            PropertyKey.UNIQ_KEY: "7F0000010A8C18B4AAC27A3D1E2F0000",
            PropertyKey.TAGS: "TagA",
            PropertyKey.KEYS: "order-17",
            PropertyKey.WAIT: "true",
        }
    )
    return SendMessageRequestHeader(
        producer_group="bench-producers",
        topic="BenchTopic",
        default_topic="TBW102",
        default_topic_queue_count=4,
        queue_id=3,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        flag=0,
        properties=properties,
        reconsume_times=0,
        unit_mode=False,
        batch=False,
    )


def _pull_body() -> bytes:
    body = bytes(range(256)) * (BODY_BYTES // 256)
    properties = encode_properties({"UNIQ_KEY": "7F0000010A8C18B4AAC27A3D1E2F0000", "TAGS": "TagA"})
    records = [
        encode_record(
            topic=b"BenchTopic",
            body=body,
            flag=0,
            properties=properties.encode(),
            queue_id=0,
            queue_offset=index,
            commit_log_offset=index * 1200,
            sys_flag=0,
            born_timestamp_ms=1_700_000_000_000,
            born_host=("10.0.0.5", 53211),
            store_timestamp_ms=1_700_000_000_001,
            store_host=("10.0.0.1", 10911),
            reconsume_times=0,
            prepared_transaction_offset=0,
            body_crc=body_crc(body),
        )
        for index in range(PULL_BATCH_MESSAGES)
    ]
    return b"".join(records)


ROUNDS = 5
"""Each figure is the best of this many equal windows: other processes share the cores, and
the best window is the one least disturbed by them."""


def _rate(operation: Callable[[], int], seconds: float) -> float:
    """Items per second: ``operation`` returns how many items one call handled."""
    operation()  # warm up
    best = 0.0
    for _ in range(ROUNDS):
        items = 0
        start = time.perf_counter()
        deadline = start + seconds / ROUNDS
        while time.perf_counter() < deadline:
            items += operation()
        best = max(best, items / (time.perf_counter() - start))
    return best


def _send_scenarios(serialize_type: SerializeType, seconds: float) -> dict[str, float]:
    header = _send_header()
    body = bytes(BODY_BYTES)

    def encode() -> int:
        for opaque in range(100):
            command = RemotingCommand(
                310,
                opaque=opaque,
                ext_fields=header.to_v2_ext_fields(),
                body=body,
                serialize_type=serialize_type,
            )
            encode_command_parts(command)
        return 100

    sample = RemotingCommand(
        310, ext_fields=header.to_v2_ext_fields(), body=body, serialize_type=serialize_type
    )
    stream = encode_command(sample) * FRAMES_PER_STREAM
    chunks = [stream[i : i + CHUNK_BYTES] for i in range(0, len(stream), CHUNK_BYTES)]

    def decode() -> int:
        decoder = FrameDecoder()
        count = 0
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                command = decode_command(frame)
                SendMessageRequestHeader.from_v2_ext_fields(command.ext_fields)
                count += 1
        return count

    return {"encode": _rate(encode, seconds), "decode": _rate(decode, seconds)}


def _pull_scenarios(serialize_type: SerializeType, seconds: float) -> dict[str, float]:
    pull_body = _pull_body()
    view = memoryview(pull_body)
    record_size = len(pull_body) // PULL_BATCH_MESSAGES
    parts = tuple(view[i * record_size : (i + 1) * record_size] for i in range(PULL_BATCH_MESSAGES))
    request = RemotingCommand(11, opaque=9, serialize_type=serialize_type)
    header = PullMessageResponseHeader(0, 32, 0, 1000)

    def encode() -> int:
        for _ in range(100):
            response = request.make_response(0, ext_fields=header.to_ext_fields(), body_parts=parts)
            encode_command_parts(response)
        return 100

    stream = encode_command(
        request.make_response(0, ext_fields=header.to_ext_fields(), body=pull_body)
    )
    stream *= 16
    chunks = [stream[i : i + CHUNK_BYTES] for i in range(0, len(stream), CHUNK_BYTES)]

    def decode() -> int:
        decoder = FrameDecoder()
        count = 0
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                PullMessageResponseHeader.from_ext_fields(decode_command(frame).ext_fields)
                count += 1
        return count

    return {"encode": _rate(encode, seconds), "decode": _rate(decode, seconds)}


def _records_rate(seconds: float) -> float:
    pull_body = _pull_body()
    return _rate(lambda: len(decode_records(pull_body)), seconds)


def _twin_calls() -> dict[str, tuple[object, ...]]:
    from bolide.protocol.message import MessageExt

    pull_body = _pull_body()
    one = pull_body[: len(pull_body) // PULL_BATCH_MESSAGES]
    header = door.read_record_header(one)
    properties = str(
        one[header.properties_offset : header.properties_offset + header.properties_length],
        "utf-8",
    )

    class Record:
        body = one[header.body_offset : header.body_offset + header.body_length]
        body_crc = header.body_crc
        flag = 0
        properties_bytes = properties.encode()
        size = header.total_size

    target = memoryview(bytearray(len(one)))
    topic_tail = bytes((len(header.topic),)) + header.topic.encode()
    ip = b"\x7f\0\0\1"
    return {
        "decode_messages (32 x 1 KiB)": (pull_body, MessageExt, False),
        "scan_rows (32 x 1 KiB, Spark)": (pull_body, 2**62, RowSink, _no_inflate),
        "read_stored_record": (one, 0, header.commit_log_offset),
        "read_record_header": (one, 0),
        "decode_properties": (properties,),
        "write_records (1 x 1 KiB)": (
            target,
            0,
            [Record()],
            topic_tail,
            0,
            0,
            0,
            0,
            0,
            ip,
            1,
            0,
            ip,
            2,
            0,
            0,
        ),
    }


def _no_inflate(payload: bytes, sys_flag: int) -> bytes:
    return payload


_RECORD_ROOMS = ("layout", "properties", "messages", "rows", "batch")
"""The rooms of bolide.protocol.record whose functions record/_compiled compiles."""


def _pure_twin(name: str) -> Callable[..., object]:
    for room in _RECORD_ROOMS:
        try:
            return compiled.pure_twin(f"bolide.protocol.record.{room}", name)
        except KeyError:
            continue
    raise KeyError(name)


def _twins(seconds: float) -> None:
    try:
        import bolide.protocol.record._compiled as fast  # type: ignore[import-not-found]
    except ImportError:
        print("twins: the compiled wire codec is not built (pure-Python install)")
        return
    print(f"{'twins (µs per call)':<34}{'pure':>12}{'compiled':>12}{'gain':>8}")
    for label, arguments in _twin_calls().items():
        name = label.split(" ")[0]
        pure = _pure_twin(name)
        native = getattr(fast, name)
        rates = []
        for function in (pure, native):
            rates.append(_rate(_calls(function, arguments), seconds / 2))
        print(f"{label:<34}{1e6 / rates[0]:>12.2f}{1e6 / rates[1]:>12.2f}"
              f"{rates[1] / rates[0]:>7.1f}x")  # fmt: skip


def _calls(function: Callable[..., object], arguments: tuple[object, ...]) -> Callable[[], int]:
    fresh_sink = RowSink in arguments  # scan_rows: a new sink a call, as the Spark reader

    def run() -> int:
        for _ in range(100):
            if fresh_sink:
                function(*[RowSink() if item is RowSink else item for item in arguments])
            else:
                function(*arguments)
        return 100

    return run


def _print_row(workload: str, encode_rate: float, decode_rate: float) -> None:
    print(f"{workload:<34}{encode_rate:>12,.0f}{decode_rate:>12,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    arguments = parser.parse_args()
    print(f"command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(f"hot path: {compiled.describe()}")
    print(f"{'workload':<34}{'encode/s':>12}{'decode/s':>12}")
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
        name = serialize_type.name
        send = _send_scenarios(serialize_type, arguments.seconds)
        _print_row(f"send_v2 1 KiB ({name})", send["encode"], send["decode"])
        pull = _pull_scenarios(serialize_type, arguments.seconds)
        _print_row(f"pull_response 32x1 KiB ({name})", pull["encode"], pull["decode"])
    records = _records_rate(arguments.seconds)
    print(f"{'records 1 KiB decoded':<34}{'':>12}{records:>12,.0f}")
    _twins(arguments.seconds)


if __name__ == "__main__":
    main()

"""Golden frames of END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39): Java's field names
and types (round2-facts §5; docs/protocol.md §2.12), and the check body in MessageDecoder.encode's
layout, assembled here byte by byte rather than with Bolide's encoder."""

from __future__ import annotations

import struct
import zlib

import orjson

from bolide.broker.transactions.records import check_request, parse_half
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import FLAG_ONEWAY, RemotingCommand, decode_command, encode_command
from bolide.protocol.frame import FrameDecoder
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from bolide.protocol.message import MessageExt
from bolide.protocol.record import encode_properties

# END_TRANSACTION as a Java 4.9.7 producer sends it (DefaultMQProducerImpl.endTransaction):
# every extFields value is a string; Long / Integer / Boolean fields in decimal / true|false.
JAVA_END_TRANSACTION_HEADER = (
    b'{"code":37,"extFields":{"commitLogOffset":"4660","commitOrRollback":"8",'
    b'"fromTransactionCheck":"false","msgId":"7F0000010D2C18B4AAC2123400000001",'
    b'"producerGroup":"order-tx","tranStateTableOffset":"17",'
    b'"transactionId":"7F0000010D2C18B4AAC2123400000001"},"flag":2,"language":"JAVA",'
    b'"opaque":42,"serializeTypeCurrentRPC":"JSON","version":435}'
)
UNIQ = "7F0000010D2C18B4AAC2123400000001"


def java_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def test_java_end_transaction_decodes_field_by_field() -> None:
    [raw] = FrameDecoder().feed(java_frame(JAVA_END_TRANSACTION_HEADER))
    command = decode_command(raw)
    assert (command.code, command.flag, command.opaque) == (37, FLAG_ONEWAY, 42)
    header = EndTransactionRequestHeader.from_ext_fields(command.ext_fields)
    assert header == EndTransactionRequestHeader(
        producer_group="order-tx",
        tran_state_table_offset=17,
        commit_log_offset=4660,
        commit_or_rollback=8,
        msg_id=UNIQ,
        from_transaction_check=False,
        transaction_id=UNIQ,
    )


def test_bolide_end_transaction_has_javas_fields_and_types() -> None:
    header = EndTransactionRequestHeader("order-tx", 17, 4660, 12, UNIQ, True, UNIQ)
    request = RemotingCommand.request(
        RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True
    )
    [raw] = FrameDecoder().feed(encode_command(request))
    fields = orjson.loads(raw.header)
    assert fields["code"] == 37
    assert fields["flag"] & FLAG_ONEWAY
    assert fields["extFields"] == {
        "producerGroup": "order-tx",
        "tranStateTableOffset": "17",
        "commitLogOffset": "4660",
        "commitOrRollback": "12",
        "fromTransactionCheck": "true",
        "msgId": UNIQ,
        "transactionId": UNIQ,
    }


def half_record() -> MessageExt:
    properties = {
        "KEYS": "order-17",
        "UNIQ_KEY": UNIQ,
        "TRAN_MSG": "true",
        "PGROUP": "order-tx",
        "REAL_TOPIC": "orders",
        "REAL_QID": "3",
        "TRANSACTION_CHECK_TIMES": "2",
        "TRAN_PREPARED_QUEUE_OFFSET": "5",
    }
    body = b'{"id": 17}'
    return MessageExt(
        topic="RMQ_SYS_TRANS_HALF_TOPIC",
        body=body,
        flag=7,
        properties=properties,
        queue_id=0,
        queue_offset=17,
        commit_log_offset=4660,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_123,
        born_host=("10.1.2.3", 50000),
        store_timestamp_ms=1_700_000_006_456,
        store_host=("127.0.0.1", 10911),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body_crc=zlib.crc32(body) & 0x7FFFFFFF,
    )


def test_check_transaction_state_header_and_body() -> None:
    message = half_record()
    fields, body = check_request(message, parse_half(message))
    # CheckTransactionStateRequestHeader: Long tranStateTableOffset / commitLogOffset, the
    # UNIQ_KEY as msgId and transactionId, the broker's offset id as offsetMsgId.
    assert fields == {
        "tranStateTableOffset": "17",
        "commitLogOffset": "4660",
        "msgId": UNIQ,
        "transactionId": UNIQ,
        "offsetMsgId": "7F00000100002A9F0000000000001234",
    }
    assert CheckTransactionStateRequestHeader.from_ext_fields(fields).commit_log_offset == 4660
    properties = encode_properties(message.properties).encode()
    topic = b"orders"  # the real topic and queue id, not the half topic's
    expected_size = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 10 + 1 + 6 + 2
    expected = b"".join(
        (
            struct.pack(">i", expected_size + len(properties)),  # storeSize, computed
            struct.pack(">I", 0xDAA320A7),  # MESSAGE_MAGIC_CODE
            struct.pack(">i", message.body_crc),
            struct.pack(">i", 3),  # queueId = REAL_QID
            struct.pack(">i", 7),  # flag
            struct.pack(">q", 17),  # queueOffset
            struct.pack(">q", 4660),  # physicalOffset
            struct.pack(">i", 0),  # sysFlag
            struct.pack(">q", 1_700_000_000_123),  # bornTimestamp
            bytes([10, 1, 2, 3]) + struct.pack(">i", 50000),  # bornHost
            struct.pack(">q", 1_700_000_006_456),  # storeTimestamp
            bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),  # storeHost
            struct.pack(">i", 0),  # reconsumeTimes
            struct.pack(">q", 0),  # preparedTransactionOffset
            struct.pack(">i", 10) + b'{"id": 17}',
            bytes([len(topic)]) + topic,
            struct.pack(">h", len(properties)) + properties,
        )
    )
    assert body == expected

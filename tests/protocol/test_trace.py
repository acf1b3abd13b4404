"""The 4.x trace record codec against golden records written field by field as Java's
TraceDataEncoder lays them out (\\x01 between fields, \\x02 after each record)."""

from __future__ import annotations

import pytest

from bolide.protocol.trace import (
    TraceDecodeError,
    TraceMessageType,
    TraceRecord,
    TraceType,
    decode_records,
    encode_record,
    encode_records,
    region_trace_topic,
    trace_message_keys,
)

S, E = "\x01", "\x02"
MSG_ID = "7F0000010B2C18B4AAC2720F35E60000"
OFFSET_ID = "7F00000100002A9F0000000000000C5A"

PUB = S.join(["Pub", "1700000000123", "DefaultRegion", "OrderProducers", "Orders", MSG_ID,
              "TagA", "k1 k2", "127.0.0.1:10911", "42", "3", "0", OFFSET_ID,
              "true"]) + E  # fmt: skip
SUB_BEFORE = S.join(["SubBefore", "1700000000200", "DefaultRegion", "Billing",
                     "req-1", MSG_ID, "2", "k1 k2"]) + E  # fmt: skip
SUB_AFTER = S.join(["SubAfter", "req-1", MSG_ID, "15", "false", "k1 k2", "4",
                    "1700000000215", "Billing"]) + E  # fmt: skip
END_TX = S.join(["EndTransaction", "1700000000300", "DefaultRegion", "TxProducers", "Orders",
                 MSG_ID, "", "k1", "127.0.0.1:10911", "1", "tx-9", "COMMIT_MESSAGE",
                 "true"]) + E  # fmt: skip
RECALL = S.join(["Recall", "1700000000400", "DefaultRegion", "OrderProducers", "Orders",
                 MSG_ID, "true"]) + E  # fmt: skip


def test_golden_records_decode_field_by_field() -> None:
    pub, before, after, end, recall = decode_records(PUB + SUB_BEFORE + SUB_AFTER + END_TX + RECALL)
    assert pub == TraceRecord(
        TraceType.PUB, 1700000000123, "DefaultRegion", "OrderProducers", "Orders", MSG_ID,
        "TagA", "k1 k2", "127.0.0.1:10911", 42, 3, TraceMessageType.NORMAL_MSG, OFFSET_ID, True,
    )  # fmt: skip
    assert (before.type, before.timestamp_ms, before.group) == (
        TraceType.SUB_BEFORE, 1700000000200, "Billing"
    )  # fmt: skip
    assert (before.request_id, before.msg_id, before.retry_times, before.keys) == (
        "req-1", MSG_ID, 2, "k1 k2"
    )  # fmt: skip
    assert (after.request_id, after.cost_time_ms, after.success, after.context_code) == (
        "req-1", 15, False, 4
    )  # fmt: skip
    assert (after.timestamp_ms, after.group) == (1700000000215, "Billing")
    assert end.message_type is TraceMessageType.TRANS_MSG_HALF
    assert (end.transaction_id, end.transaction_state, end.from_transaction_check) == (
        "tx-9", "COMMIT_MESSAGE", True
    )  # fmt: skip
    assert (end.tags, end.keys, end.store_host) == ("", "k1", "127.0.0.1:10911")
    assert (recall.type, recall.group, recall.msg_id, recall.success) == (
        TraceType.RECALL, "OrderProducers", MSG_ID, True
    )  # fmt: skip


def test_encoding_gives_the_golden_bytes_back() -> None:
    text = PUB + SUB_BEFORE + SUB_AFTER + END_TX + RECALL
    assert encode_records(decode_records(text)) == text


def test_field_count_variants() -> None:
    # Pub from an old writer: 13 fields, no offsetMsgId
    old = S.join([*PUB.rstrip(E).split(S)[:12], "false"]) + E
    (record,) = decode_records(old)
    assert record.offset_msg_id == "" and record.success is False
    # Pub with a 15th field: the client host
    (record,) = decode_records(PUB.rstrip(E) + S + "10.0.0.7" + E)
    assert record.client_host == "10.0.0.7" and record.offset_msg_id == OFFSET_ID
    assert encode_record(record) == PUB.rstrip(E) + S + "10.0.0.7" + E
    # SubAfter of the CLOUD channel: 7 fields and a trailing separator
    (record,) = decode_records(S.join(["SubAfter", "r", MSG_ID, "9", "true", "k", "0"]) + S + E)
    assert (record.context_code, record.timestamp_ms, record.group) == (0, -1, "")
    # SubAfter of the C++ 2.x client: 6 fields
    (record,) = decode_records(S.join(["SubAfter", "r", MSG_ID, "9", "true", "dKey"]) + E)
    assert (record.keys, record.context_code, record.timestamp_ms) == ("dKey", -1, -1)
    # SubBefore whose keys were empty (the split drops the trailing empty field)
    (record,) = decode_records(S.join(["SubBefore", "5", "R", "G", "r", MSG_ID, "0", ""]) + E)
    assert record.keys == "" and record.retry_times == 0
    # "TRUE" is true, as Java's Boolean.parseBoolean
    (record,) = decode_records(RECALL.replace("true", "TRUE"))
    assert record.success is True


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Nope" + S + "1" + E, "unknown record type 'Nope'"),
        (S.join(["Pub", "1", "R"]) + E, "Pub needs 13 fields, has 3"),
        (SUB_BEFORE.replace("1700000000200", "soon"), "invalid literal"),
        (END_TX.replace("COMMIT_MESSAGE", "MAYBE"), "unknown transaction state 'MAYBE'"),
        (PUB.replace(S + "0" + S + OFFSET_ID, S + "9" + S + OFFSET_ID), "is not a valid"),
    ],
)
def test_bad_records_are_refused_by_name(text: str, why: str) -> None:
    with pytest.raises(TraceDecodeError, match=why):
        decode_records(text)


def test_a_separator_inside_a_field_is_refused() -> None:
    with pytest.raises(TraceDecodeError, match="may not hold"):
        encode_record(TraceRecord(TraceType.RECALL, 1, keys="", topic="a\x01b"))


def test_keys_are_msg_ids_and_every_user_key() -> None:
    records = decode_records(PUB + SUB_BEFORE + END_TX)
    other = TraceRecord(TraceType.SUB_BEFORE, 1, msg_id="OTHER", keys="k3  k1")
    assert trace_message_keys([*records, other]) == [MSG_ID, "k1", "k2", "OTHER", "k3"]
    assert region_trace_topic("DefaultRegion") == "rmq_sys_TRACE_DATA_DefaultRegion"

"""``bolide transaction list`` against a real standalone: pending half messages with age and
check count, filters, counters, ``--json``."""

from __future__ import annotations

import asyncio

from bolide.protocol.msgid import offset_message_id
from tests.broker.transaction_support import COMMIT, Half, WireProducer
from tests.cli.conftest import Standalone, run_bolide

GROUP = "cli-tx-producers"


async def _leave_one_pending(address: str) -> tuple[Half, Half]:
    producer = WireProducer(address, GROUP, "10.0.0.5@cli")
    try:
        await producer.heartbeat()
        decided = await producer.send_half("CliTxOrders", b"decided", extra={"KEYS": "k-done"})
        assert (await producer.end(decided, COMMIT)).code == 0
        pending = await producer.send_half("CliTxOrders", b"pending", extra={"KEYS": "k-open"})
        return decided, pending
    finally:
        await producer.close()


def test_transaction_list(standalone: Standalone) -> None:
    decided, pending = asyncio.run(_leave_one_pending(standalone.broker))
    result = run_bolide("transaction", "list", "--json", namesrv=standalone.namesrv)
    assert result.code == 0, result.stderr
    [broker] = result.json()
    assert broker["broker"] == "broker-a"
    assert broker["pending"] == 1
    [row] = broker["halfMessages"]
    assert row["msgId"] == pending.unique_key
    assert (row["topic"], row["producerGroup"], row["keys"]) == ("CliTxOrders", GROUP, "k-open")
    assert row["checkTimes"] == 0
    assert row["ageMs"] >= 0
    assert broker["counters"]["commit"] >= 1
    assert broker["counters"]["checkMax"] == 15
    assert broker["counters"]["checkIntervalMs"] == 60_000

    table = run_bolide("transaction", "list", namesrv=standalone.namesrv)
    assert table.code == 0, table.stderr
    assert pending.unique_key in table.stdout
    assert decided.unique_key not in table.stdout
    assert "1 pending" in table.stdout

    other = run_bolide(
        "transaction", "list", "--group", "nobody", "--json", namesrv=standalone.namesrv
    )
    assert other.code == 0, other.stderr
    assert other.json()[0]["pending"] == 0


def test_given_up_listing_and_resume_errors(standalone: Standalone) -> None:
    listed = run_bolide("transaction", "list", "--given-up", "--json", namesrv=standalone.namesrv)
    assert listed.code == 0, listed.stderr
    assert listed.json() == [
        {
            "broker": "broker-a",
            "givenUp": 0,
            "halfMessages": [],
            "counters": listed.json()[0]["counters"],
        }
    ]
    bad = run_bolide("transaction", "resume", "not-an-id", namesrv=standalone.namesrv)
    assert bad.code != 0
    assert "'not-an-id' is not an offset message id" in bad.stderr
    host, port = standalone.broker.rsplit(":", 1)
    unknown = offset_message_id((host, int(port)), 0)
    refused = run_bolide("transaction", "resume", unknown, namesrv=standalone.namesrv)
    assert refused.code != 0
    assert "is not a message of TRANS_CHECK_MAX_TIME_TOPIC" in refused.stderr

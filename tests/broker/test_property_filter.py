"""SQL92 property filters on the broker, over real sockets: pulls with expressionType SQL92
(carried in the pull, or from the heartbeat), CHECK_CLIENT_CONFIG (46), and the refusals a
Java broker gives. Before, CHECK_CLIENT_CONFIG was unsupported (Java consumers with bySql
failed at start) and SQL92 pulls got every message unfiltered."""

from __future__ import annotations

from pathlib import Path

import orjson

from bolide.protocol.bodies import SubscriptionData
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from tests.integration.wire import connected, heartbeat_request, records

ON = {"enablePropertyFilter": "true"}


def _check(expression: str, expression_type: str = "SQL92") -> RemotingCommand:
    subscription = SubscriptionData.from_expression("T", expression, 1, expression_type)
    return RemotingCommand.request(
        RequestCode.CHECK_CLIENT_CONFIG,
        {"clientId": "c1", "group": "G"},
        orjson.dumps(subscription.to_object()),
    )


async def test_sql92_pulls_get_only_matching_messages(tmp_path: Path) -> None:
    async with connected(tmp_path, settings=ON) as (_, wire):
        for index in range(6):
            region = "eu" if index % 2 else "us"
            properties = {"region": region, "amount": str(index * 10)}
            await wire.send("Orders", f"order {index}".encode(), tags="paid", properties=properties)
        expression = "region = 'eu' AND amount BETWEEN 20 AND 100"
        pulled = await wire.pull("Orders", 0, 0, subscription=expression, expression_type="SQL92")
        assert pulled.code == ResponseCode.SUCCESS
        assert [m.body for m in records(pulled)] == [b"order 3", b"order 5"]
        assert pulled.ext_fields["nextBeginOffset"] == "6"
        nothing = await wire.pull(
            "Orders", 0, 0, subscription="amount > 1000", expression_type="SQL92"
        )
        assert nothing.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # NO_MATCHED_MESSAGE
        assert nothing.ext_fields["nextBeginOffset"] == "6"


async def test_the_heartbeat_subscription_filters_too(tmp_path: Path) -> None:
    async with connected(tmp_path, settings=ON) as (_, wire):
        await wire.send("Hb", b"keep", properties={"k": "1"})
        await wire.send("Hb", b"drop", properties={"k": "2"})
        beat = heartbeat_request("c1", consumer_groups={"G_HB": {}})
        body = orjson.loads(beat.body)
        body["consumerDataSet"][0]["subscriptionDataSet"] = [
            SubscriptionData.from_expression("Hb", "k = 1", 1, "SQL92").to_object()
        ]
        beat.body = orjson.dumps(body)
        assert (await wire.invoke(beat)).code == ResponseCode.SUCCESS
        pulled = await wire.pull("Hb", 0, 0, group="G_HB", sys_flag=0, subscription=None)
        assert [m.body for m in records(pulled)] == [b"keep"]


async def test_bad_and_unsupported_expressions_are_refused(tmp_path: Path) -> None:
    async with connected(tmp_path, settings=ON) as (_, wire):
        await wire.send("Bad", b"x")
        bad = await wire.pull("Bad", 0, 0, subscription="a >> 1", expression_type="SQL92")
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "line 1, column 4" in (bad.remark or "")
        other = await wire.pull("Bad", 0, 0, subscription="x", expression_type="GROOVY")
        assert other.code == ResponseCode.SYSTEM_ERROR
    async with connected(tmp_path / "off") as (_, wire):
        await wire.send("Off", b"x")
        off = await wire.pull("Off", 0, 0, subscription="a > 1", expression_type="SQL92")
        assert off.code == ResponseCode.SYSTEM_ERROR
        assert "enablePropertyFilter" in (off.remark or "")


async def test_check_client_config_answers_as_a_java_broker(tmp_path: Path) -> None:
    async with connected(tmp_path, settings=ON) as (_, wire):
        assert (await wire.invoke(_check("a > 1 AND b IS NOT NULL"))).code == ResponseCode.SUCCESS
        assert (await wire.invoke(_check("TagA || TagB", "TAG"))).code == ResponseCode.SUCCESS
        bad = await wire.invoke(_check("a > 1 AND"))
        assert bad.code == ResponseCode.SYSTEM_ERROR
        assert "the end of the expression at line 1, column 10" in (bad.remark or "")
    async with connected(tmp_path / "off") as (_, wire):
        off = await wire.invoke(_check("a > 1"))
        assert off.code == ResponseCode.SYSTEM_ERROR
        assert "enablePropertyFilter" in (off.remark or "")

"""What a POP lets through, over remoting (issue 29): SQL92 expressions compiled and applied
per message (a bad one refused with SUBSCRIPTION_PARSE_FAILED, SQL92 refused without
enablePropertyFilter), the tag string re-checked after the store's hash filter, messages that
come back after their invisible time held to the request's filter, and where a new POP group
starts (the broker's newGroupStartRule, shared with the 4.x path)."""

from __future__ import annotations

from pathlib import Path

from bolide.base.clock import ManualClock
from bolide.broker.handlers.pop import PARSE_FAILED_REMARK
from bolide.broker.metrics.stats_items import StatsName
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers.pop import ConsumeInitMode, PopMessageRequestHeader
from tests.integration.wire import BrokerWire, connected, records

SQL_SETTINGS = {"enablePropertyFilter": "true"}


async def _pop(
    wire: BrokerWire,
    topic: str,
    expression: str | None = None,
    expression_type: str | None = None,
    *,
    group: str = "G",
    invisible_ms: int = 10_000,
    init_mode: int = ConsumeInitMode.MAX,
) -> RemotingCommand:
    header = PopMessageRequestHeader(
        group, topic, -1, 32, invisible_ms, 0, 0, init_mode, expression_type, expression
    )
    return await wire.invoke(
        RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())
    )


async def test_sql92_pops_only_the_matching_messages_and_the_group_moves_on(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path, settings=SQL_SETTINGS) as (cluster, wire):
        for index in range(6):
            await wire.send("Sql", f"m{index}".encode(), properties={"n": str(index)})
        response = await _pop(wire, "Sql", "n >= 3 AND n <> 4", "SQL92")
        assert response.code == ResponseCode.SUCCESS
        assert sorted(m.body for m in records(response)) == [b"m3", b"m5"]
        # the messages passed over are done: nothing comes back for them
        assert (await _pop(wire, "Sql", "n >= 0", "SQL92")).code == ResponseCode.PULL_NOT_FOUND
        offsets = cluster.brokers[0].context.offsets
        assert offsets.query_offset("G", "Sql", 0) == 3  # m3 is in flight, m0..m2 are done


async def test_a_bad_sql92_expression_is_refused_with_javas_code_and_remark(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path, settings=SQL_SETTINGS) as (_, wire):
        await wire.send("SqlBad", b"x")
        response = await _pop(wire, "SqlBad", "n >>= 3", "SQL92")
        assert response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert (response.remark or "").startswith(PARSE_FAILED_REMARK)
        assert "column" in (response.remark or "")  # and says where


async def test_sql92_is_refused_while_property_filters_are_off(tmp_path: Path) -> None:
    async with connected(tmp_path) as (_, wire):
        await wire.send("SqlOff", b"x")
        response = await _pop(wire, "SqlOff", "n > 1", "SQL92")
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "enablePropertyFilter=true" in (response.remark or "")


async def test_a_tag_with_the_same_hash_is_not_delivered(tmp_path: Path) -> None:
    """``Aa`` and ``BB`` share their Java hashCode: the store lets both through, the string
    check keeps ``BB`` from an ``Aa`` subscriber, and the group's offset moves past it."""
    async with connected(tmp_path) as (cluster, wire):
        for tags in ("Aa", "BB", "Aa", "BB"):
            await wire.send("Collide", tags.encode(), tags=tags, queue_id=0)
        got = records(await _pop(wire, "Collide", "Aa"))
        assert [m.body for m in got] == [b"Aa", b"Aa"]
        assert (await _pop(wire, "Collide", "Aa || BB")).code == ResponseCode.PULL_NOT_FOUND
        offsets = cluster.brokers[0].context.offsets
        assert offsets.query_offset("G", "Collide", 0) == 0  # the first Aa is still in flight


async def test_messages_that_come_back_pass_the_requests_filter(tmp_path: Path) -> None:
    clock = ManualClock()
    async with connected(tmp_path, clock=clock) as (cluster, wire):
        for tags in ("A", "B", "A"):
            await wire.send("Back", tags.encode(), tags=tags, queue_id=0)
        first = records(await _pop(wire, "Back", invisible_ms=5_000))
        assert len(first) == 3  # all of them, unacked
        clock.advance_ms(5_000)
        pop = cluster.brokers[0].context.pop
        assert pop is not None
        await pop.revive_step()
        again = records(await _pop(wire, "Back", "A"))
        assert [m.body for m in again] == [b"A", b"A"]
        assert all(m.reconsume_times == 1 for m in again)
        clock.advance_ms(20_000)
        await pop.revive_step()  # the A ones come back again; B was done with
        third = records(await _pop(wire, "Back"))
        assert [m.body for m in third] == [b"A", b"A"]


async def test_a_new_pop_group_follows_the_new_group_start_rule(tmp_path: Path) -> None:
    """CONSUME_FROM: a new group starts at the newest message (Java's getInitOffset: max - 1)
    and that start is its committed offset at once; MIN still reads from the first."""
    settings = {"newGroupStartRule": "CONSUME_FROM"}
    async with connected(tmp_path, settings=settings) as (cluster, wire):
        for index in range(3):
            await wire.send("Start", f"m{index}".encode(), queue_id=0)
        got = records(await _pop(wire, "Start", group="Late"))
        assert [m.body for m in got] == [b"m2"]
        offsets = cluster.brokers[0].context.offsets
        assert offsets.query_offset("Late", "Start", 0) == 2
        early = records(await _pop(wire, "Start", group="Early", init_mode=ConsumeInitMode.MIN))
        assert [m.body for m in early] == [b"m0", b"m1", b"m2"]


async def test_a_new_pop_group_starts_at_zero_on_a_young_queue(tmp_path: Path) -> None:
    """The default rule (MEMORY): the queue's first message is in memory, so from 0."""
    async with connected(tmp_path) as (_, wire):
        for index in range(3):
            await wire.send("Young", f"m{index}".encode(), queue_id=0)
        got = records(await _pop(wire, "Young"))
        assert [m.body for m in got] == [b"m0", b"m1", b"m2"]


async def test_pops_are_counted_per_group(tmp_path: Path) -> None:
    """GROUP_GET_NUMS / GROUP_GET_SIZE count a POP group's gets as a pull group's."""
    async with connected(tmp_path) as (cluster, wire):
        for index in range(3):
            await wire.send("Counted", f"m{index}".encode(), queue_id=0)
        got = records(await _pop(wire, "Counted", group="Counting"))
        assert len(got) == 3
        table = cluster.brokers[0].context.stats.table
        nums = table.find(StatsName.GROUP_GET_NUMS, "Counted@Counting")
        size = table.find(StatsName.GROUP_GET_SIZE, "Counted@Counting")
        assert nums is not None and size is not None
        assert nums.value == 3 and size.value > 0

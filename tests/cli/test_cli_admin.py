"""The admin commands through the real ``bolide`` binary against a running ``bolide
standalone`` process: JSON output parsed, tables printed, exit codes and error messages.

Commands that do not depend on each other run side by side (each is a process whose start
dominates its time)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.cli.conftest import Result, Standalone, run_bolide

pytestmark = pytest.mark.timeout(240)

UNREACHABLE = "127.0.0.1:1"
_SIDE_BY_SIDE = 4


def bolide(standalone: Standalone, *arguments: str) -> Result:
    return run_bolide(*arguments, namesrv=standalone.namesrv)


def ok_json(standalone: Standalone, *arguments: str) -> Any:
    result = bolide(standalone, *arguments, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def side_by_side(standalone: Standalone, *commands: tuple[str, ...]) -> list[Result]:
    """Run independent commands at once; results in the order given."""
    with ThreadPoolExecutor(_SIDE_BY_SIDE) as pool:
        return list(pool.map(lambda command: bolide(standalone, *command), commands))


def parsed(result: Result) -> Any:
    assert result.code == 0, result.stderr
    return result.json()


def test_topic_commands(standalone: Standalone) -> None:
    created = ok_json(standalone, "topic", "create", "CliTopic", "--queues", "4")
    assert created == {"topic": "CliTopic", "brokers": ["broker-a"]}
    topics, every, route, status = map(
        parsed,
        side_by_side(
            standalone,
            ("topic", "list", "--json"),
            ("topic", "list", "--all", "--json"),
            ("topic", "route", "CliTopic", "--json"),
            ("topic", "status", "CliTopic", "--json"),
        ),
    )
    assert {"topic": "CliTopic", "kind": "normal", "messageType": "NORMAL"} in topics
    assert all(item["kind"] == "normal" for item in topics)
    assert {"topic": "TBW102", "kind": "system", "messageType": "NORMAL"} in every
    [broker] = route["brokers"]
    assert (broker["readQueues"], broker["writeQueues"], broker["perm"]) == (4, 4, 6)
    assert broker["addresses"] == {"0": standalone.broker}
    assert [q["maxOffset"] for q in status["queues"]] == [0, 0, 0, 0]
    ok_json(standalone, "topic", "update", "CliTopic", "--queues", "6", "--perm", "rw")
    table = bolide(standalone, "topic", "status", "CliTopic")
    assert table.code == 0 and "min offset" in table.stdout
    assert table.stdout.count("broker-a") == 6  # one row per queue after the update
    assert ok_json(standalone, "topic", "delete", "CliTopic")["brokers"] == ["broker-a"]
    gone = bolide(standalone, "topic", "status", "CliTopic")
    assert gone.code == 3
    assert "topic 'CliTopic' does not exist" in gone.stderr


def test_topic_message_types_and_orderly_groups(standalone: Standalone) -> None:
    ok_json(standalone, "topic", "create", "CliFifo", "--queues", "2", "--type", "fifo")
    listed = ok_json(standalone, "topic", "list")
    assert {"topic": "CliFifo", "kind": "normal", "messageType": "FIFO"} in listed
    refused = bolide(standalone, "topic", "create", "CliOdd", "--type", "odd")
    assert refused.code != 0 and "--type" in refused.stderr
    ok_json(standalone, "group", "create", "CliOrderly", "--orderly")
    listed_groups = ok_json(standalone, "group", "list")
    orderly = next(g for g in listed_groups if g["group"] == "CliOrderly")
    assert orderly["config"]["consumeOrderlyEnable"] is True
    table = bolide(standalone, "group", "list")
    assert table.code == 0 and "orderly" in table.stdout


def test_message_commands(standalone: Standalone) -> None:
    ok_json(standalone, "topic", "create", "CliMessages", "--queues", "2")
    sent, _ = map(
        parsed,
        side_by_side(
            standalone,
            ("message", "send", "CliMessages", "hello cli", "--tags", "greeting",
             "--keys", "k1 k2", "--property", "color=blue", "--json"),
            ("message", "send", "CliMessages", "more 0", "--keys", "more", "--json"),
        ),
    )  # fmt: skip
    assert sent["status"] == "SEND_OK"
    by_id, by_offset_id, missing, by_key, table, tail = side_by_side(
        standalone,
        ("message", "get", sent["msgId"], "--topic", "CliMessages", "--json"),
        ("message", "get", sent["offsetMsgId"], "--json"),
        ("message", "get", "0123456789ABCDEF0123456789ABCDEF"),
        ("message", "query", "CliMessages", "--key", "more", "--json"),
        ("message", "query", "CliMessages", "--begin", "10m"),
        ("message", "tail", "CliMessages", "--from", "earliest", "--count", "2", "--json"),
    )
    [message] = parsed(by_id)
    assert (message["body"], message["tags"], message["properties"]["color"]) == (
        "hello cli",
        "greeting",
        "blue",
    )
    assert parsed(by_offset_id)[0]["msgId"] == sent["msgId"]
    assert missing.code == 3 and "--topic" in missing.stderr
    assert [m["body"] for m in parsed(by_key)] == ["more 0"]
    assert table.code == 0 and "2 message(s)" in table.stdout and "hello cli" in table.stdout
    assert tail.code == 0, tail.stderr
    lines = [line for line in tail.stdout.splitlines() if line]
    assert len(lines) == 2 and all(line.startswith("{") for line in lines)


def test_group_progress_and_offset_reset_of_an_offline_group(standalone: Standalone) -> None:
    _, created = map(
        parsed,
        side_by_side(
            standalone,
            ("topic", "create", "CliProgress", "--queues", "2", "--json"),
            ("group", "create", "CliGroup", "--retry-max-times", "3", "--json"),
        ),
    )
    assert created["config"]["retryMaxTimes"] == 3
    for result in side_by_side(
        standalone,
        ("message", "send", "CliProgress", "m0"),
        ("group", "update", "CliGroup", "--retry-max-times", "5", "--no-broadcast"),
    ):
        assert result.code == 0, result.stderr
    [entry] = [g for g in ok_json(standalone, "group", "list") if g["group"] == "CliGroup"]
    assert (entry["config"]["retryMaxTimes"], entry["config"]["consumeBroadcastEnable"]) == (
        5,
        False,
    )
    assert entry["onlineClients"] == 0

    reset = ok_json(standalone, "offset", "reset", "CliGroup", "CliProgress", "--to", "earliest")
    assert reset["online"] is False
    assert [o["offset"] for o in reset["offsets"]] == [0, 0]
    progress, table, connections = side_by_side(
        standalone,
        ("group", "progress", "CliGroup", "--json"),
        ("group", "progress", "CliGroup"),
        ("group", "connections", "CliGroup", "--json"),
    )
    report = parsed(progress)
    assert report["online"] is False and report["totalLag"] == 1
    rows = report["queues"]
    assert [r["queueId"] for r in rows] == [0, 1]
    assert all(r["consumerOffset"] == 0 and r["lag"] == r["brokerOffset"] for r in rows)
    assert table.code == 0 and "total lag 1" in table.stdout and "consumer offset" in table.stdout
    assert parsed(connections) == {
        "group": "CliGroup",
        "online": False,
        "clients": [],
        "subscriptions": {},
    }

    ok_json(standalone, "offset", "reset", "CliGroup", "CliProgress", "--to", "latest")
    progress, cloned = map(
        parsed,
        side_by_side(
            standalone,
            ("group", "progress", "CliGroup", "--json"),
            ("offset", "clone", "CliGroup", "CliClone", "--json"),
        ),
    )
    assert progress["totalLag"] == 0
    assert cloned["brokers"] == ["broker-a"]
    assert ok_json(standalone, "group", "delete", "CliGroup")["brokers"] == ["broker-a"]
    unknown = bolide(standalone, "group", "progress", "CliGroup")
    assert unknown.code == 3
    assert "no broker knows the consumer group 'CliGroup'" in unknown.stderr


def test_cluster_and_broker_status(standalone: Standalone) -> None:
    brokers, status, unknown, table = side_by_side(
        standalone,
        ("cluster", "list", "--json"),
        ("broker", "status", "broker-a", "--json"),
        ("broker", "status", "no-such-broker"),
        ("cluster", "list"),
    )
    [broker] = parsed(brokers)
    assert (broker["brokerName"], broker["address"], broker["version"]) == (
        "broker-a",
        standalone.broker,
        "V4_9_4",
    )
    [runtime] = parsed(status).values()
    assert runtime["brokerVersion"] == "401"
    assert unknown.code == 3 and "no-such-broker" in unknown.stderr
    assert table.code == 0 and "DefaultCluster" in table.stdout


def test_errors_and_exit_codes(standalone: Standalone) -> None:
    with ThreadPoolExecutor(_SIDE_BY_SIDE) as pool:
        down = pool.submit(run_bolide, "topic", "list", namesrv=UNREACHABLE)
        down_json = pool.submit(run_bolide, "group", "progress", "G", "--json",
                                namesrv=UNREACHABLE)  # fmt: skip
        via_env = pool.submit(run_bolide, "cluster", "list", "--json", namesrv=None,
                              env={"BOLIDE_NAMESRV": standalone.namesrv})  # fmt: skip
        unknown_group = pool.submit(
            bolide, standalone, "offset", "reset", "NoGroup", "TBW102", "--to", "now"
        )
        bad_time = pool.submit(bolide, standalone, "offset", "reset", "G", "T", "--to", "yesterday")
    assert down.result().code == 4
    assert down.result().stderr.startswith(
        "bolide: cannot reach the cluster: no name server answered"
    )
    assert UNREACHABLE in down.result().stderr
    assert down_json.result().code == 4 and down_json.result().json()["exitCode"] == 4
    assert unknown_group.result().code == 3 and "NoGroup" in unknown_group.result().stderr
    assert bad_time.result().code == 2 and "not a time" in bad_time.result().stderr
    # $BOLIDE_NAMESRV is the default name server.
    assert via_env.result().code == 0
    assert via_env.result().json()[0]["brokerName"] == "broker-a"


def test_namespace_option_names_topics_inside_the_namespace(standalone: Standalone) -> None:
    created = ok_json(standalone, "--namespace", "cliNs", "topic", "create", "NsTopic")
    assert created["brokers"] == ["broker-a"]
    every = ok_json(standalone, "topic", "list", "--all")
    assert {item["topic"] for item in every} >= {"cliNs%NsTopic"}
    assert "NsTopic" not in {item["topic"] for item in every}
    # Given after the command name too, and from $BOLIDE_NAMESPACE.
    sent = run_bolide("message", "send", "NsTopic", "hello", "--namespace", "cliNs", "--json",
                      namesrv=standalone.namesrv)  # fmt: skip
    assert sent.code == 0, sent.stderr
    status = run_bolide("topic", "status", "NsTopic", "--json", namesrv=standalone.namesrv,
                        env={"BOLIDE_NAMESPACE": "cliNs"})  # fmt: skip
    assert status.code == 0, status.stderr
    assert sum(queue["maxOffset"] for queue in status.json()["queues"]) == 1
    refused = run_bolide("bench", "produce", "--namespace", "cliNs", namesrv=None)
    assert refused.code == 2 and "--namespace" in refused.stderr
    assert "names no topic or group" in refused.stderr

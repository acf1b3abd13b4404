"""The admin commands through the real ``bolide`` binary against a running ``bolide
standalone`` process: JSON output parsed, tables printed, exit codes and error messages."""

from __future__ import annotations

import datetime

import pytest

from tests.cli.conftest import Result, Standalone, run_bolide

pytestmark = pytest.mark.timeout(240)

UNREACHABLE = "127.0.0.1:1"


def bolide(standalone: Standalone, *arguments: str) -> Result:
    return run_bolide(*arguments, namesrv=standalone.namesrv)


def ok_json(standalone: Standalone, *arguments: str) -> object:
    result = bolide(standalone, *arguments, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def test_topic_commands(standalone: Standalone) -> None:
    created = ok_json(standalone, "topic", "create", "CliTopic", "--queues", "4")
    assert created == {"topic": "CliTopic", "brokers": ["broker-a"]}
    topics = ok_json(standalone, "topic", "list")
    assert {"topic": "CliTopic", "kind": "normal"} in topics  # type: ignore[operator]
    assert all(item["kind"] == "normal" for item in topics)  # type: ignore[attr-defined]
    every = ok_json(standalone, "topic", "list", "--all")
    assert {"topic": "TBW102", "kind": "system"} in every  # type: ignore[operator]
    route = ok_json(standalone, "topic", "route", "CliTopic")
    [broker] = route["brokers"]  # type: ignore[index]
    assert (broker["readQueues"], broker["writeQueues"], broker["perm"]) == (4, 4, 6)
    assert broker["addresses"] == {"0": standalone.broker}
    status = ok_json(standalone, "topic", "status", "CliTopic")
    assert [q["maxOffset"] for q in status["queues"]] == [0, 0, 0, 0]  # type: ignore[index]
    ok_json(standalone, "topic", "update", "CliTopic", "--queues", "6", "--perm", "rw")
    status = ok_json(standalone, "topic", "status", "CliTopic")
    assert len(status["queues"]) == 6  # type: ignore[index]
    assert ok_json(standalone, "topic", "consumers", "CliTopic") == {
        "topic": "CliTopic",
        "groups": [],
    }
    table = bolide(standalone, "topic", "status", "CliTopic")
    assert table.code == 0 and "min offset" in table.stdout and "broker-a" in table.stdout
    deleted = ok_json(standalone, "topic", "delete", "CliTopic")
    assert deleted["brokers"] == ["broker-a"]  # type: ignore[index]
    gone = bolide(standalone, "topic", "status", "CliTopic")
    assert gone.code == 3
    assert "topic 'CliTopic' does not exist" in gone.stderr


def test_message_commands(standalone: Standalone) -> None:
    ok_json(standalone, "topic", "create", "CliMessages", "--queues", "2")
    sent = ok_json(
        standalone, "message", "send", "CliMessages", "hello cli",
        "--tags", "greeting", "--keys", "k1 k2", "--property", "color=blue",
    )  # fmt: skip
    assert sent["status"] == "SEND_OK"  # type: ignore[index]
    for index in range(3):
        ok_json(standalone, "message", "send", "CliMessages", f"more {index}", "--keys", "more")
    [by_id] = ok_json(standalone, "message", "get", sent["msgId"], "--topic", "CliMessages")  # type: ignore[index]
    assert (by_id["body"], by_id["tags"], by_id["properties"]["color"]) == (
        "hello cli",
        "greeting",
        "blue",
    )
    [by_offset_id] = ok_json(standalone, "message", "get", sent["offsetMsgId"])  # type: ignore[index]
    assert by_offset_id["msgId"] == sent["msgId"]  # type: ignore[index]
    missing = bolide(standalone, "message", "get", "0123456789ABCDEF0123456789ABCDEF")
    assert missing.code == 3 and "--topic" in missing.stderr
    by_key = ok_json(standalone, "message", "query", "CliMessages", "--key", "more")
    assert sorted(m["body"] for m in by_key) == ["more 0", "more 1", "more 2"]  # type: ignore[attr-defined]
    by_time = ok_json(standalone, "message", "query", "CliMessages", "--begin", "10m")
    assert len(by_time) == 4  # type: ignore[arg-type]
    table = bolide(standalone, "message", "query", "CliMessages", "--begin", "earliest")
    assert table.code == 0 and "hello cli" in table.stdout
    tail = bolide(
        standalone, "message", "tail", "CliMessages", "--from", "earliest", "--count", "4",
        "--json",
    )  # fmt: skip
    assert tail.code == 0, tail.stderr
    lines = [line for line in tail.stdout.splitlines() if line]
    assert len(lines) == 4 and all(line.startswith("{") for line in lines)


def test_group_progress_and_offset_reset_of_an_offline_group(standalone: Standalone) -> None:
    ok_json(standalone, "topic", "create", "CliProgress", "--queues", "2")
    for index in range(3):
        ok_json(standalone, "message", "send", "CliProgress", f"m{index}")
    created = ok_json(standalone, "group", "create", "CliGroup", "--retry-max-times", "3")
    assert created["config"]["retryMaxTimes"] == 3  # type: ignore[index]
    groups = ok_json(standalone, "group", "list")
    [entry] = [g for g in groups if g["group"] == "CliGroup"]  # type: ignore[attr-defined]
    assert entry["onlineClients"] == 0
    ok_json(standalone, "group", "update", "CliGroup", "--retry-max-times", "5", "--no-broadcast")
    [entry] = [g for g in ok_json(standalone, "group", "list") if g["group"] == "CliGroup"]  # type: ignore[attr-defined]
    assert (entry["config"]["retryMaxTimes"], entry["config"]["consumeBroadcastEnable"]) == (
        5,
        False,
    )

    reset = ok_json(standalone, "offset", "reset", "CliGroup", "CliProgress", "--to", "earliest")
    assert reset["online"] is False  # type: ignore[index]
    assert [o["offset"] for o in reset["offsets"]] == [0, 0]  # type: ignore[index]
    progress = ok_json(standalone, "group", "progress", "CliGroup")
    assert progress["online"] is False and progress["totalLag"] == 3  # type: ignore[index]
    rows = progress["queues"]  # type: ignore[index]
    assert [r["queueId"] for r in rows] == [0, 1]
    assert all(r["consumerOffset"] == 0 and r["lag"] == r["brokerOffset"] for r in rows)
    table = bolide(standalone, "group", "progress", "CliGroup")
    assert table.code == 0 and "total lag 3" in table.stdout and "consumer offset" in table.stdout

    ok_json(standalone, "offset", "reset", "CliGroup", "CliProgress", "--to", "latest")
    assert ok_json(standalone, "group", "progress", "CliGroup")["totalLag"] == 0  # type: ignore[index]
    moment = datetime.datetime.now().isoformat(timespec="seconds")
    ok_json(standalone, "offset", "reset", "CliGroup", "CliProgress", "--to", moment)
    cloned = ok_json(standalone, "offset", "clone", "CliGroup", "CliClone")
    assert cloned["brokers"] == ["broker-a"]  # type: ignore[index]
    assert ok_json(standalone, "group", "progress", "CliClone")["totalLag"] == 0  # type: ignore[index]

    connections = ok_json(standalone, "group", "connections", "CliGroup")
    assert connections == {"group": "CliGroup", "online": False, "clients": [], "subscriptions": {}}
    assert ok_json(standalone, "group", "delete", "CliGroup")["brokers"] == ["broker-a"]  # type: ignore[index]
    unknown = bolide(standalone, "group", "progress", "CliGroup")
    assert unknown.code == 3
    assert "no broker knows the consumer group 'CliGroup'" in unknown.stderr


def test_cluster_and_broker_status(standalone: Standalone) -> None:
    [broker] = ok_json(standalone, "cluster", "list")  # type: ignore[misc]
    assert (broker["brokerName"], broker["address"], broker["version"]) == (
        "broker-a",
        standalone.broker,
        "V4_9_4",
    )
    status = ok_json(standalone, "broker", "status", "broker-a")
    [table] = status.values()  # type: ignore[attr-defined]
    assert table["brokerVersion"] == "401"
    by_address = ok_json(standalone, "broker", "status", standalone.broker)
    assert list(by_address) == list(status)  # type: ignore[call-overload]
    assert bolide(standalone, "broker", "status", "no-such-broker").code == 3
    table_output = bolide(standalone, "cluster", "list")
    assert table_output.code == 0 and "DefaultCluster" in table_output.stdout


def test_errors_and_exit_codes(standalone: Standalone) -> None:
    down = run_bolide("topic", "list", namesrv=UNREACHABLE)
    assert down.code == 4
    assert down.stderr.startswith("bolide: cannot reach the cluster: no name server answered")
    assert UNREACHABLE in down.stderr
    down_json = run_bolide("group", "progress", "G", "--json", namesrv=UNREACHABLE)
    assert down_json.code == 4 and down_json.json()["exitCode"] == 4
    unknown_group = bolide(standalone, "offset", "reset", "NoGroup", "TBW102", "--to", "now")
    assert unknown_group.code == 3 and "NoGroup" in unknown_group.stderr
    bad_time = bolide(standalone, "offset", "reset", "G", "T", "--to", "yesterday")
    assert bad_time.code == 2 and "not a time" in bad_time.stderr
    # $BOLIDE_NAMESRV is the default name server.
    via_env = run_bolide("cluster", "list", "--json", namesrv=None,
                         env={"BOLIDE_NAMESRV": standalone.namesrv})  # fmt: skip
    assert via_env.code == 0 and via_env.json()[0]["brokerName"] == "broker-a"

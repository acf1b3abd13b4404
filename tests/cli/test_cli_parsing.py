"""The command line's pure parts: time arguments, permissions, topic kinds, exit codes, the
admin options every admin command gets."""

from __future__ import annotations

import datetime

import pytest
import typer
from typer.testing import CliRunner

from bolide.base.errors import (
    GroupNotFoundError,
    InvariantViolationError,
    MessageNotFoundError,
    NameServerUnavailableError,
    RemoteError,
    RequestTimeoutError,
    TopicNotFoundError,
)
from bolide.cli.common import (
    DEFAULT_NAMESRV,
    DEFAULT_TIMEOUT_MS,
    AdminCommand,
    ExitCode,
    admin_options,
    exit_code_of,
    format_time_ms,
    parse_time_ms,
)
from bolide.cli.topic import parse_perm, perm_text
from bolide.client.admin import RESET_TO_EARLIEST, RESET_TO_LATEST
from bolide.protocol.system_topics import topic_kind

NOW_MS = 1_714_564_800_000  # 2024-05-01T12:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", RESET_TO_EARLIEST),
        ("LATEST", RESET_TO_LATEST),
        ("now", NOW_MS),
        ("1700000000000", 1_700_000_000_000),
        ("10m", NOW_MS - 600_000),
        ("-2h", NOW_MS - 7_200_000),
        ("30s", NOW_MS - 30_000),
        ("1d", NOW_MS - 86_400_000),
        ("500ms", NOW_MS - 500),
        ("2024-05-01T12:00:00Z", NOW_MS),
        ("2024-05-01T14:00:00+02:00", NOW_MS),
        ("2024-05-01T12:00:00.250+00:00", NOW_MS + 250),
    ],
)
def test_time_arguments(text: str, expected: int) -> None:
    assert parse_time_ms(text, NOW_MS) == expected


def test_local_times() -> None:
    local = datetime.datetime(2024, 5, 1, 12, 0, 0).astimezone()
    expected = int(local.timestamp() * 1000)
    assert parse_time_ms("2024-05-01T12:00:00", NOW_MS) == expected
    assert parse_time_ms("2024-05-01 12:00", NOW_MS) == expected
    assert parse_time_ms("2024-05-01#12:00:00:000", NOW_MS) == expected  # RocketMQ's form
    assert format_time_ms(expected) == "2024-05-01 12:00:00.000"
    assert format_time_ms(0) == "-"


@pytest.mark.parametrize("text", ["yesterday", "12345", "2024-13-01", "10 parsecs"])
def test_bad_time_arguments(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_time_ms(text, NOW_MS)


def test_permissions() -> None:
    assert parse_perm("6") == parse_perm("rw") == parse_perm("WR") == 6
    assert parse_perm("r") == 4 and parse_perm("rwx") == 7 and parse_perm(None) is None
    assert perm_text(6) == "RW-" and perm_text(7) == "RWX"
    for bad in ("16", "q", ""):
        with pytest.raises(typer.BadParameter):
            parse_perm(bad)


def test_topic_kinds() -> None:
    internal = {"DefaultCluster", "broker-a"}
    assert topic_kind("orders", internal) == "normal"
    assert topic_kind("%RETRY%G", internal) == "retry"
    assert topic_kind("%DLQ%G", internal) == "dlq"
    for system in ("TBW102", "SCHEDULE_TOPIC_XXXX", "broker-a", "rmq_sys_wheel_timer"):
        assert topic_kind(system, internal) == "system"


def test_exit_codes() -> None:
    assert exit_code_of(TopicNotFoundError("t")) == ExitCode.NOT_FOUND
    assert exit_code_of(GroupNotFoundError("g")) == ExitCode.NOT_FOUND
    assert exit_code_of(MessageNotFoundError("m")) == ExitCode.NOT_FOUND
    assert exit_code_of(NameServerUnavailableError("n")) == ExitCode.UNREACHABLE
    assert exit_code_of(RequestTimeoutError("slow")) == ExitCode.UNREACHABLE
    assert exit_code_of(RemoteError(1, "refused")) == ExitCode.FAILED


def test_security_options_are_hoisted_from_anywhere() -> None:
    from bolide.cli.security import hoist_security_options

    assert hoist_security_options(
        ["topic", "list", "--access-key", "K", "--json", "--tls", "--secret-key=S", "--", "--tls"]
    ) == ["--access-key", "K", "--tls", "--secret-key=S", "topic", "list", "--json", "--", "--tls"]
    # the servers' own TLS options stay where they are
    server = ["namesrv", "--tls-mode", "enforcing", "--tls-cert", "c.pem", "--tls-key", "k.pem"]
    assert hoist_security_options(server) == server
    assert hoist_security_options(["--access-key", "namesrv", "topic", "list"])[:2] == [
        "--access-key",
        "namesrv",
    ]
    # a trailing option without its value is left for the parser to report
    assert hoist_security_options(["topic", "list", "--access-key"]) == [
        "topic",
        "list",
        "--access-key",
    ]


def test_admin_options_reach_the_command_as_one_admin_command() -> None:
    seen: list[tuple[str, str, int, bool]] = []

    @admin_options
    def show(name: str, *, command: AdminCommand) -> None:
        """Record what the command got."""
        seen.append((name, command.namesrv, command.timeout_ms, command.json_output))

    app = typer.Typer()
    app.command("show")(show)
    app.command("other")(show)  # two commands: typer keeps "show" a subcommand
    runner = CliRunner(env={"BOLIDE_NAMESRV": None})
    given = runner.invoke(app, ["show", "x", "-n", "h:1", "--timeout-ms", "5", "--json"])
    defaults = runner.invoke(app, ["show", "y"])
    too_small = runner.invoke(app, ["show", "z", "--timeout-ms", "0"])
    assert given.exit_code == defaults.exit_code == 0, (given.output, defaults.output)
    assert too_small.exit_code == 2
    assert seen == [("x", "h:1", 5, True), ("y", DEFAULT_NAMESRV, DEFAULT_TIMEOUT_MS, False)]
    help_text = runner.invoke(app, ["show", "--help"], env={"COLUMNS": "120"}).output
    assert "--namesrv" in help_text and "--json" in help_text and "--command" not in help_text


def test_admin_options_need_the_command_parameter() -> None:
    def no_command(name: str) -> None:
        """A command that forgot its AdminCommand."""

    with pytest.raises(InvariantViolationError, match="no parameter 'command'"):
        admin_options(no_command)

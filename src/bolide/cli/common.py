"""What every admin command shares: the ``--namesrv`` / ``--json`` / ``--timeout-ms`` options
(:func:`admin_options` adds them to a command as one :class:`AdminCommand`), running an
:class:`~bolide.client.admin.AdminClient` session, output (rich tables or JSON), time arguments,
and the exit codes.

Exit codes (docs/cli.md)::

    0  done
    1  the operation failed (a broker or name server refused it, or it failed on a broker)
    2  bad usage (unknown option, malformed value)
    3  not found (topic, consumer group, message, broker or cluster)
    4  unreachable (no name server or broker answered in time)

Errors go to stderr as ``bolide: <what went wrong>``; with ``--json`` stdout also gets
``{"error": "<text>", "exitCode": n}``. ``$BOLIDE_NAMESRV`` (read here, in the command line
layer only) is the default name server list, else ``127.0.0.1:9876``.
"""

from __future__ import annotations

import datetime
import enum
import functools
import inspect
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Annotated, Any, NoReturn, TypeVar

import orjson
import typer
from rich.console import Console
from rich.table import Table

from bolide.base import limits
from bolide.base.errors import (
    BolideError,
    ConfigError,
    ConnectionClosedError,
    NotFoundError,
    RequestTimeoutError,
    TopicNotFoundError,
    invariant,
)
from bolide.cli.security import client_options
from bolide.client.admin import RESET_TO_EARLIEST, RESET_TO_LATEST, AdminClient
from bolide.remoting.loop import run

__all__ = [
    "DEFAULT_NAMESRV",
    "AdminCommand",
    "BrokerOption",
    "ClusterOption",
    "ExitCode",
    "JsonOption",
    "NamesrvOption",
    "Output",
    "TimeoutOption",
    "admin_options",
    "admin_session",
    "fail",
    "format_time_ms",
    "parse_time_ms",
    "report_brokers",
]

T = TypeVar("T")

DEFAULT_NAMESRV = "127.0.0.1:9876"
NAMESRV_ENV = "BOLIDE_NAMESRV"
_NON_TERMINAL_WIDTH = 200
"""Columns of tables written to a pipe or file (rich would use 80 and fold them)."""


class ExitCode(enum.IntEnum):
    """The process exit status of every ``bolide`` admin command."""

    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    UNREACHABLE = 4


NamesrvOption = Annotated[
    str,
    typer.Option(
        "--namesrv",
        "-n",
        envvar=NAMESRV_ENV,
        help="Name servers, host:port separated by ';'. Default: $BOLIDE_NAMESRV or "
        "127.0.0.1:9876.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
TimeoutOption = Annotated[
    int,
    typer.Option("--timeout-ms", min=1, help="Timeout of each request, in milliseconds."),
]
DEFAULT_TIMEOUT_MS = limits.ADMIN_REQUEST_TIMEOUT_MS
ClusterOption = Annotated[
    str | None, typer.Option("--cluster", "-c", help="Only the brokers of this cluster.")
]
BrokerOption = Annotated[
    list[str] | None,
    typer.Option("--broker", "-b", help="Only this broker (name or host:port); repeatable."),
]


def exit_code_of(error: BaseException) -> ExitCode:
    """The exit code for an error that ended a command."""
    if isinstance(error, NotFoundError | TopicNotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(error, ConnectionClosedError | RequestTimeoutError):
        return ExitCode.UNREACHABLE
    if isinstance(error, ConfigError):
        return ExitCode.USAGE
    return ExitCode.FAILED


class Output:
    """Where a command writes: tables and notes for people, or one JSON document."""

    def __init__(self, json_output: bool) -> None:
        self.json_output = json_output
        stdout_is_terminal = sys.stdout.isatty()
        self.console = Console(
            width=None if stdout_is_terminal else _NON_TERMINAL_WIDTH,
            highlight=False,
            soft_wrap=not stdout_is_terminal,
        )
        self.errors = Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def interactive(self) -> bool:
        """Whether progress bars make sense (a person watches stderr, not a script)."""
        return not self.json_output and self.errors.is_terminal

    def json(self, value: Any) -> None:
        """Write ``value`` as one JSON document (and a newline) to stdout."""
        sys.stdout.write(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() + "\n")
        sys.stdout.flush()

    def json_line(self, value: Any) -> None:
        """Write ``value`` as one line of JSON (streams: ``message tail``)."""
        self.json(value)

    def table(
        self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]
    ) -> None:
        """A table on stdout; numbers right-aligned, None shown as ``-``."""
        rows = [list(row) for row in rows]
        table = Table(title=title, title_justify="left", show_lines=False)
        for index, column in enumerate(columns):
            numeric = bool(rows) and all(isinstance(row[index], int | float) for row in rows)
            table.add_column(column, justify="right" if numeric else "left", overflow="fold")
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        self.console.print(table)

    def line(self, text: str) -> None:
        """A line of text on stdout (markup off)."""
        self.console.print(text, markup=False)

    def note(self, text: str) -> None:
        """A remark for people on stderr (not part of the output)."""
        self.errors.print(text, markup=False)


def report_brokers(
    output: Output,
    kind: str,
    name: str,
    brokers: Sequence[str],
    done: str,
    *,
    no_broker: str = "",
    extra: dict[str, Any] | None = None,
) -> None:
    """Report a change applied on ``brokers``: ``{kind: name, "brokers": [...], **extra}`` with
    ``--json``, else the line ``<kind> <name> <done> <brokers>`` (``no_broker`` when none)."""
    if output.json_output:
        output.json({kind: name, "brokers": brokers, **(extra or {})})
    else:
        output.line(f"{kind} {name} {done} {', '.join(brokers) or no_broker}")


def fail(output: Output, message: str, code: ExitCode) -> NoReturn:
    """Report ``message`` and end the command with ``code``."""
    output.errors.print(f"bolide: {message}", markup=False)
    if output.json_output:
        output.json({"error": message, "exitCode": int(code)})
    raise typer.Exit(code=int(code))


def admin_session(
    output: Output,
    namesrv: str,
    timeout_ms: int,
    action: Callable[[AdminClient], Awaitable[T]],
) -> T:
    """Run ``action`` with an AdminClient on a fresh event loop and return its result.

    Operating errors end the command with their exit code and a clear message; Ctrl-C ends it
    with 130 (quietly).
    """

    async def session() -> T:
        async with AdminClient(namesrv, timeout_ms=timeout_ms, **client_options()) as admin:
            return await action(admin)

    try:
        return run(session())
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    except BolideError as error:
        fail(output, describe(error), exit_code_of(error))


def describe(error: BolideError) -> str:
    """The message for an error, with a hint for the usual causes."""
    text = str(error) or type(error).__name__
    if isinstance(error, ConnectionClosedError | RequestTimeoutError):
        cause = error.__cause__
        if cause is not None and str(cause) and str(cause) not in text:
            text = f"{text} ({cause})"
        text = f"cannot reach the cluster: {text}"
    return text


class AdminCommand:
    """What ``--namesrv``, ``--timeout-ms`` and ``--json`` give an admin command: where it writes
    (:attr:`output`) and sessions with an AdminClient against those name servers (:meth:`run`).
    """

    def __init__(self, namesrv: str, timeout_ms: int, json_output: bool) -> None:
        self.namesrv = namesrv
        self.timeout_ms = timeout_ms
        self.output = Output(json_output)

    @property
    def json_output(self) -> bool:
        """Whether ``--json`` was given."""
        return self.output.json_output

    def run(self, action: Callable[[AdminClient], Awaitable[T]]) -> T:
        """``action``'s result in a fresh admin session (errors end the command: see
        :func:`admin_session`)."""
        return admin_session(self.output, self.namesrv, self.timeout_ms, action)

    def change_brokers(
        self,
        action: Callable[[AdminClient], Awaitable[list[str]]],
        kind: str,
        name: str,
        done: str,
        *,
        no_broker: str = "",
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Run ``action``, a change that returns the brokers it was applied on, and report them
        (see :func:`report_brokers`)."""
        brokers = self.run(action)
        report_brokers(self.output, kind, name, brokers, done, no_broker=no_broker, extra=extra)


_ADMIN_PARAMETERS = (
    inspect.Parameter(
        "namesrv", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_NAMESRV, annotation=NamesrvOption
    ),
    inspect.Parameter(
        "timeout_ms",
        inspect.Parameter.KEYWORD_ONLY,
        default=DEFAULT_TIMEOUT_MS,
        annotation=TimeoutOption,
    ),
    inspect.Parameter(
        "json_output", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOption
    ),
)
_COMMAND_PARAMETER = "command"


def admin_options(function: Callable[..., None]) -> Callable[..., None]:
    """An admin command with the options every one takes, for ``app.command(...)``.

    ``function`` declares its own arguments and options and, last, the keyword-only parameter
    ``command: AdminCommand``; typer sees ``--namesrv``, ``--timeout-ms`` and ``--json`` in its
    place (last in the help, as everywhere) and the command gets them as one AdminCommand.
    """
    signature = inspect.signature(function, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != _COMMAND_PARAMETER]
    invariant(
        len(own) == len(signature.parameters) - 1,
        f"{function.__name__} has no parameter {_COMMAND_PARAMETER!r} for the admin options",
    )

    @functools.wraps(function)
    def with_options(**values: Any) -> None:
        command = AdminCommand(
            values.pop("namesrv"), values.pop("timeout_ms"), values.pop("json_output")
        )
        function(**values, **{_COMMAND_PARAMETER: command})

    # Typer reads the options from the signature: the command's own, then the admin options.
    with_options.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own, *_ADMIN_PARAMETERS]
    )
    return with_options


# --- times ---------------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^-?(\d+)\s*(ms|s|m|h|d)$")
_RELATIVE_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ROCKETMQ_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})#(\d{2}:\d{2}:\d{2}):(\d{3})$")
_EPOCH_MS_MIN_DIGITS = 10
"""An all-digit time this long or longer is epoch milliseconds (shorter: a mistake)."""


def parse_time_ms(text: str, now_ms: int) -> int:
    """A time argument in ms since the epoch.

    Accepts ``earliest`` (RESET_TO_EARLIEST), ``latest`` (RESET_TO_LATEST), ``now``, epoch
    milliseconds, ISO 8601 (``2024-05-01T12:00:00``, ``2024-05-01 12:00``; local time unless
    it has an offset or ``Z``), RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS``, or a duration ago
    (``10m``, ``-2h``, ``30s``, ``1d``, ``500ms``). Raises typer.BadParameter.
    """
    value = text.strip()
    lowered = value.lower()
    if lowered == "earliest":
        return RESET_TO_EARLIEST
    if lowered == "latest":
        return RESET_TO_LATEST
    if lowered == "now":
        return now_ms
    if value.isdigit():
        if len(value) < _EPOCH_MS_MIN_DIGITS:
            raise typer.BadParameter(f"{text!r} is too small for epoch milliseconds")
        return int(value)
    relative = _RELATIVE.match(lowered)
    if relative is not None:
        return now_ms - int(relative.group(1)) * _RELATIVE_UNIT_MS[relative.group(2)]
    rocketmq = _ROCKETMQ_TIME.match(value)
    if rocketmq is not None:
        value = f"{rocketmq.group(1)}T{rocketmq.group(2)}.{rocketmq.group(3)}"
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise typer.BadParameter(
            f"{text!r} is not a time: use earliest, latest, now, epoch ms, ISO 8601 "
            "(2024-05-01T12:00:00) or a duration ago (10m, 2h)"
        ) from error
    if moment.tzinfo is None:
        moment = moment.astimezone()  # naive: local time, as people type it
    return int(moment.timestamp() * 1000)


def format_time_ms(timestamp_ms: int) -> str:
    """Local ISO time to the millisecond, ``-`` for 0 or less."""
    if timestamp_ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000)
    return moment.isoformat(sep=" ", timespec="milliseconds")

"""Value parsers and renderers of the broker.conf keys: plain strings, integers, booleans,
paths, enums, address lists, delay levels, hours of the day, and those of ACL and TLS
(optional paths, lower-case enums, the credentials JSON). Parsers take ``(key, text)`` and
raise ConfigError naming the key; renderers give the text broker.conf would hold. Also the
broker.conf file reader (:func:`parse_broker_conf`, :func:`read_broker_conf`;
:mod:`bolide.broker.config` re-exports them)."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bolide.base import limits
from bolide.base.errors import ConfigError

__all__ = [
    "DEFAULT_MESSAGE_DELAY_LEVEL",
    "as_tuple",
    "bad",
    "enum_parser",
    "lower_enum_parser",
    "parse_addresses",
    "parse_any_str",
    "parse_bool",
    "parse_broker_conf",
    "parse_credentials",
    "parse_delay_level_key",
    "parse_delay_levels",
    "parse_hours",
    "parse_int",
    "parse_optional_credentials",
    "parse_optional_path",
    "parse_optional_secret",
    "parse_optional_user",
    "parse_path",
    "parse_rpc_list",
    "parse_str",
    "read_broker_conf",
    "render_addresses",
    "render_credentials",
    "render_delay_levels",
    "render_hours",
    "render_optional",
    "render_plain",
    "render_rpc_list",
    "render_secret",
    "render_user",
    "rewrite_broker_conf",
]


def bad(key: str, text: str, expected: str) -> ConfigError:
    return ConfigError(f"broker config {key}={text!r}: expected {expected}")


def parse_path(key: str, text: str) -> Path:
    if not text:
        raise bad(key, text, "a non-empty path")
    return Path(text).expanduser()


def render_plain(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def lower_enum_parser(kind: type[enum.Enum]) -> Callable[[str, str], Any]:
    """Enums whose values RocketMQ writes in lower case (tls.server.mode...)."""
    return enum_parser(kind, upper=False)


def parse_credentials(key: str, text: str) -> tuple[str, str]:
    return _secret_pair(key, text, ("accessKey", "secretKey"), non_empty=False)


def parse_optional_user(key: str, text: str) -> tuple[str, str] | None:
    """initAuthenticationUser: JSON ``{"username": "...", "password": "..."}`` (empty: none)."""
    if not text:
        return None
    return _secret_pair(key, text, ("username", "password"), non_empty=True)


def _secret_pair(
    key: str, text: str, names: tuple[str, str], *, non_empty: bool
) -> tuple[str, str]:
    """The two string members ``names`` of the JSON object ``text`` (with ``non_empty``,
    neither may be empty).

    Raises:
        ConfigError: naming the expected form; never echoing ``text`` (it holds a secret).
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    first, second = (value.get(name) if isinstance(value, dict) else None for name in names)
    if not (isinstance(first, str) and isinstance(second, str)) or (
        non_empty and not (first and second)
    ):
        expected = ", ".join(f'"{name}": "..."' for name in names)
        raise ConfigError(f"broker config {key}: expected {{{expected}}}")
    return first, second


def render_user(value: object) -> str:
    return _masked_pair(value, ("username", "password"))


def parse_optional_secret(key: str, text: str) -> str | None:
    return text or None


def render_secret(value: object) -> str:
    # GET_BROKER_CONFIG shows the settings to any signed account: never a password.
    return "" if value is None else "******"


def render_credentials(value: object) -> str:
    return _masked_pair(value, ("accessKey", "secretKey"))


def _masked_pair(value: object, names: tuple[str, str]) -> str:
    """The pair ``value`` as the JSON object of ``names``, its second (secret) member masked:
    GET_BROKER_CONFIG shows the settings to any signed account. Empty for no pair."""
    if not isinstance(value, tuple):
        return ""
    return json.dumps({names[0]: value[0], names[1]: "******"})


def parse_optional_path(key: str, text: str) -> Path | None:
    return None if not text else parse_path(key, text)


def parse_optional_credentials(key: str, text: str) -> tuple[str, str] | None:
    return None if not text else parse_credentials(key, text)


def render_optional(value: object) -> str:
    return "" if value is None else render_plain(value)


_GRPC_REQUEST_NAME = re.compile(r"apache\.rocketmq\.v2\.[A-Z][A-Za-z]*(Request|Command)")


def parse_rpc_list(key: str, text: str) -> frozenset[str]:
    """Comma-separated RPCs as RocketMQ 5.3's auth whitelists name them: a remoting request
    code (``"10"``) or a 5.x request message's full name
    (``"apache.rocketmq.v2.QueryRouteRequest"``; the telemetry stream is
    ``apache.rocketmq.v2.TelemetryCommand``). Empty: none."""
    entries: set[str] = set()
    for part in text.split(","):
        item = part.strip()
        if not item:
            continue
        if item.isdigit():
            entries.add(str(int(item)))
        elif _GRPC_REQUEST_NAME.fullmatch(item):
            entries.add(item)
        else:
            raise bad(key, text, "request codes or apache.rocketmq.v2.<Name>Request names, ','")
    return frozenset(entries)


def render_rpc_list(value: object) -> str:
    return ",".join(sorted(str(item) for item in value)) if isinstance(value, frozenset) else ""


def parse_broker_conf(text: str) -> dict[str, str]:
    """Parse broker.conf (Java properties) text into ``{key: value}``, both trimmed.

    Accepts ``key=value`` and ``key: value`` lines, ``#`` and ``!`` comment lines, blank
    lines, a leading BOM, and a trailing backslash continuing a line. A later duplicate key
    wins, as in Java. Raises :class:`ConfigError` (with the line number) for a line that has
    no separator or an empty key.
    """
    result: dict[str, str] = {}
    lines = text.removeprefix("\ufeff").splitlines()
    index = 0
    while index < len(lines):
        number = index + 1
        logical = lines[index].strip()
        index += 1
        while logical.endswith("\\") and index < len(lines):
            logical = logical[:-1] + lines[index].strip()
            index += 1
        if not logical or logical[0] in "#!":
            continue
        positions = [p for p in (logical.find("="), logical.find(":")) if p >= 0]
        if not positions:
            raise ConfigError(f"broker.conf line {number}: expected key=value, got {logical!r}")
        split_at = min(positions)
        key, value = logical[:split_at].strip(), logical[split_at + 1 :].strip()
        if not key:
            raise ConfigError(f"broker.conf line {number}: empty key in {logical!r}")
        result[key] = value
    return result


def read_broker_conf(path: Path) -> dict[str, str]:
    """Read and parse a broker.conf file; :class:`ConfigError` if it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read broker config {path}: {error}") from error
    try:
        return parse_broker_conf(text)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from error


def rewrite_broker_conf(text: str, updates: Mapping[str, str]) -> str:
    """``text`` (broker.conf) with each key of ``updates`` set to its new value: a line that
    sets the key is rewritten in place (comments, order and other lines kept; every line of a
    key set twice), a key the text does not set is appended. Values are written as given
    (broker.conf values are plain text, no escapes)."""
    lines = text.removeprefix("\ufeff").splitlines()
    output: list[str] = []
    written: set[str] = set()
    index = 0
    while index < len(lines):
        first = index
        logical = lines[index].strip()
        index += 1
        while logical.endswith("\\") and index < len(lines):
            logical = logical[:-1] + lines[index].strip()
            index += 1
        positions = [p for p in (logical.find("="), logical.find(":")) if p >= 0]
        key = logical[: min(positions)].strip() if positions and logical[:1] not in "#!" else ""
        if key in updates:
            output.append(f"{key}={updates[key]}")
            written.add(key)
        else:
            output.extend(lines[first:index])
    output.extend(f"{key}={value}" for key, value in updates.items() if key not in written)
    return "\n".join(output) + "\n"


# --- the broker.conf values of every other key (moved from bolide.broker.config) ---------------

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""RocketMQ's messageDelayLevel: 18 levels, level n is the n-th entry."""

_DELAY_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DELAY_TOKEN = re.compile(r"([0-9]+)([smhd])")


def parse_str(key: str, text: str) -> str:
    if not text:
        raise bad(key, text, "a non-empty string")
    return text


def parse_any_str(key: str, text: str) -> str:
    """A string that may be empty (an optional address)."""
    return text


def parse_int(key: str, text: str) -> int:
    if _INTEGER.fullmatch(text) is None:
        raise bad(key, text, "an integer")
    return int(text)


def parse_bool(key: str, text: str) -> bool:
    # Java's Boolean.parseBoolean reads anything but "true" as false; a typo like "ture" would
    # silently disable a feature, so only true/false (any case) are accepted.
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise bad(key, text, "true or false")
    return lowered == "true"


def enum_parser(kind: type[enum.Enum], *, upper: bool = True) -> Callable[[str, str], Any]:
    """A parser of ``kind``'s values, read in upper case (``upper=False``: lower case)."""

    def parse(key: str, text: str) -> Any:
        try:
            return kind(text.upper() if upper else text.lower())
        except ValueError:
            names = " or ".join(member.value for member in kind)
            raise bad(key, text, names) from None

    return parse


def parse_addresses(key: str, text: str) -> tuple[str, ...]:
    addresses: list[str] = []
    for part in text.split(";"):
        address = part.strip()
        if not address:
            continue
        host, separator, port_text = address.rpartition(":")
        if not separator or not host or _INTEGER.fullmatch(port_text) is None:
            raise bad(key, text, "host:port entries separated by ';'")
        if not 0 < int(port_text) <= 65_535:
            raise bad(key, text, "ports between 1 and 65535")
        addresses.append(address)
    return tuple(addresses)


def parse_delay_levels(text: str, *, key: str = "messageDelayLevel") -> tuple[int, ...]:
    """Parse RocketMQ's delay level list, e.g. ``"1s 5s 1m 2h"``, into milliseconds per level.

    Units are s, m, h and d (as RocketMQ's ScheduleMessageService). Level n (1-based) is the
    n-th entry. Raises :class:`ConfigError` for an empty list, a token without a known unit,
    a zero delay, or more than ``limits.DELAY_LEVELS_MAX_COUNT`` levels.
    """
    tokens = text.split()
    if not tokens or len(tokens) > limits.DELAY_LEVELS_MAX_COUNT:
        raise bad(key, text, f"1 to {limits.DELAY_LEVELS_MAX_COUNT} delays like '1s 5m 2h'")
    levels_ms: list[int] = []
    for token in tokens:
        match = _DELAY_TOKEN.fullmatch(token)
        if match is None or int(match.group(1)) == 0:
            raise bad(key, text, "positive delays with unit s, m, h or d, like '1s 5m 2h'")
        levels_ms.append(int(match.group(1)) * _DELAY_UNIT_MS[match.group(2)])
    return tuple(levels_ms)


def parse_delay_level_key(key: str, text: str) -> tuple[int, ...]:
    return parse_delay_levels(text, key=key)


def parse_hours(key: str, text: str) -> tuple[int, ...]:
    hours: list[int] = []
    for part in text.split(";"):
        part = part.strip()
        if _INTEGER.fullmatch(part) is None or not 0 <= int(part) <= 23:
            raise bad(key, text, "hours of the day (0-23) separated by ';'")
        hours.append(int(part))
    return tuple(hours)


def render_addresses(value: object) -> str:
    return ";".join(str(address) for address in as_tuple(value))


def render_delay_levels(value: object) -> str:
    tokens: list[str] = []
    for delay_ms in as_tuple(value):
        for unit in ("d", "h", "m", "s"):
            unit_ms = _DELAY_UNIT_MS[unit]
            if int(delay_ms) % unit_ms == 0:
                tokens.append(f"{int(delay_ms) // unit_ms}{unit}")
                break
    return " ".join(tokens)


def render_hours(value: object) -> str:
    return ";".join(f"{int(hour):02d}" for hour in as_tuple(value))


def as_tuple(value: object) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,)

"""Value parsers and renderers of the broker.conf keys for ACL and TLS (optional paths,
lower-case enums, the credentials JSON). Parsers take ``(key, text)`` and raise ConfigError
naming the key; renderers give the text broker.conf would hold. Also the broker.conf file
reader (:func:`parse_broker_conf`, :func:`read_broker_conf`; :mod:`bolide.broker.config`
re-exports them)."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bolide.base.errors import ConfigError

__all__ = [
    "lower_enum_parser",
    "parse_broker_conf",
    "parse_credentials",
    "parse_optional_credentials",
    "parse_optional_path",
    "parse_optional_secret",
    "parse_optional_user",
    "read_broker_conf",
    "render_credentials",
    "render_optional",
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

    def parse(key: str, text: str) -> Any:
        try:
            return kind(text.lower())
        except ValueError:
            names = " or ".join(member.value for member in kind)
            raise bad(key, text, names) from None

    return parse


def parse_credentials(key: str, text: str) -> tuple[str, str]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("accessKey"), str)
        or not isinstance(value.get("secretKey"), str)
    ):
        # never echo the text: it holds a secret
        raise ConfigError(
            f'broker config {key}: expected {{"accessKey": "...", "secretKey": "..."}}'
        )
    return value["accessKey"], value["secretKey"]


def parse_optional_user(key: str, text: str) -> tuple[str, str] | None:
    """initAuthenticationUser: JSON ``{"username": "...", "password": "..."}`` (empty: none)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("username"), str)
        or not isinstance(value.get("password"), str)
        or not value["username"]
        or not value["password"]
    ):
        # never echo the text: it holds a password
        raise ConfigError(f'broker config {key}: expected {{"username": "...", "password": "..."}}')
    return value["username"], value["password"]


def render_user(value: object) -> str:
    if not isinstance(value, tuple):
        return ""
    return json.dumps({"username": value[0], "password": "******"})


def parse_optional_secret(key: str, text: str) -> str | None:
    return text or None


def render_secret(value: object) -> str:
    # GET_BROKER_CONFIG shows the settings to any signed account: never a password.
    return "" if value is None else "******"


def render_credentials(value: object) -> str:
    if not isinstance(value, tuple):
        return ""
    # GET_BROKER_CONFIG shows the settings to any signed account: never the secret.
    return json.dumps({"accessKey": value[0], "secretKey": "******"})


def parse_optional_path(key: str, text: str) -> Path | None:
    return None if not text else parse_path(key, text)


def parse_optional_credentials(key: str, text: str) -> tuple[str, str] | None:
    return None if not text else parse_credentials(key, text)


def render_optional(value: object) -> str:
    return "" if value is None else render_plain(value)


def parse_code_list(key: str, text: str) -> frozenset[int]:
    """Comma-separated request codes (``"10,11"``; empty: none)."""
    codes: set[int] = set()
    for part in text.split(","):
        item = part.strip()
        if not item:
            continue
        if not item.isdigit():
            raise bad(key, text, "request codes separated by ','")
        codes.add(int(item))
    return frozenset(codes)


def render_code_list(value: object) -> str:
    return ",".join(str(code) for code in sorted(value)) if isinstance(value, frozenset) else ""


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

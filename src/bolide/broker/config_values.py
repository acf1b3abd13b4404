"""Value parsers and renderers of the broker.conf keys for ACL and TLS (optional paths,
lower-case enums, the credentials JSON). Parsers take ``(key, text)`` and raise ConfigError
naming the key; renderers give the text broker.conf would hold."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bolide.base.errors import ConfigError

__all__ = [
    "lower_enum_parser",
    "parse_credentials",
    "parse_optional_credentials",
    "parse_optional_path",
    "parse_optional_secret",
    "render_credentials",
    "render_optional",
    "render_secret",
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

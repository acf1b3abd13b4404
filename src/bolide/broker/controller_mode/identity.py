"""The broker's persistent controller id (RocketMQ 5.1.1+, round3-facts §1.1).

``<storePathRootDir>/brokerIdentity`` holds ``cluster#brokerName#brokerId`` once the id is
applied; ``brokerIdentity-temp`` holds ``cluster#brokerName#brokerId#registerCheckCode``
while it is being applied (a broker that crashed in between retries with the same code).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bolide.base.errors import ConfigError
from bolide.base.fileio import atomic_write

__all__ = ["IdentityFiles", "PendingIdentity"]

IDENTITY_FILE = "brokerIdentity"
TEMP_IDENTITY_FILE = "brokerIdentity-temp"


@dataclass(frozen=True, slots=True)
class PendingIdentity:
    """An id being applied, with the check code it is applied under."""

    broker_id: int
    register_check_code: str


class IdentityFiles:
    """The two files under ``root`` for the broker set ``cluster``/``broker_name``."""

    def __init__(self, root: Path, cluster: str, broker_name: str) -> None:
        self._root = root
        self._cluster = cluster
        self._broker_name = broker_name

    def applied(self) -> int | None:
        """The applied id, None when none was; raises :class:`ConfigError` when the file
        belongs to another broker set or cannot be read."""
        fields = self._read(IDENTITY_FILE, 3)
        return None if fields is None else _id(fields[2], IDENTITY_FILE)

    def pending(self) -> PendingIdentity | None:
        """The id being applied (a crash between 1013 and the identity file), or None."""
        fields = self._read(TEMP_IDENTITY_FILE, 4)
        if fields is None:
            return None
        return PendingIdentity(_id(fields[2], TEMP_IDENTITY_FILE), fields[3])

    def write_pending(self, pending: PendingIdentity) -> None:
        text = (
            f"{self._cluster}#{self._broker_name}#{pending.broker_id}#{pending.register_check_code}"
        )
        self._root.mkdir(parents=True, exist_ok=True)
        atomic_write(self._root / TEMP_IDENTITY_FILE, text.encode())

    def drop_pending(self) -> None:
        """Forget the id being applied (the controller refused it)."""
        (self._root / TEMP_IDENTITY_FILE).unlink(missing_ok=True)

    def commit(self, broker_id: int) -> None:
        """Write the identity file, then drop the temporary one."""
        self._root.mkdir(parents=True, exist_ok=True)
        text = f"{self._cluster}#{self._broker_name}#{broker_id}"
        atomic_write(self._root / IDENTITY_FILE, text.encode())
        (self._root / TEMP_IDENTITY_FILE).unlink(missing_ok=True)

    def _read(self, name: str, count: int) -> list[str] | None:
        path = self._root / name
        try:
            text = path.read_text("utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise ConfigError(f"cannot read {path}: {error}") from error
        fields = text.split("#", count - 1)
        if len(fields) != count:
            raise ConfigError(f"{path} is not cluster#brokerName#brokerId...: {text!r}")
        if fields[0] != self._cluster or fields[1] != self._broker_name:
            raise ConfigError(
                f"{path} belongs to {fields[0]}/{fields[1]},"
                f" not {self._cluster}/{self._broker_name}"
            )
        return fields


def _id(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError as error:
        raise ConfigError(f"{name}: broker id {text!r} is not a number") from error
    if value < 1:
        raise ConfigError(f"{name}: broker id {value} is not >= 1")
    return value

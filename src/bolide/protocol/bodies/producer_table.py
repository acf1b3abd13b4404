"""GET_ALL_PRODUCER_INFO (328) body: every producer group a broker knows with its clients
(Java's ProducerTableInfo: ``{"data": {group: [ProducerInfo, ...]}}``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from bolide.protocol.bodies.fastjson import dumps
from bolide.protocol.bodies.values import (
    as_object,
    get_enum_or,
    get_int,
    get_list,
    get_object,
    get_str,
    parse_object,
)
from bolide.protocol.codes import LanguageCode

__all__ = ["ProducerInfo", "ProducerTableInfo"]


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer client of a group; ``last_update_timestamp_ms`` is its last heartbeat,
    epoch ms."""

    client_id: str
    remote_ip: str
    language: LanguageCode
    version: int
    last_update_timestamp_ms: int

    def to_object(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "remoteIP": self.remote_ip,
            "language": self.language.name,
            "version": self.version,
            "lastUpdateTimestamp": self.last_update_timestamp_ms,
        }

    @classmethod
    def from_object(cls, value: Any) -> Self:
        """From the JSON object (an unknown language reads as OTHER); raises BodyError."""
        obj = as_object(value, "producer info")
        language = get_enum_or(obj, "language", LanguageCode, LanguageCode.OTHER)
        return cls(
            get_str(obj, "clientId"),
            get_str(obj, "remoteIP", ""),
            language,
            get_int(obj, "version", 0),
            get_int(obj, "lastUpdateTimestamp", 0),
        )


@dataclass(frozen=True, slots=True)
class ProducerTableInfo:
    """Producer group -> its clients."""

    data: dict[str, tuple[ProducerInfo, ...]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        """The JSON body."""
        table = {group: [info.to_object() for info in infos] for group, infos in self.data.items()}
        return dumps({"data": table})

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Parse; raises :class:`BodyError`."""
        obj = parse_object(data, "producer table")
        groups = get_object(obj, "data")
        return cls(
            {
                str(group): tuple(
                    ProducerInfo.from_object(item) for item in get_list(groups, group)
                )
                for group in groups
            }
        )
